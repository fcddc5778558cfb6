package health_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/health"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.Subcommand {
		os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

func TestHealth(t *testing.T) {
	runs := t.TempDir()
	exe, _ := os.Executable()
	keys, err := attest.Ephemeral()
	if err != nil {
		t.Fatal(err)
	}
	o := health.Options{RunsDir: runs, RecordsDir: filepath.Join(runs, "validation"), MaxAge: time.Hour, Now: time.Now(), SelfExe: exe, Signing: keys}
	rep := health.Run(context.Background(), o)
	names := map[string]bool{}
	for _, c := range rep.Checks {
		names[c.Name] = true
	}
	for _, n := range []string{"schemas_compile", "runs_dir_writable", "runs_dir_free_space", "git_available", "sandbox", "stage_1_record", "stage_3_record"} {
		if !names[n] {
			t.Errorf("check %s missing", n)
		}
	}
	if !rep.Sandbox.Available() {
		t.Skipf("this machine cannot establish the sandbox (%s); the remaining assertions need it", rep.Sandbox.Reason)
	}
	if !rep.OK {
		t.Fatalf("health not ok on a fresh runs dir: %+v", rep.Checks)
	}
	line, _ := json.Marshal(rep)
	if strings.Contains(string(line), "\n") {
		t.Fatal("not one line")
	}
	// Records required but absent: not ok.
	o.RequireRecords = true
	if health.Run(context.Background(), o).OK {
		t.Fatal("missing stage records passed when required")
	}
	// An unwritable runs directory (a file in its place): not ok.
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	o.RequireRecords = false
	o.RunsDir = f
	if health.Run(context.Background(), o).OK {
		t.Fatal("an unusable runs directory passed")
	}
}
