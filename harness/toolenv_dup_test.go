package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/step/warm"
)

// The warm caches replace the scratch's GOCACHE rather than add a second
// one: with two, exec keeps the one that sorts last, and when the host's
// cache path sorts first (/root/.cache against a runs directory under
// /tmp) every verification compiled from a cold cache.
func TestToolEnvWarmCachesReplaceScratch(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	host := t.TempDir()
	// The go command the gate asks keeps telemetry in HOME, in a process
	// that can outlive it; off, as `go telemetry off` leaves it, nothing
	// writes there while the test's directory is removed.
	tel := filepath.Join(host, ".config", "go", "telemetry")
	if err := os.MkdirAll(tel, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tel, "mode"), []byte("off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	build, mod := filepath.Join(host, "a-build"), filepath.Join(host, "a-mod")
	for _, d := range []string{build, mod} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"PATH": filepath.Dir(goBin), "GOCACHE": build, "GOMODCACHE": mod, "HOME": host}
	r := &run{o: Options{Config: config.Config{Caches: &config.Caches{Go: true}}, Getenv: func(k string) string { return env[k] }}}
	// The gate finds the caches (checkTools) before any command's
	// environment is made.
	caches, err := warm.New(context.Background(), warm.Input{Config: r.o.Config, Getenv: r.o.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	r.caches = caches
	// A scratch that sorts after the host's cache, as /tmp/… after /root/….
	scratch := filepath.Join(host, "z-scratch")
	for _, cmd := range []egress.Command{egress.CommandCase, egress.CommandSetup, egress.CommandVerify} {
		got := r.toolEnv(cmd, backend.Env(scratch, "", env["PATH"], ""))
		seen := map[string][]string{}
		for _, kv := range got {
			k, v, _ := strings.Cut(kv, "=")
			seen[k] = append(seen[k], v)
		}
		for k, vs := range seen {
			if len(vs) != 1 {
				t.Errorf("%s: %s is set %d times (%v): the command gets whichever exec keeps", cmd, k, len(vs), vs)
			}
		}
		if v := seen["GOCACHE"]; len(v) == 0 || v[len(v)-1] != build {
			t.Errorf("%s: GOCACHE the command gets is %v, want the host's warm cache %s", cmd, v, build)
		}
		if v := seen["GOMODCACHE"]; len(v) != 1 || v[0] != mod {
			t.Errorf("%s: GOMODCACHE is %v, want %s", cmd, v, mod)
		}
	}
}
