package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// Before report.json is written, every artifact it digests, the store the
// patch is re-derived from, and the directories that hold them are synced;
// report.json and its checksum are synced after them, with the run
// directory. A run with an injected Syncer never qualifies.
func TestRunSyncsEvidenceBeforeTheReport(t *testing.T) {
	set := compile(t)
	top := t.TempDir()
	runs := filepath.Join(top, "new", "runs") // made by the run: its entries must be synced too
	o := options(t, set, runs, 1, env{})
	var mu sync.Mutex
	var synced []string
	o.Sync = func(f *os.File) error {
		mu.Lock()
		synced = append(synced, f.Name())
		mu.Unlock()
		return evidence.Fsync(f)
	}
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Qualifies {
		t.Error("a run with an injected Syncer qualifies as stage evidence")
	}
	at := func(p string) int { return slices.Index(synced, p) }
	report := at(filepath.Join(rep.RunArtifactDir, evidence.ReportJSON))
	if report < 0 {
		t.Fatalf("report.json was never synced; synced %v", synced)
	}
	var want []string
	for name := range rep.ArtifactDigests {
		if name == evidence.ReportMD || name == evidence.ReportHTML {
			continue // written in the report step, checked below
		}
		want = append(want, filepath.Join(rep.RunArtifactDir, filepath.FromSlash(name)))
	}
	want = append(want, rep.RunArtifactDir, runs, filepath.Dir(runs), top, filepath.Join(rep.RunArtifactDir, evidence.BackendDir),
		filepath.Join(rep.RunArtifactDir, evidence.StoreDir, "HEAD"), filepath.Join(rep.RunArtifactDir, evidence.StoreDir, "objects"))
	for _, p := range want {
		if i := at(p); i < 0 || i > report {
			t.Errorf("%s synced at %d, report.json at %d: it must be synced before the report", p, i, report)
		}
	}
	for _, name := range []string{evidence.ReportMD, evidence.ReportHTML} {
		if i := at(filepath.Join(rep.RunArtifactDir, name)); i < 0 || i > report {
			t.Errorf("%s synced at %d, report.json (which digests it) at %d", name, i, report)
		}
	}
	if i := at(filepath.Join(rep.RunArtifactDir, evidence.ReportSum)); i < 0 {
		t.Error("report.sha256 was never synced")
	}
	// The run directory is synced again with report.json (in parallel).
	last := -1
	for i, p := range synced {
		if p == rep.RunArtifactDir {
			last = i
		}
	}
	if first := at(rep.RunArtifactDir); last == first {
		t.Errorf("the run directory was synced once (at %d), not again once report.json was in it", first)
	}
	mustValidate(t, set, rep, true)
}
