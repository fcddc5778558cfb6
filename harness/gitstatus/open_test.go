package gitstatus

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestGitDirOf: .git as a directory is itself; a gitfile names the git
// directory, absolute or relative to the worktree; a file that names
// nothing leaves .git.
func TestGitDirOf(t *testing.T) {
	root := t.TempDir()
	wt := filepath.Join(root, "wt")
	if err := os.MkdirAll(filepath.Join(wt, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := GitDirOf(wt); got != filepath.Join(wt, ".git") {
		t.Errorf("embedded: %s", got)
	}
	if err := os.Remove(filepath.Join(wt, ".git")); err != nil {
		t.Fatal(err)
	}
	for content, want := range map[string]string{
		"gitdir: " + root + "/store.git\n": root + "/store.git",
		"gitdir: ../store.git\r\n":         root + "/store.git",
		"not a gitfile\n":                  filepath.Join(wt, ".git"),
	} {
		if err := os.WriteFile(filepath.Join(wt, ".git"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := GitDirOf(wt); got != want {
			t.Errorf("gitfile %q: %s, want %s", content, got, want)
		}
	}
}

// TestOpenReadsAlternates opens a chain of repositories borrowing objects
// as git clone --shared leaves them (absolute alternates, a comment) and
// reads the first repository's commit through the last; ObjectDirs lists
// the directories in git's order and refuses a line naming no directory
// and a relative one (classification refuses it too).
func TestOpenReadsAlternates(t *testing.T) {
	root := t.TempDir()
	git := func(dir string, args ...string) string { t.Helper(); return strings.TrimSpace(gitOut(t, dir, args...)) }
	a := filepath.Join(root, "a")
	os.MkdirAll(a, 0o755)
	git(a, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(a, "f"), []byte("from a\n"), 0o644)
	git(a, "add", "f")
	git(a, "commit", "-q", "-m", "a")
	git(a, "repack", "-adq")
	head := git(a, "rev-parse", "HEAD")
	git(root, "clone", "-q", "--shared", "a", "b")
	git(root, "clone", "-q", "--shared", "b", "c")
	// c borrows from b, which borrows from a.
	bObjects, aObjects := filepath.Join(root, "b", ".git", "objects"), filepath.Join(a, ".git", "objects")
	os.WriteFile(filepath.Join(bObjects, "info", "alternates"), []byte("# a comment\n"+aObjects+"\n"), 0o644)
	c := filepath.Join(root, "c")
	dirs, err := ObjectDirs(filepath.Join(c, ".git", "objects"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(c, ".git", "objects"), bObjects, aObjects}; strings.Join(dirs, " ") != strings.Join(want, " ") {
		t.Fatalf("ObjectDirs = %v, want %v", dirs, want)
	}
	r, err := Open(c, filepath.Join(c, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	commit, err := r.CommitObject(plumbing.NewHash(head))
	if err != nil || commit.Message != "a\n" {
		t.Fatalf("the commit made in a, read through c: %v %v", commit, err)
	}
	os.WriteFile(filepath.Join(bObjects, "info", "alternates"), []byte("../../../a/.git/objects\n"), 0o644)
	if _, err := ObjectDirs(filepath.Join(c, ".git", "objects")); err == nil || !strings.Contains(err.Error(), "not a plain absolute path") {
		t.Fatalf("a relative alternate: %v", err)
	}
	os.WriteFile(filepath.Join(bObjects, "info", "alternates"), []byte(filepath.Join(root, "gone", "objects")+"\n"), 0o644)
	if _, err := ObjectDirs(filepath.Join(c, ".git", "objects")); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("an alternate naming no directory: %v", err)
	}
}

// TestTreesReadAfterTheRepositoryIsGone walks a tree whose repository is
// no longer referenced, collecting between reads: the packs Open reads
// must stay open while a tree or object can still read through them.
func TestTreesReadAfterTheRepositoryIsGone(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string { t.Helper(); return gitOut(t, dir, args...) }
	git("init", "-q", "-b", "main")
	for i := range 40 {
		p := filepath.Join(dir, "d"+strconv.Itoa(i%8), "e"+strconv.Itoa(i%3), "f"+strconv.Itoa(i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(strconv.Itoa(i)), 0o644)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "c")
	git("repack", "-adq")
	want := strings.Count(git("ls-tree", "-r", "-t", "HEAD"), "\n")
	tree := func() *object.Tree {
		r, err := Open(dir, filepath.Join(dir, ".git"))
		if err != nil {
			t.Fatal(err)
		}
		head, _ := r.Head()
		c, err := r.CommitObject(head.Hash())
		if err != nil {
			t.Fatal(err)
		}
		tr, err := c.Tree()
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}()
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	n := 0
	for ; ; n++ {
		runtime.GC()
		_, _, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n != want {
		t.Fatalf("walked %d entries with the repository gone; git lists %d", n, want)
	}
}

// gitOut runs the git CLI in dir with no system or global configuration.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}
