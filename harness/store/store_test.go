package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/store"
)

// TestCreateCopiesOnlyFilesAndNeverOverwrites: the store takes the
// fixture's objects and index as plain files (a symlink among them is left
// behind), points its branch at the baseline, and refuses to reuse a
// directory or to point at a commit it does not hold.
func TestCreateCopiesOnlyFilesAndNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	archive, err := fixtures.Archive(fixtures.SampleOwned)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	src, fix := filepath.Join(tmp, "src"), filepath.Join(tmp, "fixture")
	if _, err := fixtures.Materialize(ctx, archive, src, when); err != nil {
		t.Fatal(err)
	}
	res, err := fixture.Copy(ctx, fixture.CopyInput{SourceRoot: src, Dest: fix, When: when, Tracer: ctoharness.NopTracer{}})
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(fix, ".git", "objects", "zz")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "store")
	if err := store.Create(ctx, filepath.Join(fix, ".git"), dir, res.BaselineCommit, "", ctoharness.NopTracer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "objects", "zz")); err == nil {
		t.Error("a symlink among the fixture's objects reached the store")
	}
	if fi, err := os.Lstat(filepath.Join(dir, store.IndexFile)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the store has no index of its own: %v", err)
	}
	r, done, err := store.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference(store.Branch, true)
	done()
	if err != nil || ref.Hash().String() != res.BaselineCommit {
		t.Fatalf("store branch = %v, %v; want the baseline %s", ref, err, res.BaselineCommit)
	}
	if err := store.Create(ctx, filepath.Join(fix, ".git"), dir, res.BaselineCommit, "", ctoharness.NopTracer{}); err == nil {
		t.Error("Create reused an existing store directory")
	}
	if err := store.Create(ctx, filepath.Join(fix, ".git"), filepath.Join(tmp, "store2"), "0123456789abcdef0123456789abcdef01234567", "", ctoharness.NopTracer{}); err == nil {
		t.Error("Create pointed the store at a commit it does not hold")
	}
}
