package gitstatus_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

// TestEnvConfigAgreesWithGit compares the configuration the route takes
// from the environment with what `git config --list` reports under the
// same environment; where git refuses the environment, the route must
// refuse it too.
func TestEnvConfigAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed; the differential config test needs it")
	}
	cases := []struct {
		name string
		env  map[string]string
	}{
		{"parameters, old style", map[string]string{"GIT_CONFIG_PARAMETERS": "'core.fileMode=false' 'Sec.SubSec.Key=a=b'"}},
		{"parameters, new style", map[string]string{"GIT_CONFIG_PARAMETERS": "'core.autocrlf'='input'  'x.y'='two words' 'a.b'= 'q.r'='it'\\''s'"}},
		{"parameters, key without a value", map[string]string{"GIT_CONFIG_PARAMETERS": "'core.symlinks'"}},
		{"parameters, unquoted", map[string]string{"GIT_CONFIG_PARAMETERS": "core.fileMode=false"}},
		{"parameters, bad key", map[string]string{"GIT_CONFIG_PARAMETERS": "'nodot=1'"}},
		{"count", map[string]string{"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "Core.AutoCRLF", "GIT_CONFIG_VALUE_0": "true",
			"GIT_CONFIG_KEY_1": "remote.Origin.url", "GIT_CONFIG_VALUE_1": "https://example.invalid/r.git"}},
		{"count and parameters: parameters last", map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.eol", "GIT_CONFIG_VALUE_0": "crlf",
			"GIT_CONFIG_PARAMETERS": "'core.eol'='lf'"}},
		{"count, missing key", map[string]string{"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "core.eol", "GIT_CONFIG_VALUE_0": "crlf"}},
		{"count, not a number", map[string]string{"GIT_CONFIG_COUNT": "two"}},
		{"GIT_CONFIG_NOSYSTEM not a boolean", map[string]string{"GIT_CONFIG_NOSYSTEM": "maybe"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			gitCLI(t, dir, "init", "-q", "repo")
			repo := filepath.Join(dir, "repo")
			env := map[string]string{"HOME": dir, "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.Getenv("PATH")}
			for k, v := range tc.env {
				env[k] = v
			}
			cmd := exec.Command("git", "config", "--list", "-z")
			cmd.Dir = repo
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			gitErr := cmd.Run()
			cfg, err := gitstatus.LoadConfig(filepath.Join(repo, ".git"), "main", func(k string) string { return env[k] })
			if gitErr != nil {
				var ue *gitstatus.UnsupportedError
				if !errors.As(err, &ue) || ue.Code != ctoharness.BlockSourceUnreadable {
					t.Fatalf("git refuses this environment (%v: %s) but the route read it: %v", gitErr, errb.String(), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("git reads this environment, the route refused it: %v", err)
			}
			last := map[string]*string{}
			var keys []string
			for _, rec := range strings.Split(out.String(), "\x00") {
				if rec == "" {
					continue
				}
				k, v, ok := strings.Cut(rec, "\n")
				if _, seen := last[k]; !seen {
					keys = append(keys, k)
				}
				if ok {
					last[k] = &v
				} else {
					last[k] = nil
				}
			}
			for _, k := range keys {
				got, found := cfg.Get(k)
				want := ""
				if last[k] != nil {
					want = *last[k]
				}
				if !found || got != want {
					t.Errorf("%s: route %q (found %v), git %q", k, got, found, want)
				}
			}
			if len(keys) == 0 {
				t.Fatal("git listed no configuration at all")
			}
		})
	}
}
