package validators_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/validators"
)

// A run whose task allowed .git changes passes with an unsafe change listed;
// the same evidence with the contract edited back to fixture_git "block"
// (or the proof's allowance removed) must not validate.
func TestAllowedGitChangeNeedsTheTasksAllowance(t *testing.T) {
	rows, err := fixtures.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	var row fixtures.Row
	for _, r := range rows {
		if r.Name == "git-config-allowed" {
			row = r
		}
	}
	if row.Name == "" {
		t.Fatal("no git-config-allowed row")
	}
	o := replayOpts(t)
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, run string)
	}{
		{"contract says block", func(t *testing.T, run string) {
			editJSON(t, filepath.Join(run, evidence.TaskFile), func(m map[string]any) { m["fixture_git"] = "block" })
		}},
		{"proof drops the allowance", func(t *testing.T, run string) {
			editJSON(t, filepath.Join(run, evidence.CleanEnd), func(m map[string]any) { delete(m, "git_changes_allowed") })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := validators.Replay(context.Background(), row, o)
			if !res.OK || res.Status != "pass" {
				t.Fatalf("replay: %+v", res)
			}
			tc.edit(t, res.RunDir)
			resealRun(t, res.RunDir, nil)
			wantCheck(t, validators.Run(context.Background(), res.RunDir, o.Schemas, validators.RunOptions{ExpectPass: true}), "fixture_clean_end")
		})
	}
}
