package runlist_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/runlist"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// makeRun writes a run directory with a report.json and one other artifact.
func makeRun(tb testing.TB, runs, id string, stage int, status ctoharness.Status, started time.Time) string {
	tb.Helper()
	dir := filepath.Join(runs, id)
	if err := os.MkdirAll(filepath.Join(dir, "fixture"), 0o755); err != nil {
		tb.Fatal(err)
	}
	// As many artifacts as a real run has, so the list stats as much as it would.
	digests := map[string]string{}
	for _, name := range []string{"test.log", "patch.diff", "report.md", "report.html", "trace.jsonl", "events.normalized.jsonl",
		"task.json", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 100), 0o644); err != nil {
			tb.Fatal(err)
		}
		digests[name] = "0000000000000000000000000000000000000000000000000000000000000000"
	}
	rep := ctoharness.Report{RunID: id, Stage: stage, Status: status, CaseLane: ctoharness.LaneFake, Blockers: []ctoharness.Blocker{},
		ArtifactDigests: digests, SourcePath: "/some/where", Case: ctoharness.CaseRecord{StdoutInline: string(make([]byte, 3000))},
		Freshness: ctoharness.Freshness{StartedAt: started, FinishedAt: started.Add(1500 * time.Millisecond)}}
	if status != ctoharness.StatusPass {
		rep.Blockers = append(rep.Blockers, ctoharness.Blocker{Code: ctoharness.BlockDisallowedChange, Step: ctoharness.StepCollect})
	}
	data, _ := json.Marshal(rep)
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func writeRecord(t *testing.T, runs string, stage int, id, dir string) {
	t.Helper()
	os.MkdirAll(runlist.RecordsDir(runs), 0o755)
	data, _ := json.Marshal(map[string]any{"stage": stage, "run_id": id, "run_dir": dir})
	if err := os.WriteFile(filepath.Join(runlist.RecordsDir(runs), fmt.Sprintf("stage-%d.json", stage)), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestListNewestFirstWithFilters(t *testing.T) {
	runs := t.TempDir()
	makeRun(t, runs, "a-s1", 1, ctoharness.StatusPass, t0)
	makeRun(t, runs, "c-s3", 3, ctoharness.StatusBlocked, t0.Add(2*time.Hour))
	makeRun(t, runs, "b-s3", 3, ctoharness.StatusPass, t0.Add(time.Hour))
	os.MkdirAll(filepath.Join(runs, "sources"), 0o755) // not a run
	os.MkdirAll(filepath.Join(runs, "broken"), 0o755)
	os.WriteFile(filepath.Join(runs, "broken", "report.json"), []byte("{"), 0o644)

	all, err := runlist.List(runs, runlist.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range all {
		ids = append(ids, r.RunID)
	}
	if fmt.Sprint(ids) != "[c-s3 b-s3 a-s1 broken]" {
		t.Fatalf("order %v, want newest first and the unreadable run last", ids)
	}
	if all[0].DurationMs != 1500 || all[0].SizeBytes <= 1500 || len(all[0].Blockers) != 1 || all[3].Problem == "" {
		t.Fatalf("fields: %+v / %+v", all[0], all[3])
	}
	for _, tc := range []struct {
		f    runlist.Filter
		want int
	}{
		{runlist.Filter{Stage: 3}, 2},
		{runlist.Filter{Status: ctoharness.StatusBlocked}, 1},
		{runlist.Filter{Stage: 3, Status: ctoharness.StatusPass}, 1},
		{runlist.Filter{Stage: 2}, 0},
	} {
		got, _ := runlist.List(runs, tc.f)
		if len(got) != tc.want {
			t.Errorf("filter %+v: %d runs, want %d", tc.f, len(got), tc.want)
		}
	}
}

func TestPruneKeepsNewestAndRecordedRuns(t *testing.T) {
	runs := t.TempDir()
	var dirs []string
	for i := 0; i < 5; i++ {
		dirs = append(dirs, makeRun(t, runs, fmt.Sprintf("r%d", i), 2, ctoharness.StatusPass, t0.Add(time.Duration(i)*time.Minute)))
	}
	os.MkdirAll(filepath.Join(runs, runlist.WorkDir, "r0", "scratch"), 0o755)
	// The oldest two are named by stage records, one by id and one by directory.
	writeRecord(t, runs, 1, "r0", "")
	writeRecord(t, runs, 2, "", dirs[1])

	dry, err := runlist.Prune(runs, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Removed) != 2 {
		t.Fatalf("dry run would remove %d, want 2 (r2, r3)", len(dry.Removed))
	}
	if _, err := os.Stat(dirs[2]); err != nil {
		t.Fatal("the dry run removed a run")
	}
	p, err := runlist.Prune(runs, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false, false, true} {
		_, err := os.Stat(dirs[i])
		if (err == nil) != want {
			t.Errorf("r%d exists=%v, want %v (removed: %d)", i, err == nil, want, len(p.Removed))
		}
	}
	if _, err := os.Stat(filepath.Join(runs, runlist.WorkDir, "r0")); err != nil {
		t.Error("a protected run's workspace was removed")
	}
}

// A workspace whose run directory is gone (a killed run) is pruned too, and
// the list counts a run's workspace in its size.
func TestPruneOrphanedWorkspaces(t *testing.T) {
	runs := t.TempDir()
	makeRun(t, runs, "r0", 2, ctoharness.StatusPass, t0)
	for _, id := range []string{"r0", "gone"} {
		if err := os.MkdirAll(filepath.Join(runs, runlist.WorkDir, id, "scratch"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(runs, runlist.WorkDir, id, "scratch", "cache"), make([]byte, 64<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list, err := runlist.List(runs, runlist.Filter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("list %v %v", list, err)
	}
	if list[0].WorkBytes < 64<<10 || list[0].SizeBytes <= list[0].WorkBytes {
		t.Errorf("size %d, work %d: the workspace's 64 KiB is not counted", list[0].SizeBytes, list[0].WorkBytes)
	}
	dry, err := runlist.Prune(runs, 5, true)
	if err != nil || len(dry.Orphans) != 1 || filepath.Base(dry.Orphans[0]) != "gone" {
		t.Fatalf("dry run orphans %v %v", dry.Orphans, err)
	}
	if _, err := os.Stat(filepath.Join(runs, runlist.WorkDir, "gone")); err != nil {
		t.Fatal("the dry run removed the orphan")
	}
	if _, err := runlist.Prune(runs, 5, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(runs, runlist.WorkDir, "gone")); !os.IsNotExist(err) {
		t.Errorf("the orphaned workspace is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(runs, runlist.WorkDir, "r0")); err != nil {
		t.Error("a kept run's workspace was removed")
	}
}

func TestPruneRefusesWhenARecordIsUnreadable(t *testing.T) {
	runs := t.TempDir()
	makeRun(t, runs, "r0", 1, ctoharness.StatusPass, t0)
	os.MkdirAll(runlist.RecordsDir(runs), 0o755)
	os.WriteFile(filepath.Join(runlist.RecordsDir(runs), "stage-1.json"), []byte("not json"), 0o644)
	if _, err := runlist.Prune(runs, 0, false); err == nil {
		t.Fatal("prune went ahead without knowing which run the record protects")
	}
	if _, err := os.Stat(filepath.Join(runs, "r0")); err != nil {
		t.Fatal("the run was removed")
	}
}

// BenchmarkList1000 lists a runs directory of a thousand runs; the target is
// well under a second per list.
func BenchmarkList1000(b *testing.B) {
	runs := b.TempDir()
	for i := 0; i < 1000; i++ {
		makeRun(b, runs, fmt.Sprintf("20260301T%06dZ-s3-%08x", i, i), 1+i%3, ctoharness.StatusPass, t0.Add(time.Duration(i)*time.Second))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := runlist.List(runs, runlist.Filter{})
		if err != nil || len(got) != 1000 {
			b.Fatalf("%d runs, %v", len(got), err)
		}
	}
}

// Workspaces an earlier version left under RUNS_DIR/.work are pruned with
// their runs, and as orphans, like those under RUNS_DIR/work.
func TestPruneLegacyWorkspaces(t *testing.T) {
	runs := t.TempDir()
	makeRun(t, runs, "r0", 2, ctoharness.StatusPass, t0)
	makeRun(t, runs, "r1", 2, ctoharness.StatusPass, t0.Add(time.Minute))
	for _, id := range []string{"r0", "r1", "gone"} {
		if err := os.MkdirAll(filepath.Join(runs, ".work", id, "scratch"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := runlist.Prune(runs, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Removed) != 1 || p.Removed[0].RunID != "r0" || len(p.Orphans) != 1 || filepath.Base(p.Orphans[0]) != "gone" {
		t.Fatalf("removed %v, orphans %v; want r0 and the orphan gone", p.Removed, p.Orphans)
	}
	for id, want := range map[string]bool{"r0": false, "r1": true, "gone": false} {
		if _, err := os.Stat(filepath.Join(runs, ".work", id)); (err == nil) != want {
			t.Errorf(".work/%s exists=%v, want %v", id, err == nil, want)
		}
	}
}

// The runs a batch's trial records name are kept, by id or by directory,
// and say which batch keeps them; a trial record that cannot be read
// removes nothing.
func TestPruneKeepsBatchRuns(t *testing.T) {
	runs := t.TempDir()
	var dirs []string
	for i := 0; i < 4; i++ {
		dirs = append(dirs, makeRun(t, runs, fmt.Sprintf("r%d", i), 3, ctoharness.StatusPass, t0.Add(time.Duration(i)*time.Minute)))
	}
	trials := filepath.Join(runs, "batches", "nightly-0123456789ab", "trials")
	if err := os.MkdirAll(trials, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := `{"attempts": [{"run_id": "r0"}, {"run_dir": "` + dirs[1] + `"}], "interrupted": [{"run_id": "r2"}]}`
	if err := os.WriteFile(filepath.Join(trials, "t-1.json"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := runlist.Prune(runs, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, true, false} {
		if _, err := os.Stat(dirs[i]); (err == nil) != want {
			t.Errorf("r%d exists=%v, want %v", i, err == nil, want)
		}
	}
	for _, k := range p.Kept {
		if k.ProtectedBy != "batch nightly-0123456789ab" {
			t.Errorf("kept %s protected by %q", k.RunID, k.ProtectedBy)
		}
	}
	if err := os.WriteFile(filepath.Join(trials, "t-2.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	makeRun(t, runs, "r9", 3, ctoharness.StatusPass, t0)
	if _, err := runlist.Prune(runs, 0, false); err == nil {
		t.Fatal("prune went ahead past a trial record it could not read")
	}
	if _, err := os.Stat(filepath.Join(runs, "r9")); err != nil {
		t.Error("a run was removed although a trial record could not be read")
	}
}

// TestListBySource checks that each run names its source and that a source
// filter selects by the recorded real path, whichever spelling (relative,
// through a symlink) names it.
func TestListBySource(t *testing.T) {
	runs, base := t.TempDir(), t.TempDir()
	base, _ = filepath.EvalSymlinks(base)
	app, lib := filepath.Join(base, "app"), filepath.Join(base, "lib")
	for _, d := range []string{app, lib} {
		os.MkdirAll(d, 0o755)
	}
	for i, src := range []string{app, lib, app} {
		dir := makeRun(t, runs, fmt.Sprintf("r%d-s3", i), 3, ctoharness.StatusPass, t0.Add(time.Duration(i)*time.Hour))
		var rep map[string]any
		data, _ := os.ReadFile(filepath.Join(dir, "report.json"))
		json.Unmarshal(data, &rep)
		rep["source_path"] = src
		data, _ = json.Marshal(rep)
		os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644)
	}
	link := filepath.Join(t.TempDir(), "app-link")
	if err := os.Symlink(app, link); err != nil {
		t.Fatal(err)
	}
	for _, given := range []string{app, link, app + "/"} {
		got, err := runlist.List(runs, runlist.Filter{Source: given})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].RunID != "r2-s3" || got[1].RunID != "r0-s3" || got[0].Source != app {
			t.Errorf("Source %s: %+v, want r2-s3 and r0-s3 of %s", given, got, app)
		}
	}
	if got, _ := runlist.List(runs, runlist.Filter{Source: filepath.Join(base, "nowhere")}); len(got) != 0 {
		t.Errorf("an unknown source lists %d runs, want none", len(got))
	}
}
