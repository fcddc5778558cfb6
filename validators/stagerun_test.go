package validators_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/validators"
)

// The stage-2 run is checked once for many trials, and again as soon as
// anything in it changes (even rewritten with the same bytes, or with its
// modification time set back); a failed check is never remembered.
func TestRememberStageRuns(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "report.json")
	if err := os.WriteFile(file, []byte(`{"status":"ok"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	calls, fail := 0, false
	verify := validators.RememberStageRuns(func(ctx context.Context, runDir string) (ctoharness.Report, error) {
		calls++
		if fail {
			return ctoharness.Report{}, errors.New("the run does not validate")
		}
		return ctoharness.Report{RunID: "r1"}, nil
	})
	check := func(wantCalls int, wantErr bool) {
		t.Helper()
		rep, err := verify(context.Background(), dir)
		if (err != nil) != wantErr || (!wantErr && rep.RunID != "r1") || calls != wantCalls {
			t.Fatalf("after %d checks of the run: report %q, error %v; want %d checks, error %v", calls, rep.RunID, err, wantCalls, wantErr)
		}
	}
	check(1, false)
	check(1, false) // unchanged: remembered
	old, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(file, []byte(`{"status":"ok"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, old.ModTime(), old.ModTime()); err != nil {
		t.Fatal(err)
	}
	fail = true
	check(2, true) // rewritten, modification time set back: checked, and it fails
	check(3, true) // a failure is not remembered
	fail = false
	check(4, false)
	if err := os.WriteFile(filepath.Join(dir, "extra"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	check(5, false) // a new entry: checked again
	check(5, false)
}
