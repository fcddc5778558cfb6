package validators_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/validators"
)

// The adversarial check catches a record that no longer follows the
// step's rules: a test recorded as not counting though it failed on the
// baseline, so that its failure on the result would not show.
func TestAdversarialCheckCatchesARelabelledTest(t *testing.T) {
	o := replayOpts(t)
	row, err := fixtures.Lookup("adversary-rejects")
	if err != nil {
		t.Fatal(err)
	}
	res := validators.Replay(context.Background(), row, o)
	if !res.OK {
		t.Fatalf("the row: %v", res.Errors)
	}
	dir := res.RunDir
	var rep ctoharness.Report
	data, _ := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
	if err := json.Unmarshal(data, &rep); err != nil || rep.Adversarial == nil {
		t.Fatalf("the report: %v", err)
	}
	editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
		for _, x := range m["adversarial"].(map[string]any)["tests"].([]any) {
			tm := x.(map[string]any)
			if tm["class"] == ctoharness.AdversaryDiscriminating {
				tm["class"], tm["ok"] = ctoharness.AdversaryNotDiscriminating, true
			}
		}
	})
	wantAdversarialCheck(t, o, dir)
}

// A run whose adversary's tests ran with nobody recorded as confirming
// them does not validate: the confirmation is part of the evidence.
func TestAdversarialCheckWantsTheConfirmation(t *testing.T) {
	o := replayOpts(t)
	row, err := fixtures.Lookup("adversary-confirmed")
	if err != nil {
		t.Fatal(err)
	}
	res := validators.Replay(context.Background(), row, o)
	if !res.OK {
		t.Fatalf("the row: %v", res.Errors)
	}
	dir := res.RunDir
	editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
		delete(m["adversarial"].(map[string]any), "confirmed")
	})
	wantAdversarialCheck(t, o, dir)
}

// wantAdversarialCheck reseals a damaged run's report (its digests and
// checksum made to match again, so only the damage is left) and requires
// the adversarial check to refuse it.
func wantAdversarialCheck(t *testing.T, o validators.ReplayOptions, dir string) {
	t.Helper()
	d, _ := evidence.Digests(dir)
	editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) { m["artifact_digests"] = d })
	sum, _ := evidence.FileSHA256(filepath.Join(dir, evidence.ReportJSON))
	os.WriteFile(filepath.Join(dir, evidence.ReportSum), []byte(sum+"  report.json\n"), 0o644)
	got := validators.Run(context.Background(), dir, o.Schemas, validators.RunOptions{})
	for _, f := range got.Errors {
		if f.Check == "adversarial" {
			return
		}
	}
	t.Fatalf("the adversarial check did not fire; errors: %v", got.Errors)
}
