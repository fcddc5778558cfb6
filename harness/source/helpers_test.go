package source

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	ctoharness "github.com/cto-harness/cto-harness"
)

// traced is one recorded Trace call.
type traced struct {
	op   ctoharness.TraceOp
	path string
}

// recorder is a Tracer that keeps every entry, so tests can assert what the
// package touched.
type recorder struct {
	mu      sync.Mutex
	entries []traced
}

func (r *recorder) Trace(op ctoharness.TraceOp, path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, traced{op, path})
}

func (r *recorder) TraceExec(argv []string, dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, traced{ctoharness.TraceExec, dir})
}

// under returns the recorded entries whose path is at or under root.
func (r *recorder) under(root string) []traced {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []traced
	for _, e := range r.entries {
		if within(filepath.Clean(e.path), root) {
			out = append(out, e)
		}
	}
	return out
}

var testSig = &object.Signature{Name: "Test Author", Email: "test@example.com", When: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}

// realTempDir returns a fresh temp dir by its physical path, so expected
// realpaths in assertions are exact even where TMPDIR is behind a symlink.
func realTempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// initRepo creates a non-bare repository on branch main at dir and commits
// files (relative slash paths to content) with a fixed author and time.
func initRepo(t testing.TB, dir string, files map[string]string) (*git.Repository, plumbing.Hash) {
	t.Helper()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.Main},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, commitFiles(t, r, dir, files, "initial")
}

// commitFiles writes files into the worktree, stages everything and commits.
func commitFiles(t testing.TB, r *git.Repository, dir string, files map[string]string, msg string) plumbing.Hash {
	t.Helper()
	for p, content := range files {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(p)), content)
	}
	w, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := w.Commit(msg, &git.CommitOptions{Author: testSig, Committer: testSig})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// blockerOf returns the Blocker carried by err, failing the test if err is
// not a *ctoharness.BlockerError.
func blockerOf(t *testing.T, err error) ctoharness.Blocker {
	t.Helper()
	var be *ctoharness.BlockerError
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T) is not a *ctoharness.BlockerError", err, err)
	}
	return be.Blocker
}
