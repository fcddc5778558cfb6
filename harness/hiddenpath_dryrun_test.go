package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness"
)

// A runs directory under a hidden directory puts the verification there
// too: the dry run says so before a suite like express's fails on it.
func TestDryRunWarnsOfAHiddenRunsDir(t *testing.T) {
	set := compile(t)
	o, _ := stage3(t, set)
	plain, hidden := o.RunsDir, filepath.Join(t.TempDir(), ".cache")
	if err := os.Symlink(plain, hidden); err != nil {
		t.Fatal(err)
	}
	warned := func(runs string) bool {
		o.RunsDir = runs
		plan, err := harness.Plan(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Blockers) > 0 {
			t.Fatalf("dry run with runs dir %s blocked: %v", runs, plan.Blockers)
		}
		for _, w := range plan.Warnings {
			if strings.Contains(w, "below the hidden directory "+hidden) {
				return true
			}
		}
		return false
	}
	if !warned(hidden) {
		t.Errorf("no warning for the runs directory %s", hidden)
	}
	if warned(plain) {
		t.Errorf("a warning for the runs directory %s, which has no hidden directory", plain)
	}
}
