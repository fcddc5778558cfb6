package runlist_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/runlist"
)

// replayFolder makes a replay folder as a row leaves it: the row's runs
// directory with one run in it.
func replayFolder(t *testing.T, runs, name string) (folder, runDir string) {
	t.Helper()
	folder = filepath.Join(runs, runlist.MatrixDir, name)
	runDir = makeRun(t, filepath.Join(folder, "runs"), "20260301T100000Z-s3-"+name, 3, ctoharness.StatusBlocked, t0)
	return folder, runDir
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// Prune removes the replays nothing needs and keeps the latest full
// replay's, one a record names, one kept on request and one in progress;
// it never follows a symbolic link out of the runs directory, and says how
// much it freed.
func TestPruneMatrixKeepsWhatIsNeeded(t *testing.T) {
	runs := t.TempDir()
	latest, _ := replayFolder(t, runs, "timeout-1")
	old1, _ := replayFolder(t, runs, "timeout-2")
	old2, _ := replayFolder(t, runs, "disallowed-file-3")
	named, namedRun := replayFolder(t, runs, "source-mutated-4")
	kept, _ := replayFolder(t, runs, "dirty-source-5")
	busy, _ := replayFolder(t, runs, "interrupt-6")
	if err := os.WriteFile(filepath.Join(kept, runlist.KeptMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	release, err := runlist.Hold(busy)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	writeRecord(t, runs, 2, "", namedRun)
	if err := runlist.WriteLatestReplay(runs, runlist.LatestReplay{ReplayedAt: t0, Folders: []string{filepath.Base(latest)}}); err != nil {
		t.Fatal(err)
	}
	// A link in the matrix directory to a directory outside the runs directory.
	outside := t.TempDir()
	precious := filepath.Join(outside, "precious.txt")
	if err := os.WriteFile(precious, []byte("not the harness's"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(runs, runlist.MatrixDir, "link-7")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}

	dry, err := runlist.PruneMatrix(runs, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Removed) != 2 || !exists(old1) || !exists(old2) {
		t.Fatalf("dry run: would remove %v (want the two old replays) and must remove nothing", dry.Removed)
	}
	p, err := runlist.PruneMatrix(runs, false)
	if err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, f := range p.Removed {
		removed = append(removed, f.Dir)
	}
	slices.Sort(removed)
	if want := []string{old2, old1}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	if exists(old1) || exists(old2) {
		t.Fatal("a removed replay is still there")
	}
	why := map[string]string{}
	for _, f := range p.Kept {
		why[f.Dir] = f.KeptBecause
	}
	for dir, want := range map[string]string{latest: "latest replay", named: "named by stage record", kept: "kept on request", busy: "in progress"} {
		if why[dir] != want || !exists(dir) {
			t.Errorf("%s: kept because %q (exists %v), want %q", filepath.Base(dir), why[dir], exists(dir), want)
		}
	}
	if !exists(link) || !exists(precious) {
		t.Fatal("prune touched a symbolic link or what it points to")
	}
	if p.FreedBytes <= 0 || p.FreedBytes != dry.FreedBytes {
		t.Fatalf("freed %d bytes, the dry run said %d; want the same, above zero", p.FreedBytes, dry.FreedBytes)
	}

	// runs prune includes the replays and counts them in what it freed.
	again, _ := replayFolder(t, runs, "timeout-8")
	all, err := runlist.Prune(runs, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Matrix.Removed) != 1 || all.Matrix.Removed[0].Dir != again || exists(again) || all.FreedBytes < all.Matrix.FreedBytes || all.Matrix.FreedBytes <= 0 {
		t.Fatalf("runs prune: matrix %+v, freed %d", all.Matrix, all.FreedBytes)
	}
}

// A latest-replay file that cannot be read removes nothing: the folders it
// keeps would be unknown. So does a matrix directory that is a link.
func TestPruneMatrixFailsClosed(t *testing.T) {
	runs := t.TempDir()
	old, _ := replayFolder(t, runs, "timeout-1")
	if err := os.WriteFile(filepath.Join(runs, runlist.MatrixDir, "latest-replay.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runlist.PruneMatrix(runs, false); err == nil || !exists(old) {
		t.Fatalf("a malformed latest-replay file: err %v, the old replay exists %v; want an error and nothing removed", err, exists(old))
	}

	other := t.TempDir()
	elsewhere, _ := replayFolder(t, other, "timeout-2")
	runs2 := t.TempDir()
	if err := os.Symlink(filepath.Join(other, runlist.MatrixDir), filepath.Join(runs2, runlist.MatrixDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := runlist.PruneMatrix(runs2, false); err == nil || !exists(elsewhere) {
		t.Fatalf("a linked matrix directory: err %v, the replay behind it exists %v; want an error and nothing removed", err, exists(elsewhere))
	}
}
