package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
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

// TestStoreSharesTheClosureNotThePack: on a source whose history holds a
// 12 MiB pack, the store made through a shared closure holds the baseline
// commit and not the pack; the closure holds the history once, a second
// run reuses it, CheckStore accepts the store, and a closure with an
// object more is refused.
func TestStoreSharesTheClosureNotThePack(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	git := func(dir string, stdin []byte, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "gc.auto=0"}, args...)...)
		cmd.Dir, cmd.Stdin = dir, bytes.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(tmp, nil, "init", "-q", "-b", "main", src)
	var stream bytes.Buffer
	blob := make([]byte, 4<<20)
	for c := 0; c < 4; c++ {
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter t <t@invalid> %d +0000\ndata 2\nc\n", 1700000000+c)
		if c == 3 {
			stream.WriteString("D big.bin\nM 100644 inline README\ndata 6\nsmall\n\n")
			continue
		}
		_, _ = rand.Read(blob)
		fmt.Fprintf(&stream, "M 100644 inline big.bin\ndata %d\n%s\n", len(blob), blob)
	}
	git(src, stream.Bytes(), "fast-import", "--quiet", "--big-file-threshold=1m")
	git(src, nil, "repack", "-a", "-d", "-q", "--window=0")
	git(src, nil, "checkout", "-q", "main")

	closures := filepath.Join(tmp, "closures")
	var first string
	for i, name := range []string{"run1", "run2"} {
		fix, dir := filepath.Join(tmp, name, "fixture"), filepath.Join(tmp, name, "store")
		if err := os.MkdirAll(filepath.Dir(fix), 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := fixture.Copy(ctx, fixture.CopyInput{SourceRoot: src, Dest: fix, When: time.Unix(1700000100, 0).UTC(), Tracer: ctoharness.NopTracer{}})
		if err != nil {
			t.Fatal(err)
		}
		closure, err := fixture.ShareClosure(ctx, filepath.Join(fix, ".git"), closures, res.Closure, res.BaselineCommit, ctoharness.NopTracer{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = closure
		} else if closure != first {
			t.Fatalf("the second run's closure is %s, not the first's %s", closure, first)
		}
		if err := store.Create(ctx, filepath.Join(fix, ".git"), dir, res.BaselineCommit, closure, ctoharness.NopTracer{}); err != nil {
			t.Fatal(err)
		}
		if got := treeBytes(t, dir); got > 1<<20 {
			t.Errorf("%s's store is %d bytes: it holds the source's pack", name, got)
		}
		if got := treeBytes(t, closure); got < 12<<20 {
			t.Errorf("the closure is %d bytes; the history's blobs are 12 MiB", got)
		}
		if err := fixture.CheckStore(ctx, dir, res.BaselineCommit, "", res.Closure); err != nil {
			t.Errorf("CheckStore on %s's store: %v", name, err)
		}
		if i == 1 {
			// An object more in the closure is outside the base's history.
			extra := filepath.Join(closure, "ab", "cdef0123456789abcdef0123456789abcdef01")
			if err := os.MkdirAll(filepath.Dir(extra), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(extra, []byte("x"), 0o444); err != nil {
				t.Fatal(err)
			}
			if err := fixture.CheckStore(ctx, dir, res.BaselineCommit, "", res.Closure); err == nil {
				t.Error("CheckStore accepted a closure holding an object outside the base's history")
			}
			if _, err := fixture.ShareClosure(ctx, filepath.Join(fix, ".git"), closures, res.Closure, res.BaselineCommit, ctoharness.NopTracer{}); err == nil {
				t.Error("ShareClosure reused a closure holding an object more")
			}
		}
	}
}

// treeBytes is the size of the regular files under dir.
func treeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
