package snapshot_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/snapshot"
)

// repo is a real repository with one commit, and the commit and tree.
type repo struct{ dir, commit, tree string }

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func newRepo(t *testing.T, files map[string]string) repo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base")
	return repo{dir: dir, commit: git(t, dir, "rev-parse", "HEAD"), tree: git(t, dir, "rev-parse", "HEAD^{tree}")}
}

var sample = map[string]string{"README.md": "hello\n", "docs/a.md": "a\n", "scripts/run.sh": "#!/bin/sh\necho run\n", "docs/deep/b.txt": "b\n"}

func input(t *testing.T, r repo, root string, signer *attest.Signer) snapshot.Input {
	t.Helper()
	ci, err := fixture.SourceCheckoutInputs(r.dir, "", func(string) string { return "" }, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	return snapshot.Input{Root: root, SourceRoot: r.dir, Commit: r.commit, Tree: r.tree, Checkout: ci, Signer: signer,
		Now: time.Now, Tracer: ctoharness.NopTracer{}}
}

func open(t *testing.T, in snapshot.Input) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Open(context.Background(), in)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestMadeOnceFromTheObjectStore: the first Open writes the commit's tree
// (not the worktree's edits) read-only and records it; the second reuses
// it as it is, record and files untouched.
func TestMadeOnceFromTheObjectStore(t *testing.T) {
	r := newRepo(t, sample)
	// The worktree no longer shows the commit: the snapshot must.
	if err := os.WriteFile(filepath.Join(r.dir, "README.md"), []byte("edited in the worktree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), snapshot.DirName)
	in := input(t, r, root, nil)
	s := open(t, in)
	if !s.Made || s.Record.Tree != r.tree || s.Record.MadeFrom != r.commit || s.Record.Files != len(sample) || s.RecordDigest == "" {
		t.Fatalf("first open: made %v, record %+v", s.Made, s.Record)
	}
	got, err := os.ReadFile(filepath.Join(s.TreeDir(), "README.md"))
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("the snapshot's README.md is %q (%v), want the commit's", got, err)
	}
	if fi, err := os.Stat(filepath.Join(s.TreeDir(), "scripts/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("scripts/run.sh: %v %v, want git's checkout mode 0755", fi.Mode(), err)
	}
	for _, p := range []string{s.Dir, s.TreeDir(), filepath.Join(s.Dir, snapshot.RecordFile), filepath.Join(s.Dir, snapshot.ListingFile), filepath.Join(s.Dir, snapshot.IndexFile)} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s: mode %v (%v), want no write bit", p, fi.Mode(), err)
		}
	}
	if s.Index == nil || s.Index.Root() != r.tree || s.Record.TreeIndex == "" {
		t.Fatalf("the snapshot's tree index: %v, digest %q", s.Index, s.Record.TreeIndex)
	}
	recIno := inode(t, filepath.Join(s.Dir, snapshot.RecordFile))
	fileIno := inode(t, filepath.Join(s.TreeDir(), "docs/a.md"))
	s.Release()

	again := open(t, in)
	defer again.Release()
	if again.Made || again.Key != s.Key || again.RecordDigest != s.RecordDigest {
		t.Fatalf("second open: made %v, key %s digest %s; first %s %s", again.Made, again.Key, again.RecordDigest, s.Key, s.RecordDigest)
	}
	if inode(t, filepath.Join(again.Dir, snapshot.RecordFile)) != recIno || inode(t, filepath.Join(again.TreeDir(), "docs/a.md")) != fileIno {
		t.Fatal("the second open wrote the snapshot again")
	}
}

// TestRacingRunsMakeOne: runs opening one key at once end up sharing one
// snapshot that exactly one of them made.
func TestRacingRunsMakeOne(t *testing.T) {
	r := newRepo(t, sample)
	in := input(t, r, filepath.Join(t.TempDir(), snapshot.DirName), nil)
	const n = 6
	var wg sync.WaitGroup
	snaps := make([]*snapshot.Snapshot, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snaps[i], errs[i] = snapshot.Open(context.Background(), in)
		}()
	}
	wg.Wait()
	made := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer snaps[i].Release()
		if snaps[i].Made {
			made++
		}
		if snaps[i].RecordDigest != snaps[0].RecordDigest {
			t.Fatalf("open %d has record %s, open 0 %s", i, snaps[i].RecordDigest, snaps[0].RecordDigest)
		}
	}
	if made != 1 {
		t.Fatalf("%d of %d racing opens made the snapshot, want 1", made, n)
	}
	ents, _ := os.ReadDir(in.Root)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".make-") {
			t.Fatalf("a half-made snapshot was left: %s", e.Name())
		}
	}
}

func blockerCode(err error) ctoharness.BlockerCode {
	var be *ctoharness.BlockerError
	if errors.As(err, &be) {
		return be.Blocker.Code
	}
	return ""
}

// TestChangedSnapshotIsRefused: whatever changed a snapshot after its
// record (a file's content, a file added, the record itself, its
// signature) blocks the next open with SNAPSHOT_CHANGED.
func TestChangedSnapshotIsRefused(t *testing.T) {
	keys, err := attest.Ephemeral()
	if err != nil {
		t.Fatal(err)
	}
	tamper := map[string]func(t *testing.T, s *snapshot.Snapshot){
		"content": func(t *testing.T, s *snapshot.Snapshot) {
			p := filepath.Join(s.TreeDir(), "docs/a.md")
			fi, _ := os.Lstat(p)
			writeKeepingTimes(t, p, "A\n", fi.ModTime()) // same size, mtime put back: ctime still tells
		},
		"added": func(t *testing.T, s *snapshot.Snapshot) {
			writable(t, filepath.Join(s.TreeDir(), "docs"))
			if err := os.WriteFile(filepath.Join(s.TreeDir(), "docs", "new.md"), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"record": func(t *testing.T, s *snapshot.Snapshot) {
			p := filepath.Join(s.Dir, snapshot.RecordFile)
			data, _ := os.ReadFile(p)
			writable(t, s.Dir)
			os.Chmod(p, 0o644)
			if err := os.WriteFile(p, []byte(strings.Replace(string(data), `"files": 4`, `"files": 5`, 1)), 0o444); err != nil {
				t.Fatal(err)
			}
		},
		"tree index": func(t *testing.T, s *snapshot.Snapshot) {
			// The index of another tree, well formed: only the digest
			// tells.
			p := filepath.Join(s.Dir, snapshot.IndexFile)
			other := newRepo(t, map[string]string{"README.md": "another tree\n"})
			o := open(t, input(t, other, filepath.Join(t.TempDir(), snapshot.DirName), nil))
			o.Release()
			data, err := os.ReadFile(filepath.Join(o.Dir, snapshot.IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			writable(t, s.Dir)
			os.Chmod(p, 0o644)
			if err := os.WriteFile(p, data, 0o444); err != nil {
				t.Fatal(err)
			}
		},
		"signature": func(t *testing.T, s *snapshot.Snapshot) {
			writable(t, s.Dir)
			if err := os.Remove(filepath.Join(s.Dir, snapshot.EnvelopeFile)); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, change := range tamper {
		t.Run(name, func(t *testing.T) {
			r := newRepo(t, sample)
			in := input(t, r, filepath.Join(t.TempDir(), snapshot.DirName), keys.Signer)
			s := open(t, in)
			if s.Record.SigningKeyID != keys.Signer.Public().ID {
				t.Fatalf("record signed by %q, want %s", s.Record.SigningKeyID, keys.Signer.Public().ID)
			}
			s.Release()
			change(t, s)
			_, err := snapshot.Open(context.Background(), in)
			if code := blockerCode(err); code != ctoharness.BlockSnapshotChanged {
				t.Fatalf("open after the %s changed: %v (code %q), want SNAPSHOT_CHANGED", name, err, code)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), "rm -rf "+s.Dir) {
				t.Fatalf("the blocker does not say how to get rid of the snapshot: %v", err)
			}
		})
	}
}

// TestKeyedBySigningKey: a run with another key (or none) never trusts a
// record it did not sign: it gets a snapshot of its own.
func TestKeyedBySigningKey(t *testing.T) {
	r := newRepo(t, sample)
	root := filepath.Join(t.TempDir(), snapshot.DirName)
	a, err := attest.Ephemeral()
	if err != nil {
		t.Fatal(err)
	}
	signed := open(t, input(t, r, root, a.Signer))
	defer signed.Release()
	unsigned := open(t, input(t, r, root, nil))
	defer unsigned.Release()
	if signed.Key == unsigned.Key || !unsigned.Made {
		t.Fatalf("signed %s and unsigned %s (made %v) share a key", signed.Key, unsigned.Key, unsigned.Made)
	}
	if _, err := os.Lstat(filepath.Join(unsigned.Dir, snapshot.EnvelopeFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unsigned snapshot has a signature file: %v", err)
	}
}

// TestSubmodulesNeedACopy: a tree with a gitlink has no snapshot, and
// nothing is left behind.
func TestSubmodulesNeedACopy(t *testing.T) {
	r := newRepo(t, sample)
	git(t, r.dir, "update-index", "--add", "--cacheinfo", "160000,"+r.commit+",vendor/sub")
	git(t, r.dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "sub")
	r.commit, r.tree = git(t, r.dir, "rev-parse", "HEAD"), git(t, r.dir, "rev-parse", "HEAD^{tree}")
	in := input(t, r, filepath.Join(t.TempDir(), snapshot.DirName), nil)
	if _, err := snapshot.Open(context.Background(), in); !errors.Is(err, snapshot.ErrNeedsCopy) {
		t.Fatalf("open of a tree with a submodule: %v, want ErrNeedsCopy", err)
	}
	ents, _ := os.ReadDir(in.Root)
	for _, e := range ents {
		if e.IsDir() {
			t.Fatalf("left behind: %s", e.Name())
		}
	}
}

func writable(t *testing.T, dir string) {
	t.Helper()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeKeepingTimes(t *testing.T, p, body string, mtime time.Time) {
	t.Helper()
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// A submodule whose commit the store lacks (one git leaves unpopulated)
// is written as an empty directory and named in the record, so that a run
// whose source populates it can copy instead.
func TestUnpopulatedSubmoduleIsAnEmptyDirectory(t *testing.T) {
	r := newRepo(t, sample)
	missing := strings.Repeat("ab", 20)
	git(t, r.dir, "update-index", "--add", "--cacheinfo", "160000,"+missing+",vendor/sub")
	git(t, r.dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "sub")
	r.commit, r.tree = git(t, r.dir, "rev-parse", "HEAD"), git(t, r.dir, "rev-parse", "HEAD^{tree}")
	in := input(t, r, filepath.Join(t.TempDir(), snapshot.DirName), nil)
	s, err := snapshot.Open(context.Background(), in)
	if err != nil {
		t.Fatalf("open of a tree with an unpopulated submodule: %v", err)
	}
	defer s.Release()
	if len(s.Record.Submodules) != 1 || s.Record.Submodules[0] != "vendor/sub" {
		t.Fatalf("the record names the submodules %v, want [vendor/sub]", s.Record.Submodules)
	}
	ents, err := os.ReadDir(filepath.Join(s.TreeDir(), "vendor", "sub"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("vendor/sub in the snapshot: %v entries, %v; want an empty directory", len(ents), err)
	}
}
