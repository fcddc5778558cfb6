package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

// referenceManifest is the obvious, slow implementation: filepath.WalkDir,
// os.Lstat per path, one global sort. The real walk must agree with it on
// every field of every entry.
func referenceManifest(t *testing.T, root string) []ctoharness.ManifestEntry {
	t.Helper()
	var out []ctoharness.ManifestEntry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		mt, ct := statTimes(st)
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		e := ctoharness.ManifestEntry{Path: filepath.ToSlash(rel), Mode: uint32(fi.Mode()), Size: fi.Size(), MtimeNs: mt, CtimeNs: ct, Inode: st.Ino, Dev: uint64(st.Dev), UID: st.Uid, GID: st.Gid}
		switch {
		case fi.Mode().IsRegular():
			e.Type = ctoharness.EntryFile
		case fi.IsDir():
			e.Type = ctoharness.EntryDir
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Type = ctoharness.EntrySymlink
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e.SetTarget(target)
		default:
			e.Type = ctoharness.EntryOther
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b ctoharness.ManifestEntry) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// TestWalkMatchesReference uses names that sort around "/" and "." (so a
// directory's own entry and its subtree are not adjacent in bytewise
// order) and enough directories that subtrees are walked on other
// goroutines, then compares with the reference walk.
func TestWalkMatchesReference(t *testing.T) {
	root := realTempDir(t)
	names := []string{"a", "a.txt", "a-b", "a b", "a!", "a0", "ab", "!bang", "#hash", "-dash", " space", ".hidden", "z"}
	for _, n := range names {
		writeFile(t, filepath.Join(root, n+"-file"), n)
		for _, m := range names[:5] {
			writeFile(t, filepath.Join(root, n, m, "f"), m)
			writeFile(t, filepath.Join(root, n, m+".x"), m)
		}
	}
	for i := range 40 {
		writeFile(t, filepath.Join(root, "many", fmt.Sprintf("d%02d", i), "sub", "f.txt"), "x")
	}
	mkdir(t, filepath.Join(root, "empty"))
	symlink(t, "a.txt", filepath.Join(root, "a", "link"))
	symlink(t, "/nonexistent/target", filepath.Join(root, "dangling"))
	if err := syscall.Mkfifo(filepath.Join(root, "a", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}

	got, err := walkManifest(context.Background(), root, false)
	if err != nil {
		t.Fatal(err)
	}
	want := referenceManifest(t, root)
	if !slices.EqualFunc(got, want, ctoharness.ManifestEntry.Equal) {
		for i := range min(len(got), len(want)) {
			if !got[i].Equal(want[i]) {
				t.Fatalf("entry %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	if got[0].Path == "." {
		t.Fatal(`"." sorted first although "!bang" sorts before it`)
	}
	for i := 0; i < 5; i++ {
		again, err := walkManifest(context.Background(), root, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(again, got, ctoharness.ManifestEntry.Equal) {
			t.Fatal("walk is not deterministic")
		}
	}
}

func TestWalkCanceled(t *testing.T) {
	root := realTempDir(t)
	for i := range 3000 {
		writeFile(t, filepath.Join(root, fmt.Sprintf("d%d", i%30), fmt.Sprintf("f%d", i)), "x")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := walkManifest(ctx, root, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestProveUnreadableDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads directories regardless of permissions")
	}
	repo, _, _ := classified(t, map[string]string{"a.txt": "a\n", "locked/b.txt": "b\n"})
	locked := filepath.Join(repo.Root, "locked")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	_, err := Prove(context.Background(), repo, ProofOptions{Kind: KindAfter}, nil)
	if b := blockerOf(t, err); b.Code != ctoharness.BlockSourceUnreadable || b.Step != ctoharness.StepSourceAfter {
		t.Fatalf("blocker = %+v", b)
	}
}

// TestManifestPackedMatches: the packed walk of a tree with more entries
// than a chunk, in subtrees walked on other goroutines, reads back as the
// plain walk's entries, sorted, with the same digest.
func TestManifestPackedMatches(t *testing.T) {
	root := realTempDir(t)
	for d := range 3 {
		dir := filepath.Join(root, fmt.Sprintf("d%d", d), "sub")
		mkdir(t, dir)
		for i := range manifestChunk/2 + 7 {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	writeFile(t, filepath.Join(root, "d1.txt"), "between d1/ and d2/")
	symlink(t, "d1.txt", filepath.Join(root, "d0", "link"))
	ctx := context.Background()
	want, err := walkManifest(ctx, root, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ManifestPacked(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != len(want) || !got.Sorted() {
		t.Fatalf("packed walk: %d entries, sorted %v; want %d sorted", got.Len(), got.Sorted(), len(want))
	}
	if !slices.EqualFunc(got.Unpack(), want, ctoharness.ManifestEntry.Equal) {
		t.Fatal("the packed walk's entries differ from the walk's")
	}
	if PackedDigest(got) != ManifestDigest(want) {
		t.Fatal("the packed walk's digest differs from the walk's")
	}
	if got.Bytes() > 40*len(want) {
		t.Fatalf("%d entries packed in %d bytes", len(want), got.Bytes())
	}
	// A walk past packBeyond holds the rest of its parts packed and gives
	// the same entries, stat data the evidence leaves out included.
	for _, beyond := range []int64{0, manifestChunk} {
		again, err := walkStructs(ctx, &walk{ctx: ctx, packBeyond: beyond}, root)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(again, want, ctoharness.ManifestEntry.Equal) {
			t.Fatalf("a walk packing beyond %d entries differs from the walk's", beyond)
		}
	}
}
