package checkout

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/store"
)

var (
	baseAt   = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	resultAt = baseAt.Add(time.Minute)
)

// world is a source, a fixture copied from it and the store made from the
// fixture, as a run has them before Case starts.
type world struct{ src, fix, store, baseline string }

func newWorld(t *testing.T) world {
	t.Helper()
	ctx := context.Background()
	tmp := t.TempDir()
	archive, err := fixtures.Archive(fixtures.SampleOwned)
	if err != nil {
		t.Fatal(err)
	}
	w := world{src: filepath.Join(tmp, "src"), fix: filepath.Join(tmp, "fixture"), store: filepath.Join(tmp, "store")}
	if _, err := fixtures.Materialize(ctx, archive, w.src, baseAt); err != nil {
		t.Fatal(err)
	}
	res, err := fixture.Copy(ctx, fixture.CopyInput{SourceRoot: w.src, Dest: w.fix, When: baseAt, Tracer: ctoharness.NopTracer{}})
	if err != nil {
		t.Fatal(err)
	}
	w.baseline = res.BaselineCommit
	closure, err := fixture.ShareClosure(ctx, filepath.Join(w.fix, ".git"), filepath.Join(tmp, "closures"), res.Closure, w.baseline, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, filepath.Join(w.fix, ".git"), w.store, w.baseline, closure, ctoharness.NopTracer{}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w world) collect(t *testing.T) fixture.CollectResult {
	t.Helper()
	res, err := fixture.Collect(context.Background(), fixture.CollectInput{Root: w.fix, Store: w.store, Baseline: w.baseline,
		When: resultAt, Tracer: ctoharness.NopTracer{}, Allowed: func(string) (bool, string) { return true, "" }})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func put(t *testing.T, p, data string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}

// overlayInput sets in up for an overlay checkout (the source proof it
// holds the source to), or skips where this machine cannot mount one.
func overlayInput(t *testing.T, in Input) Input {
	t.Helper()
	probe := t.TempDir()
	lower, upper, work, at := filepath.Join(probe, "l"), filepath.Join(probe, "u"), filepath.Join(probe, "w"), filepath.Join(probe, "m")
	for _, d := range []string{lower, upper, work, at} {
		os.Mkdir(d, 0o755)
	}
	if err := unix.Mount("overlay", at, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
		t.Skipf("overlayfs cannot be mounted here (needs CAP_SYS_ADMIN): %v", err)
	}
	unix.Unmount(at, unix.MNT_DETACH)
	m, err := source.Manifest(context.Background(), in.SourceRoot)
	if err != nil {
		t.Fatal(err)
	}
	// Held packed, as a run holds its before-proof.
	p := &ctoharness.SourceProof{Manifest: m}
	p.Pack()
	in.Overlay, in.SourceProof = true, p
	return in
}

func TestCheckoutIsTheResult(t *testing.T) {
	for _, overlay := range []bool{false, true} {
		t.Run(map[bool]string{false: "copy", true: "overlay"}[overlay], func(t *testing.T) { testCheckoutIsTheResult(t, overlay) })
	}
}

func testCheckoutIsTheResult(t *testing.T, overlay bool) {
	w := newWorld(t)
	// The source's own untracked and ignored files must not show either.
	put(t, filepath.Join(w.src, "notes.txt"), "untracked in the source\n", 0o644)
	put(t, filepath.Join(w.src, "build", "cache.bin"), "ignored in the source\n", 0o644)
	outside := t.TempDir()
	// Case's change: a new file, an edit, a deletion, a mode change, a
	// symlink out of the tree, a directory replaced by a file; and what must
	// not reach verification: an ignored file and a change to .git.
	put(t, filepath.Join(w.fix, "docs", "new.md"), "new\n", 0o644)
	put(t, filepath.Join(w.fix, "README.md"), "changed\n", 0o644)
	if err := os.Remove(filepath.Join(w.fix, "CHANGELOG.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(w.fix, "src", "greet.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(w.fix, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(w.fix, "scripts")); err != nil {
		t.Fatal(err)
	}
	put(t, filepath.Join(w.fix, "scripts"), "now a file\n", 0o644)
	put(t, filepath.Join(w.fix, "build", "override.sh"), "exit 0\n", 0o644)
	put(t, filepath.Join(w.fix, ".git", "hooks", "pre-commit"), "#!/bin/sh\n", 0o755)
	col := w.collect(t)

	dest := filepath.Join(t.TempDir(), "verify", "checkout")
	in := Input{SourceRoot: w.src, Dest: dest, Store: w.store, Baseline: w.baseline,
		Result: col.ResultCommit, BaselineTime: baseAt, ResultTime: resultAt, Tracer: ctoharness.NopTracer{}}
	if overlay {
		in = overlayInput(t, in)
	}
	before := treeDigest(t, w.src)
	b := Begin(context.Background(), in)
	defer b.Stop()
	got, err := b.Finish(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if b.Overlaid() != overlay {
		t.Fatalf("overlay checkout: %v, want %v", b.Overlaid(), overlay)
	}
	if got.Tree != col.ResultTree || got.Commit != col.ResultCommit {
		t.Fatalf("checkout commit %s tree %s, result commit %s tree %s", got.Commit, got.Tree, col.ResultCommit, col.ResultTree)
	}
	for p, want := range map[string]string{"docs/new.md": "new\n", "README.md": "changed\n", "scripts": "now a file\n"} {
		if data, err := os.ReadFile(filepath.Join(dest, p)); err != nil || string(data) != want {
			t.Errorf("%s = %q, %v; want %q", p, data, err, want)
		}
	}
	for _, p := range []string{"CHANGELOG.md", "build/override.sh", ".git/hooks/pre-commit", "notes.txt", "build/cache.bin"} {
		if _, err := os.Lstat(filepath.Join(dest, p)); err == nil {
			t.Errorf("%s reached the checkout", p)
		}
	}
	if fi, err := os.Stat(filepath.Join(dest, "src", "greet.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("greet.sh lost its exec bit: %v %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(dest, "escape")); err != nil || target != outside {
		t.Errorf("escape -> %q, %v; want a link to %s", target, err, outside)
	}
	// What the verification writes stays in the checkout.
	put(t, filepath.Join(dest, "README.md"), "the verification rewrote it\n", 0o644)
	put(t, filepath.Join(dest, "src", "out.o"), "built\n", 0o644)
	if err := os.Remove(filepath.Join(dest, "docs", "guide.md")); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if after := treeDigest(t, w.src); after != before {
		t.Fatalf("the source changed:\n%s\n---\n%s", before, after)
	}
}

// treeDigest lists every path under dir with its mode and content.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v", rel, fi.Mode())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestCheckoutNeverWritesThroughALink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	if fd, _, err := parent(root, "link/x", true); err == nil {
		unix.Close(fd)
		t.Fatal("parent went through a symlink")
	}
	if err := remove(root, "link/x"); err != nil {
		t.Fatalf("remove through a link: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("something was written outside: %v", ents)
	}
}

func TestCheckoutOfAChangedSourceIsUnfaithful(t *testing.T) {
	for _, overlay := range []bool{false, true} {
		t.Run(map[bool]string{false: "copy", true: "overlay"}[overlay], func(t *testing.T) { testChangedSource(t, overlay) })
	}
}

func testChangedSource(t *testing.T, overlay bool) {
	w := newWorld(t)
	put(t, filepath.Join(w.fix, "docs", "new.md"), "new\n", 0o644)
	col := w.collect(t)
	in := Input{SourceRoot: w.src, Store: w.store, Baseline: w.baseline,
		Result: col.ResultCommit, BaselineTime: baseAt, ResultTime: resultAt, Tracer: ctoharness.NopTracer{}}
	if overlay {
		in = overlayInput(t, in) // the source proof is taken here, before the edit
	}
	// The source moves on after the copy: the checkout's baseline would
	// not be the run's.
	time.Sleep(10 * time.Millisecond) // a new mtime on filesystems with coarse timestamps
	put(t, filepath.Join(w.src, "README.md"), "edited in the source\n", 0o644)
	in.Dest = filepath.Join(t.TempDir(), "checkout")
	b := Begin(context.Background(), in)
	defer b.Stop()
	_, err := b.Finish(context.Background(), in)
	if err == nil {
		t.Fatal("a checkout of a source changed since its proof was made")
	}
	if code := ctoharness.AsBlocker(err, ctoharness.StepVerify).Code; code != ctoharness.BlockCheckoutUnfaithful {
		t.Fatalf("err = %v (%s), want CHECKOUT_UNFAITHFUL", err, code)
	}
}
