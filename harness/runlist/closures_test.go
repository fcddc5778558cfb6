package runlist_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/runlist"
)

// closure makes RUNS_DIR/closures/<name>/objects with one read-only pack
// file, as fixture.ShareClosure leaves it.
func closure(t *testing.T, runs, name string) string {
	t.Helper()
	dir := filepath.Join(runs, "closures", name)
	pack := filepath.Join(dir, "objects", "pack")
	if err := os.MkdirAll(pack, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pack, "pack-x.pack"), make([]byte, 64<<10), 0o444); err != nil {
		t.Fatal(err)
	}
	return dir
}

// names makes the store of run directory dir name the closure, by the
// relative path store.Create writes.
func names(t *testing.T, dir, closure string) {
	t.Helper()
	info := filepath.Join(dir, "store", "objects", "info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Join(dir, "store", "objects"), filepath.Join(closure, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(info, "alternates"), []byte(rel+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A closure goes once no remaining run's store names it: with the run that
// named it, or when nothing did; one a kept run names stays; a dry run only
// says so; a run in progress keeps them all.
func TestPruneRemovesClosuresNoRunNames(t *testing.T) {
	runs := t.TempDir()
	old := makeRun(t, runs, "r-old", 3, ctoharness.StatusPass, t0)
	kept := makeRun(t, runs, "r-new", 3, ctoharness.StatusPass, t0.Add(time.Hour))
	a, b, c := closure(t, runs, "aaaa"), closure(t, runs, "bbbb"), closure(t, runs, ".making-cccc-1")
	names(t, kept, a)
	names(t, old, b)

	dry, err := runlist.Prune(runs, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Closures.Removed) != 2 || dry.Closures.Kept != 1 || dry.Closures.FreedBytes < 128<<10 {
		t.Fatalf("dry run: %+v, want b and the half-made one removed, a kept", dry.Closures)
	}
	for _, d := range []string{a, b, c} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("the dry run removed %s", d)
		}
	}

	// A run in progress (its directory held, no report yet) keeps every closure.
	live := filepath.Join(runs, "r-live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	release, err := runlist.Hold(live)
	if err != nil {
		t.Fatal(err)
	}
	p, err := runlist.Prune(runs, 1, false)
	release()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Closures.Removed) != 0 || p.Closures.Waiting == "" {
		t.Fatalf("with a run in progress: %+v, want nothing removed and why", p.Closures)
	}

	p, err = runlist.Prune(runs, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Fatal("r-old was kept: the runs themselves are pruned while a run is in progress")
	}
	if len(p.Closures.Removed) != 2 || p.Closures.Kept != 1 {
		t.Fatalf("after the run: %+v, want b (named only by r-old, pruned before) and the half-made one removed", p.Closures)
	}
	for d, want := range map[string]bool{a: true, b: false, c: false} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists=%v, want %v", d, err == nil, want)
		}
	}
}
