package gitstatus_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestConfigFileAgreesWithGit compares the harness's reading of one
// configuration file with `git config --list --file F`: the same keys in
// the same order with the same last values where git reads the file, and
// a refusal where git calls it a bad config line. Section headers are
// read as git's get_base_var reads them: whitespace (git's isspace: space,
// tab, a carriage return not ending the line) starts a quoted subsection.
func TestConfigFileAgreesWithGit(t *testing.T) {
	cases := []struct{ name, text string }{
		{"tab before a subsection", "[remote\t\"x\"]\n\turl = u\n"},
		{"spaces before a subsection", "[remote  \"x\"]\n\turl = u\n"},
		{"space and tab before a subsection", "[remote \t \"x\"]\n\turl = u\n"},
		{"carriage return before a subsection", "[remote\r\"x\"]\n\turl = u\n"},
		{"tab before a subsection, mixed case", "[Remote\t\"X\"]\n\tURL = u\n"},
		{"tab after a legacy dotted name", "[a.B\t\"c\"]\nk = v\n"},
		{"tab before a subsection, no section name", "[\t\"x\"]\n\tk = v\n"},
		{"escapes in a subsection", "[remote \"a\\\"b\\\\c\\d\"]\n\turl = u\n"},
		{"tab inside a subsection", "[remote \"a\tb\"]\nk = v\n"},
		{"key on the header line", "[remote\t\"x\"]k = v\n"},
		{"CRLF line endings", "[remote\t\"x\"]\r\n\turl = u\r\n\tbare\r\n"},
		{"newline before a subsection", "[remote\n\"x\"]\n\turl = u\n"},
		{"CRLF before a subsection", "[remote \r\n\"x\"]\n\turl = u\n"},
		{"vertical tab before a subsection", "[remote\v\"x\"]\n\turl = u\n"},
		{"form feed before a subsection", "[remote\f\"x\"]\n\turl = u\n"},
		{"newline inside a subsection", "[remote \"x\ny\"]\n\turl = u\n"},
		{"escaped newline inside a subsection", "[remote \"x\\\ny\"]\n\turl = u\n"},
		{"unterminated subsection", "[remote \"x"},
		{"unterminated subsection before a bracket", "[remote \"x]\n"},
		{"escaped closing quote", "[remote \"x\\\"]\n"},
		{"space after a subsection", "[remote \"x\" ]\n\turl = u\n"},
		{"tab after a subsection", "[remote \"x\"\t]\n"},
		{"whitespace without a subsection", "[remote\t]\n"},
		{"unquoted subsection", "[remote\tx]\n"},
		{"underscore in a section name", "[co_re]\nk = v\n"},
		{"comment after a key", "[core]\nk # c\n"},
		{"key starting with a digit", "[core]\n1k = v\n"},
		{"key starting with a dash", "[core]\n-k = v\n"},
		{"carriage return after a key", "[core]\nk\r= v\n"},
		{"digits and dashes after a key's first letter", "[core]\nk-1 = v\n"},
		{"key before any section", "k = v\n[core]\nbare = false\n"},
		{"tabs inside a value", "[core]\nk = a\tb \t c\n"},
		{"tab inside a quoted value", "[core]\nk = \"a\tb\"\n"},
		{"backslash at the end of the file", "[core]\nk = a\\"},
		{"key at the end of the file", "[core]\nk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newGitEnv(t)
			f := filepath.Join(t.TempDir(), "config")
			must(t, os.WriteFile(f, []byte(tc.text), 0o644))
			out, gitErr := e.try("", "config", "--list", "-z", "--file", f)
			e["GIT_CONFIG_GLOBAL"] = f
			cfg, err := gitstatus.LoadConfig(filepath.Join(t.TempDir(), "none"), "main", e.get)
			if gitErr != nil {
				var ue *gitstatus.UnsupportedError
				if !errors.As(err, &ue) || ue.Code != ctoharness.BlockSourceUnreadable {
					t.Fatalf("git refuses %q (%v) but the harness read it: %v", tc.text, gitErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("git reads %q, the harness refused it: %v", tc.text, err)
			}
			last := map[string]string{}
			var keys []string
			for _, rec := range strings.Split(out, "\x00") {
				if rec == "" {
					continue
				}
				k, v, _ := strings.Cut(rec, "\n")
				if _, seen := last[k]; !seen {
					keys = append(keys, k)
				}
				last[k] = v
			}
			if got := cfg.Keys(""); !slices.Equal(got, keys) {
				t.Fatalf("%q: harness keys %q, git keys %q", tc.text, got, keys)
			}
			for _, k := range keys {
				if got, _ := cfg.Get(k); got != last[k] {
					t.Errorf("%q: %s is %q for the harness, %q for git", tc.text, k, got, last[k])
				}
			}
		})
	}
}
