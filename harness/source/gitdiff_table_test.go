package source

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// scenario is one repository state of the differential table.
type scenario struct {
	name string
	init []string // extra `git init` arguments
	// setup brings the committed base repository into the state.
	setup func(t testing.TB, e gitEnv, dir string)
	// reveal, for a state where git hides a real change and the route is
	// deliberately stricter, makes git show it; it runs after the route.
	reveal func(t testing.TB, e gitEnv, dir string)
	// gitArgs are extra git options for the comparison run.
	gitArgs []string
	// refuse is the blocker the route must refuse the state with.
	refuse ctoharness.BlockerCode
	// bare skips the base repository: setup gets an empty directory.
	bare bool
}

// sameSize rewrites rel with content of the same length and restores its
// mtime, the edit a size+mtime comparison cannot see.
func sameSize(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	fi, err := os.Lstat(p)
	mustDo(t, err)
	if fi.Size() != int64(len(content)) {
		t.Fatalf("sameSize: %s has %d bytes, new content %d", rel, fi.Size(), len(content))
	}
	mustDo(t, os.WriteFile(p, []byte(content), 0o644))
	mustDo(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
}

// touch moves a file's mtime an hour ahead without changing its content.
func touch(t testing.TB, dir string, rels ...string) {
	t.Helper()
	future := time.Now().Add(time.Hour)
	for _, rel := range rels {
		mustDo(t, os.Chtimes(filepath.Join(dir, rel), future, future))
	}
}

func rmrf(t testing.TB, dir, rel string) {
	t.Helper()
	mustDo(t, os.RemoveAll(filepath.Join(dir, rel)))
}

func symlinkAt(t testing.TB, dir, target, rel string) {
	t.Helper()
	mustDo(t, os.Symlink(target, filepath.Join(dir, rel)))
}

func chmod(t testing.TB, dir, rel string, mode os.FileMode) {
	t.Helper()
	mustDo(t, os.Chmod(filepath.Join(dir, rel), mode))
}

// subRepo makes a committed repository next to dir, for submodules.
func subRepo(t testing.TB, e gitEnv, dir, name string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(dir), name)
	e.run(t, "", "init", "-q", "-b", "main", p)
	writeAt(t, p, "s.txt", "sub\n")
	writeAt(t, p, "deep/t.txt", "sub deep\n")
	e.run(t, p, "add", "-A")
	e.run(t, p, "commit", "-q", "-m", "sub")
	return p
}

// withSubmodule adds a committed submodule at sub.
func withSubmodule(t testing.TB, e gitEnv, dir string) {
	t.Helper()
	subRepo(t, e, dir, "subsrc")
	e.run(t, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../subsrc", "sub")
	e.run(t, dir, "commit", "-q", "-m", "add submodule")
}

// withNestedSubmodule adds a committed submodule at sub that has a
// submodule of its own at sub/inner, populated recursively as
// `git submodule update --init --recursive` leaves it.
func withNestedSubmodule(t testing.TB, e gitEnv, dir string) {
	t.Helper()
	inner := subRepo(t, e, dir, "innersrc")
	outer := subRepo(t, e, dir, "subsrc")
	e.run(t, outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", inner, "inner")
	e.run(t, outer, "commit", "-q", "-m", "add inner")
	e.run(t, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../subsrc", "sub")
	e.run(t, dir, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init", "--recursive")
	e.run(t, dir, "commit", "-q", "-m", "add nested submodule")
}

// reCheckout removes files and checks them out again, so that the
// worktree gets git's output conversions and the index fresh stat data.
func reCheckout(t testing.TB, e gitEnv, dir string, rels ...string) {
	t.Helper()
	for _, r := range rels {
		rmrf(t, dir, r)
	}
	e.run(t, dir, append([]string{"checkout", "--"}, rels...)...)
}

// separate moves dir's git directory out of the worktree with git's own
// `git init --separate-git-dir`, leaving a gitfile; with relative, the
// gitfile names it by a relative path. It returns the git directory.
func separate(t testing.TB, e gitEnv, dir string, relative bool) string {
	t.Helper()
	gd := filepath.Join(e["HOME"], "separate.git")
	e.run(t, dir, "init", "-q", "--separate-git-dir", gd)
	if relative {
		rel, err := filepath.Rel(dir, gd)
		mustDo(t, err)
		writeAt(t, dir, ".git", "gitdir: "+rel+"\n")
	}
	if fi, err := os.Lstat(filepath.Join(dir, ".git")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("git init --separate-git-dir left no gitfile: %v", err)
	}
	return gd
}

func commitAll(t testing.TB, e gitEnv, dir, msg string) {
	t.Helper()
	e.run(t, dir, "add", "-A")
	e.run(t, dir, "commit", "-q", "-m", msg)
}

func mkfifo(t testing.TB, dir, rel string) {
	t.Helper()
	if err := syscall.Mkfifo(filepath.Join(dir, rel), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
}

func noop(testing.TB, gitEnv, string) {}

// outsideCone commits a directory that the sparse checkouts below leave out.
func outsideCone(t testing.TB, e gitEnv, d string) {
	t.Helper()
	writeAt(t, d, "other/x.txt", "x\n")
	writeAt(t, d, "other/y.txt", "y\n")
	writeAt(t, d, "other/deep/z.txt", "z\n")
	commitAll(t, e, d, "other")
}

// nextSecond waits for the wall clock to enter a new second, so that a
// change made next has a ctime a git built without nanosecond timestamps
// can tell from one recorded before.
func nextSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 10*time.Millisecond).Sub(now))
}

// scenarios is the differential table: each state is built with the git
// CLI, then the route's status must equal git's.
var scenarios = []scenario{
	// Ordinary states.
	{name: "clean", setup: noop},
	{name: "modified, size differs", setup: func(t testing.TB, e gitEnv, d string) { writeAt(t, d, "a.txt", "alpha, longer\n") }},
	{name: "deleted file", setup: func(t testing.TB, e gitEnv, d string) { rmrf(t, d, "b.txt") }},
	{name: "deleted directory", setup: func(t testing.TB, e gitEnv, d string) { rmrf(t, d, "dir") }},
	{name: "untracked file", setup: func(t testing.TB, e gitEnv, d string) { writeAt(t, d, "new.txt", "n\n") }},
	{name: "untracked directory", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "newdir/x.txt", "x\n")
		writeAt(t, d, "newdir/deeper/y.txt", "y\n")
	}},
	{name: "untracked empty directory", setup: func(t testing.TB, e gitEnv, d string) { mustDo(t, os.MkdirAll(filepath.Join(d, "empty/inner"), 0o755)) }},
	{name: "ignored files and directory", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "debug.log", "l\n")
		writeAt(t, d, "dir/deep.log", "l\n")
		writeAt(t, d, "build/out.o", "o\n")
		writeAt(t, d, "build/sub/more.o", "o\n")
	}},
	{name: "touched but unchanged", setup: func(t testing.TB, e gitEnv, d string) { touch(t, d, "a.txt", "dir/c.txt", "big.bin") }},
	{name: "deleted and recreated with the same content", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "a.txt")
		writeAt(t, d, "a.txt", "alpha\n")
	}},
	{name: "staged modification", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "a.txt", "staged\n")
		e.run(t, d, "add", "a.txt")
	}},
	{name: "staged new file", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "dir/new.txt", "new\n")
		e.run(t, d, "add", "dir/new.txt")
	}},
	{name: "removed from the index only", setup: func(t testing.TB, e gitEnv, d string) { e.run(t, d, "rm", "-q", "--cached", "b.txt") }},
	{name: "git rm", setup: func(t testing.TB, e gitEnv, d string) { e.run(t, d, "rm", "-q", "dir/c.txt") }},
	{name: "staged then modified again", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "a.txt", "staged\n")
		e.run(t, d, "add", "a.txt")
		writeAt(t, d, "a.txt", "staged, then edited\n")
	}},
	{name: "staged then reverted in the worktree", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "a.txt", "staged\n")
		e.run(t, d, "add", "a.txt")
		writeAt(t, d, "a.txt", "alpha\n")
	}},
	{name: "intent to add", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "ita.txt", "ita\n")
		e.run(t, d, "add", "-N", "ita.txt")
	}},
	{name: "intent to add, then deleted", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "ita.txt", "ita\n")
		e.run(t, d, "add", "-N", "ita.txt")
		rmrf(t, d, "ita.txt")
	}},
	{name: "unmerged paths", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "checkout", "-q", "-b", "other")
		writeAt(t, d, "a.txt", "other side\n")
		rmrf(t, d, "b.txt")
		commitAll(t, e, d, "other")
		e.run(t, d, "checkout", "-q", "main")
		writeAt(t, d, "a.txt", "main side\n")
		writeAt(t, d, "b.txt", "bravo changed\n")
		commitAll(t, e, d, "main")
		_, _ = e.try(d, "merge", "-q", "other")
	}},
	{name: "exec bit added and removed", setup: func(t testing.TB, e gitEnv, d string) {
		chmod(t, d, "a.txt", 0o755)
		chmod(t, d, "exec.sh", 0o644)
	}},
	{name: "symlink retargeted", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "link")
		symlinkAt(t, d, "b.txt", "link")
	}},
	{name: "file becomes symlink", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "a.txt")
		symlinkAt(t, d, "b.txt", "a.txt")
	}},
	{name: "symlink becomes file", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "link")
		writeAt(t, d, "link", "a.txt")
	}},
	{name: "file becomes directory", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "a.txt")
		writeAt(t, d, "a.txt/inner.txt", "i\n")
	}},
	{name: "directory becomes file", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "dir")
		writeAt(t, d, "dir", "now a file\n")
	}},
	{name: "staged type change", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "b.txt")
		symlinkAt(t, d, "a.txt", "b.txt")
		e.run(t, d, "add", "b.txt")
	}},
	{name: "unicode and odd names", setup: func(t testing.TB, e gitEnv, d string) {
		for _, n := range []string{"ünïcødé.txt", "with space.txt", "tab\tname", "quote\"d", "back\\slash", "new\nline", "-dash", "日本語/ファイル"} {
			writeAt(t, d, n, n+"\n")
		}
		commitAll(t, e, d, "odd names")
		writeAt(t, d, "ünïcødé.txt", "changed\n")
		writeAt(t, d, "also ünïcødé untracked", "u\n")
		rmrf(t, d, "new\nline")
	}},
	{name: "case-only rename", setup: func(t testing.TB, e gitEnv, d string) {
		mustDo(t, os.Rename(filepath.Join(d, "Readme"), filepath.Join(d, "README")))
	}},
	{name: "large file same-size edit in the middle", setup: func(t testing.TB, e gitEnv, d string) {
		c := []byte(baseFiles["big.bin"])
		c[len(c)/2] = 'X'
		sameSize(t, d, "big.bin", string(c))
	}},
	{name: "detached HEAD", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "second.txt", "2\n")
		commitAll(t, e, d, "second")
		e.run(t, d, "checkout", "-q", "--detach", "HEAD~1")
	}},
	{name: "packed refs and tags", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "tag", "v1")
		e.run(t, d, "branch", "side")
		e.run(t, d, "pack-refs", "--all")
		writeAt(t, d, "b.txt", "bravo, after packing\n")
	}},
	{name: "HEAD moved back one commit", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "second.txt", "2\n")
		writeAt(t, d, "a.txt", "alpha 2\n")
		commitAll(t, e, d, "second")
		e.run(t, d, "reset", "-q", "--soft", "HEAD~1")
	}},
	{name: "index without stat data (read-tree)", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "read-tree", "HEAD")
		writeAt(t, d, "b.txt", "bravo, edited\n")
	}},
	{name: "index version 4", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "update-index", "--index-version", "4")
		writeAt(t, d, "dir/sub/d.txt", "delta, edited\n")
		writeAt(t, d, "dir/sub/e.txt", "new\n")
		e.run(t, d, "add", "dir/sub/e.txt")
	}},
	{name: "index version 3", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "update-index", "--index-version", "3")
		writeAt(t, d, "a.txt", "alpha, edited\n")
	}},
	{name: "untracked cache", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.untrackedCache", "true")
		e.run(t, d, "update-index", "--untracked-cache")
		e.run(t, d, "status", "-s")
		writeAt(t, d, "dir/untracked.txt", "u\n")
		writeAt(t, d, "untracked2.txt", "u\n")
	}},
	{name: "racy entry: same size, mtime of the index", setup: func(t testing.TB, e gitEnv, d string) {
		idx, err := os.Stat(filepath.Join(d, ".git/index"))
		mustDo(t, err)
		p := filepath.Join(d, "b.txt")
		mustDo(t, os.WriteFile(p, []byte("BRAVO\n"), 0o644))
		mustDo(t, os.Chtimes(p, idx.ModTime(), idx.ModTime()))
	}},
	{name: "tracked file matching an ignore pattern, edited", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "tracked.log", "t\n")
		e.run(t, d, "add", "-f", "tracked.log")
		e.run(t, d, "commit", "-q", "-m", "tracked log")
		writeAt(t, d, "tracked.log", "t, edited\n")
	}},
	{name: "untracked symlinks", setup: func(t testing.TB, e gitEnv, d string) {
		symlinkAt(t, d, "dir", "link-to-dir")
		symlinkAt(t, d, "nowhere", "dangling")
	}},
	{name: "chmod of an ignored file", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "x.log", "l\n")
		chmod(t, d, "x.log", 0o600)
	}},

	// False clean in the past.
	{name: "same-size edit, mtime restored (touch -r)", setup: func(t testing.TB, e gitEnv, d string) { sameSize(t, d, "a.txt", "ALPHA\n") }},
	{name: "same-size edit, copied with cp -p semantics", setup: func(t testing.TB, e gitEnv, d string) {
		fi, err := os.Lstat(filepath.Join(d, "b.txt"))
		mustDo(t, err)
		mustDo(t, os.WriteFile(filepath.Join(d, "b.txt"), []byte("bRaVo\n"), 0o644))
		mustDo(t, os.Chtimes(filepath.Join(d, "b.txt"), fi.ModTime(), fi.ModTime()))
	}},
	{name: "same-size edit, replaced by rename with restored mtime", setup: func(t testing.TB, e gitEnv, d string) {
		fi, err := os.Lstat(filepath.Join(d, "dir/c.txt"))
		mustDo(t, err)
		tmp := filepath.Join(d, "dir/.c.tmp")
		mustDo(t, os.WriteFile(tmp, []byte("CHARLIE\n"), 0o644))
		mustDo(t, os.Chtimes(tmp, fi.ModTime(), fi.ModTime()))
		mustDo(t, os.Rename(tmp, filepath.Join(d, "dir/c.txt")))
	}},
	{name: "same-size edit, mtime restored, entry not racy: only ctime tells", setup: func(t testing.TB, e gitEnv, d string) {
		old := time.Now().Add(-time.Hour)
		mustDo(t, os.Chtimes(filepath.Join(d, "a.txt"), old, old))
		e.run(t, d, "add", "a.txt") // the index records the old mtime
		nextSecond()                // git compares ctime by the second
		sameSize(t, d, "a.txt", "ALPHA\n")
	}},
	{name: "submodule clean", setup: func(t testing.TB, e gitEnv, d string) { withSubmodule(t, e, d) }},
	{name: "submodule with a modified file", setup: func(t testing.TB, e gitEnv, d string) {
		withSubmodule(t, e, d)
		writeAt(t, d, "sub/s.txt", "sub, edited\n")
	}},
	{name: "submodule with a same-size edit", setup: func(t testing.TB, e gitEnv, d string) {
		withSubmodule(t, e, d)
		sameSize(t, d, "sub/s.txt", "SUB\n")
	}},
	{name: "submodule with an untracked file", setup: func(t testing.TB, e gitEnv, d string) {
		withSubmodule(t, e, d)
		writeAt(t, d, "sub/deep/untracked.txt", "u\n")
	}},
	{name: "submodule with a staged change", setup: func(t testing.TB, e gitEnv, d string) {
		withSubmodule(t, e, d)
		writeAt(t, d, "sub/s.txt", "sub, staged\n")
		e.run(t, filepath.Join(d, "sub"), "add", "s.txt")
	}},
	{name: "submodule at another commit", setup: func(t testing.TB, e gitEnv, d string) {
		withSubmodule(t, e, d)
		writeAt(t, d, "sub/s.txt", "sub 2\n")
		commitAll(t, e, filepath.Join(d, "sub"), "sub 2")
	}},
	{name: "nested submodule clean", setup: func(t testing.TB, e gitEnv, d string) { withNestedSubmodule(t, e, d) }},
	{name: "nested submodule with a modified file", setup: func(t testing.TB, e gitEnv, d string) {
		withNestedSubmodule(t, e, d)
		writeAt(t, d, "sub/inner/s.txt", "changed\n")
	}},
	{name: "nested submodule with an untracked file", setup: func(t testing.TB, e gitEnv, d string) {
		withNestedSubmodule(t, e, d)
		writeAt(t, d, "sub/inner/new.txt", "n\n")
	}},
	{name: "nested submodule at another commit", setup: func(t testing.TB, e gitEnv, d string) {
		withNestedSubmodule(t, e, d)
		writeAt(t, d, "sub/inner/s.txt", "next\n")
		e.run(t, filepath.Join(d, "sub", "inner"), "commit", "-q", "-am", "next")
	}},
	{name: "nested submodule not checked out", setup: func(t testing.TB, e gitEnv, d string) {
		withNestedSubmodule(t, e, d)
		e.run(t, filepath.Join(d, "sub"), "submodule", "deinit", "-q", "-f", "inner")
	}},
	{name: "submodule not checked out", setup: func(t testing.TB, e gitEnv, d string) {
		withSubmodule(t, e, d)
		e.run(t, d, "submodule", "deinit", "-q", "-f", "sub")
	}},
	{name: "untracked nested repository", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "init", "-q", "nested")
		writeAt(t, d, "nested/n.txt", "n\n")
	}},
	{name: "untracked nested repository holding only .git", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "init", "-q", "nested")
	}},
	{name: "untracked nested repository holding only ignored files", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "init", "-q", "dir/nested")
		writeAt(t, d, "dir/nested/x.log", "l\n")
	}},
	{name: "nested repository inside an ignored directory", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "init", "-q", "build/nested")
		writeAt(t, d, "build/nested/n.txt", "n\n")
	}},
	{name: "core.worktree set", refuse: ctoharness.BlockSourceCoreWorktree, setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.worktree", filepath.Dir(d))
	}},

	// False dirty in the past.
	{name: "ignored by .git/info/exclude", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".git/info/exclude", "# local\n*.tmp\n/only-root\n")
		writeAt(t, d, "x.tmp", "t\n")
		writeAt(t, d, "dir/y.tmp", "t\n")
		writeAt(t, d, "only-root", "r\n")
		writeAt(t, d, "dir/only-root", "r\n")
	}},
	{name: "ignored by core.excludesFile in the repository config", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, filepath.Dir(d), "excludes", "*.bak\n")
		e.run(t, d, "config", "core.excludesFile", filepath.Join(filepath.Dir(d), "excludes"))
		writeAt(t, d, "x.bak", "b\n")
	}},
	{name: "ignored by core.excludesFile in the global config", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], ".gitexcludes", "*.swp\n")
		writeAt(t, e["HOME"], ".gitconfig", "[core]\n\texcludesfile = ~/.gitexcludes\n")
		writeAt(t, d, "dir/.c.txt.swp", "s\n")
	}},
	{name: "ignored by $XDG_CONFIG_HOME/git/ignore", setup: func(t testing.TB, e gitEnv, d string) {
		xdg := filepath.Join(e["HOME"], "xdg")
		e["XDG_CONFIG_HOME"] = xdg
		writeAt(t, xdg, "git/ignore", "*.orig\n")
		writeAt(t, d, "a.txt.orig", "o\n")
	}},
	{name: "ignored by ~/.config/git/ignore", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], ".config/git/ignore", "scratch/\n")
		writeAt(t, d, "scratch/s.txt", "s\n")
	}},
	{name: "core.excludesFile relative to the worktree", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".myignore", "*.rel\n.myignore\n")
		e.run(t, d, "config", "core.excludesFile", ".myignore")
		writeAt(t, d, "dir/x.rel", "r\n")
	}},
	{name: "core.excludesFile from an included global config file", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], "ignores", "*.inc\n")
		writeAt(t, e["HOME"], "extra.gitconfig", "[core]\n\texcludesFile = ~/ignores\n")
		writeAt(t, e["HOME"], ".gitconfig", "[include]\n\tpath = extra.gitconfig\n")
		writeAt(t, d, "x.inc", "i\n")
	}},
	{name: "core.excludesFile from includeIf gitdir", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], "ignores", "*.cond\n")
		writeAt(t, e["HOME"], "cond.gitconfig", "[core]\n\texcludesFile = ~/ignores\n")
		writeAt(t, e["HOME"], ".gitconfig", "[includeIf \"gitdir:"+filepath.Dir(d)+"/\"]\n\tpath = cond.gitconfig\n[includeIf \"gitdir:/elsewhere/\"]\n\tpath = nothing.gitconfig\n")
		writeAt(t, d, "x.cond", "c\n")
	}},
	{name: "symlinked .gitignore is not followed", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, filepath.Dir(d), "outside-ignore", "*.txt\n")
		symlinkAt(t, d, "../outside-ignore", "dir/.gitignore")
		writeAt(t, d, "dir/new.txt", "n\n")
	}},
	{name: "re-include under an excluded directory is impossible", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitignore", "*.log\nbuild/\n!build/keep.txt\n")
		commitAll(t, e, d, "ignore")
		writeAt(t, d, "build/keep.txt", "k\n")
		writeAt(t, d, "build/other.txt", "o\n")
	}},
	{name: "re-include of a file", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitignore", "*.log\n!keep.log\n")
		commitAll(t, e, d, "ignore")
		writeAt(t, d, "keep.log", "k\n")
		writeAt(t, d, "drop.log", "d\n")
	}},
	{name: "bracket negation [!a]", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitignore", "[!a]*.tmp\nx[^0-4].dat\n[[:digit:]]*.num\n")
		commitAll(t, e, d, "ignore")
		for _, n := range []string{"a1.tmp", "b1.tmp", "x3.dat", "x7.dat", "9.num", "n.num"} {
			writeAt(t, d, n, "x\n")
		}
	}},
	{name: "double-star and anchored patterns", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitignore", "/rootonly\ndir/**/gen\n**/cache/\nx/**\nfoo/*.c\n")
		commitAll(t, e, d, "ignore")
		for _, n := range []string{"rootonly", "dir/rootonly", "dir/gen", "dir/sub/gen", "dir/a/b/gen", "cache/c", "dir/cache/c", "x/y/z", "foo/a.c", "foo/b/a.c"} {
			writeAt(t, d, n, "x\n")
		}
	}},
	{name: "escaped and trailing-space patterns", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitignore", "\\#hash\ntrail  \nesc\\ \n\\!bang\n")
		commitAll(t, e, d, "ignore")
		for _, n := range []string{"#hash", "trail", "esc ", "!bang", "trail  "} {
			writeAt(t, d, n, "x\n")
		}
	}},
	{name: "nested .gitignore overrides its parent", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "dir/.gitignore", "!*.log\n*.txt\n")
		commitAll(t, e, d, "nested ignore")
		writeAt(t, d, "dir/keep.log", "k\n")
		writeAt(t, d, "dir/new.txt", "n\n")
		writeAt(t, d, "top.log", "t\n")
	}},
	{name: "directory-only pattern does not match a file", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitignore", "logs/\n")
		commitAll(t, e, d, "ignore")
		writeAt(t, d, "logs", "a file\n")
		writeAt(t, d, "dir/logs/x", "x\n")
	}},
	{name: "gitlink without .gitmodules", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "init", "-q", "-b", "main", "embedded")
		writeAt(t, d, "embedded/e.txt", "e\n")
		commitAll(t, e, filepath.Join(d, "embedded"), "embedded")
		e.run(t, d, "add", "embedded")
		e.run(t, d, "commit", "-q", "-m", "gitlink")
	}},
	{name: "gitlink without .gitmodules, modified inside", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "init", "-q", "-b", "main", "embedded")
		writeAt(t, d, "embedded/e.txt", "e\n")
		commitAll(t, e, filepath.Join(d, "embedded"), "embedded")
		e.run(t, d, "add", "embedded")
		e.run(t, d, "commit", "-q", "-m", "gitlink")
		writeAt(t, d, "embedded/e.txt", "e, edited\n")
	}},
	{name: "gitlink without a checkout", setup: func(t testing.TB, e gitEnv, d string) {
		head := strings.TrimSpace(e.run(t, d, "rev-parse", "HEAD"))
		e.run(t, d, "update-index", "--add", "--cacheinfo", "160000,"+head+",gl")
		e.run(t, d, "commit", "-q", "-m", "gitlink")
		mustDo(t, os.Mkdir(filepath.Join(d, "gl"), 0o755))
	}},
	{name: "exec bit with core.fileMode=false", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.fileMode", "false")
		chmod(t, d, "a.txt", 0o755)
		chmod(t, d, "exec.sh", 0o644)
	}},
	{name: "core.symlinks=false", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.symlinks", "false")
		reCheckout(t, e, d, "link")
		touch(t, d, "link")
	}},
	{name: "core.symlinks=false, link file edited", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.symlinks", "false")
		reCheckout(t, e, d, "link")
		writeAt(t, d, "link", "b.txt")
	}},
	{name: "core.autocrlf=true, touched after checkout", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.autocrlf", "true")
		reCheckout(t, e, d, "a.txt", "dir/c.txt", "exec.sh")
		touch(t, d, "a.txt", "dir/c.txt", "exec.sh")
	}},
	{name: "core.autocrlf=true, line endings changed to LF", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.autocrlf", "true")
		reCheckout(t, e, d, "a.txt")
		writeAt(t, d, "a.txt", "alpha\n")
	}},
	{name: "core.autocrlf=true, edited", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.autocrlf", "true")
		reCheckout(t, e, d, "a.txt")
		writeAt(t, d, "a.txt", "alpha, edited\r\n")
	}},
	{name: "text=auto eol=crlf, touched after checkout", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.txt text=auto eol=crlf\n")
		commitAll(t, e, d, "attributes")
		reCheckout(t, e, d, "a.txt", "dir/sub/d.txt")
		touch(t, d, "a.txt", "dir/sub/d.txt")
	}},
	{name: "eol=crlf, same content with CRLF written by hand", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.txt eol=crlf\n")
		commitAll(t, e, d, "attributes")
		writeAt(t, d, "b.txt", "bravo\r\n")
	}},
	{name: "text attribute on a file committed with CRLF", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "crlf.txt", "one\r\ntwo\r\n")
		commitAll(t, e, d, "crlf")
		writeAt(t, d, ".gitattributes", "crlf.txt text\n")
		commitAll(t, e, d, "attributes")
		touch(t, d, "crlf.txt")
	}},
	{name: "text=auto keeps CRLF already in the index", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "crlf.txt", "one\r\ntwo\r\n")
		commitAll(t, e, d, "crlf")
		e.run(t, d, "config", "core.autocrlf", "true")
		touch(t, d, "crlf.txt")
	}},
	{name: "binary attribute and a NUL byte under autocrlf", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.raw binary\n")
		writeAt(t, d, "x.raw", "a\r\nb\r\n")
		writeAt(t, d, "nul.txt", "a\r\n\x00b\r\n")
		commitAll(t, e, d, "binary")
		e.run(t, d, "config", "core.autocrlf", "true")
		touch(t, d, "x.raw", "nul.txt")
	}},
	{name: "deleted .gitattributes still applies from the index", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.txt text eol=crlf\n")
		commitAll(t, e, d, "attributes")
		reCheckout(t, e, d, "a.txt", "b.txt")
		rmrf(t, d, ".gitattributes")
		touch(t, d, "a.txt", "b.txt")
	}},
	{name: "filter named by a .gitattributes deleted from the worktree", refuse: ctoharness.BlockSourceFilterConfigured, setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.txt filter=rot\n")
		commitAll(t, e, d, "attributes")
		rmrf(t, d, ".gitattributes")
		e.run(t, d, "config", "filter.rot.clean", "tr a-z n-za-m")
	}},
	{name: "ident, touched after checkout", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.id ident\n")
		writeAt(t, d, "v.id", "version $Id$ here\n$Id$\n")
		commitAll(t, e, d, "ident")
		reCheckout(t, e, d, "v.id")
		touch(t, d, "v.id")
	}},
	{name: "ident, edited", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.id ident\n")
		writeAt(t, d, "v.id", "version $Id$ here\n")
		commitAll(t, e, d, "ident")
		reCheckout(t, e, d, "v.id")
		writeAt(t, d, "v.id", "version $Id$ there\n")
	}},
	{name: "attributes in a subdirectory and macros", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "[attr]crlfy text eol=crlf\n*.md crlfy\n")
		writeAt(t, d, "dir/.gitattributes", "*.txt eol=crlf\nc.txt -text\n")
		writeAt(t, d, "dir/x.md", "md\n")
		commitAll(t, e, d, "attributes")
		reCheckout(t, e, d, "dir")
		touch(t, d, "dir/x.md", "dir/c.txt", "dir/sub/d.txt")
	}},
	{name: "untracked FIFO", setup: func(t testing.TB, e gitEnv, d string) {
		mkfifo(t, d, "fifo")
		mkfifo(t, d, "dir/fifo2")
	}},
	{name: "sparse checkout (worktree config)", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "set", "dir/sub")
	}},
	{name: "sparse checkout, edited inside the cone", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "set", "dir")
		writeAt(t, d, "dir/c.txt", "charlie, edited\n")
		writeAt(t, d, "dir/new.txt", "new\n")
	}},
	{name: "sparse checkout, directory where a skipped file was", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "set", "dir")
		writeAt(t, d, "other/x.txt/inner", "i\n")
		writeAt(t, d, "other/y.txt", "y, present again\n")
		writeAt(t, d, "other/deep/z.txt", "z\n")
	}},
	{name: "sparse index", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "init", "--cone", "--sparse-index")
		e.run(t, d, "sparse-checkout", "set", "dir/sub")
		writeAt(t, d, "dir/sub/d.txt", "delta, edited\n")
	}},
	{name: "split index", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.splitIndex", "true")
		e.run(t, d, "update-index", "--split-index")
	}},
	{name: "split index with changes on both layers", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "update-index", "--split-index")
		writeAt(t, d, "a.txt", "staged\n")
		e.run(t, d, "add", "a.txt")
		e.run(t, d, "rm", "-q", "--cached", "b.txt")
		writeAt(t, d, "dir/c.txt", "charlie, edited\n")
		writeAt(t, d, "z.txt", "z\n")
		e.run(t, d, "add", "z.txt")
	}},

	// Where git hides a real change, the route is stricter.
	{name: "assume-unchanged hides an edit", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "update-index", "--assume-unchanged", "a.txt")
		writeAt(t, d, "a.txt", "alpha, hidden from git\n")
	}, reveal: func(t testing.TB, e gitEnv, d string) { e.run(t, d, "update-index", "--no-assume-unchanged", "a.txt") }},
	{name: "core.trustctime=false hides a same-size edit only ctime tells", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.trustctime", "false")
		old := time.Now().Add(-time.Hour)
		mustDo(t, os.Chtimes(filepath.Join(d, "a.txt"), old, old))
		e.run(t, d, "add", "a.txt")
		nextSecond()
		sameSize(t, d, "a.txt", "ALPHA\n")
	}, reveal: func(t testing.TB, e gitEnv, d string) { e.run(t, d, "config", "core.trustctime", "true") }},
	{name: "submodule.ignore=dirty hides a modified submodule", setup: func(t testing.TB, e gitEnv, d string) {
		withSubmodule(t, e, d)
		e.run(t, d, "config", "-f", ".gitmodules", "submodule.sub.ignore", "dirty")
		commitAll(t, e, d, "ignore dirty")
		writeAt(t, d, "sub/s.txt", "sub, edited\n")
	}, reveal: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "submodule.sub.ignore", "none") // .git/config outranks .gitmodules
	}},
	{name: "status.showUntrackedFiles=no hides untracked files", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "status.showUntrackedFiles", "no")
		writeAt(t, d, "hidden.txt", "h\n")
	}},

	// Refused: the route would have to run something the source configures,
	// or the repository uses a format the route does not read.
	{name: "clean filter configured", refuse: ctoharness.BlockSourceFilterConfigured, setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.txt filter=rot\n")
		e.run(t, d, "config", "filter.rot.clean", "tr a-z n-za-m")
	}},
	// (git-lfs's own process filter is done natively: see lfs_test.go.)
	{name: "process filter configured globally, used by an attribute", refuse: ctoharness.BlockSourceFilterConfigured, setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], ".gitconfig", "[filter \"big\"]\n\tprocess = big-files filter-process\n")
		writeAt(t, d, ".gitattributes", "*.bin filter=big\n")
	}},
	{name: "filter attribute without a configured driver", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.txt filter=nothing\n")
		commitAll(t, e, d, "attributes")
		touch(t, d, "a.txt")
	}},
	{name: "filter configured but used by no attribute", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], ".gitconfig", "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n")
		touch(t, d, "a.txt")
	}},
	{name: "fsmonitor hook configured", refuse: ctoharness.BlockSourceFsmonitorConfigured, setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.fsmonitor", ".git/hooks/query-watchman")
	}},
	{name: "SHA-256 repository", init: []string{"--object-format=sha256"}, refuse: ctoharness.BlockSourceObjectFormat, setup: noop},
	{name: "reftable repository", refuse: ctoharness.BlockSourceRefStorage, setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.repositoryformatversion", "1")
		e.run(t, d, "config", "extensions.refStorage", "reftable")
	}},
	{name: "unknown repository extension", refuse: ctoharness.BlockSourceGitFeature, setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.repositoryformatversion", "1")
		e.run(t, d, "config", "extensions.somethingNew", "true")
	}},
	{name: "includeIf hasconfig:remote.*.url naming a file that sets a remote (git fails)", refuse: ctoharness.BlockSourceUnreadable, setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], "work.gitconfig", "[remote \"other\"]\n\turl = https://example.invalid/other.git\n")
		writeAt(t, e["HOME"], ".gitconfig", "[includeIf \"hasconfig:remote.*.url:https://nowhere.invalid/**\"]\n\tpath = work.gitconfig\n")
		if _, err := e.try(d, "status"); err == nil {
			t.Fatal("git reads a remote URL in a file included through hasconfig:remote.*.url; the row expects it to fail")
		}
	}},
	{name: "include.path from GIT_CONFIG_PARAMETERS", setup: func(t testing.TB, e gitEnv, d string) {
		attrs := crlfTextAttributes(t, e, d)
		writeAt(t, e["HOME"], "extra.gitconfig", "[core]\n\tattributesFile = "+attrs+"\n")
		e["GIT_CONFIG_PARAMETERS"] = "'include.path'='" + filepath.Join(e["HOME"], "extra.gitconfig") + "'"
	}},
	{name: "GIT_CONFIG_GLOBAL and GIT_CONFIG_SYSTEM files", setup: func(t testing.TB, e gitEnv, d string) {
		attrs := crlfTextAttributes(t, e, d)
		writeAt(t, e["HOME"], "g.gitconfig", "[core]\n\tattributesFile = "+attrs+"\n")
		writeAt(t, e["HOME"], "s.gitconfig", "[core]\n\tfileMode = false\n")
		e["GIT_CONFIG_GLOBAL"] = filepath.Join(e["HOME"], "g.gitconfig")
		e["GIT_CONFIG_SYSTEM"] = filepath.Join(e["HOME"], "s.gitconfig")
		e["GIT_CONFIG_NOSYSTEM"] = "no"
	}},
	{name: "includeIf hasconfig on something other than remote URLs", refuse: ctoharness.BlockSourceGitFeature, setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], ".gitconfig", "[includeIf \"hasconfig:user.email:*@example.invalid\"]\n\tpath = work.gitconfig\n")
	}},
	{name: "includeIf onbranch", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], "ignores", "*.br\n")
		writeAt(t, e["HOME"], "br.gitconfig", "[core]\n\texcludesFile = ~/ignores\n")
		writeAt(t, e["HOME"], ".gitconfig", "[includeIf \"onbranch:ma*\"]\n\tpath = br.gitconfig\n")
		writeAt(t, d, "x.br", "b\n")
	}},
	{name: "index with an unknown required extension", refuse: ctoharness.BlockSourceGitFeature, setup: func(t testing.TB, e gitEnv, d string) {
		p := filepath.Join(d, ".git/index")
		data, err := os.ReadFile(p)
		mustDo(t, err)
		body := append(data[:len(data)-20:len(data)-20], 'z', 'z', 'z', 'z', 0, 0, 0, 0)
		sum := sha1.Sum(body)
		mustDo(t, os.WriteFile(p, append(body, sum[:]...), 0o644))
	}},
	{name: "working-tree-encoding attribute", refuse: ctoharness.BlockSourceGitFeature, setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, ".gitattributes", "*.u16 working-tree-encoding=UTF-16LE\n")
	}},

	// Issue 21, point 10: configuration from the environment. Each sets
	// core.attributesFile to a file that gives a CRLF blob the text
	// attribute, which git then reports modified: a route that does not
	// read the setting says clean.
	{name: "config from GIT_CONFIG_COUNT", setup: func(t testing.TB, e gitEnv, d string) {
		attrs := crlfTextAttributes(t, e, d)
		e["GIT_CONFIG_COUNT"] = "2"
		e["GIT_CONFIG_KEY_0"] = "core.attributesFile"
		e["GIT_CONFIG_VALUE_0"] = attrs
		e["GIT_CONFIG_KEY_1"] = "Core.FileMode"
		e["GIT_CONFIG_VALUE_1"] = "true"
	}},
	{name: "config from GIT_CONFIG_PARAMETERS", setup: func(t testing.TB, e gitEnv, d string) {
		attrs := crlfTextAttributes(t, e, d)
		e["GIT_CONFIG_PARAMETERS"] = "'core.attributesfile'='" + attrs + "' 'core.quotepath=false' 'core.fileMode'"
	}},
	{name: "GIT_CONFIG_NOSYSTEM=0 reads the system config", setup: func(t testing.TB, e gitEnv, d string) {
		sys := filepath.Join(e["HOME"], "system.gitconfig")
		writeAt(t, e["HOME"], "system.gitconfig", "[core]\n\tattributesFile = "+crlfTextAttributes(t, e, d)+"\n")
		e["GIT_CONFIG_NOSYSTEM"] = "0"
		e["GIT_CONFIG_SYSTEM"] = sys
	}},
	{name: "GIT_CONFIG_NOSYSTEM=false reads the system config", setup: func(t testing.TB, e gitEnv, d string) {
		sys := filepath.Join(e["HOME"], "system.gitconfig")
		writeAt(t, e["HOME"], "system.gitconfig", "[core]\n\tattributesFile = "+crlfTextAttributes(t, e, d)+"\n")
		e["GIT_CONFIG_NOSYSTEM"] = "false"
		e["GIT_CONFIG_SYSTEM"] = sys
	}},
	{name: "GIT_CONFIG_NOSYSTEM=yes skips the system config", setup: func(t testing.TB, e gitEnv, d string) {
		sys := filepath.Join(e["HOME"], "system.gitconfig")
		writeAt(t, e["HOME"], "system.gitconfig", "[core]\n\tattributesFile = "+crlfTextAttributes(t, e, d)+"\n")
		e["GIT_CONFIG_NOSYSTEM"] = "yes"
		e["GIT_CONFIG_SYSTEM"] = sys
	}},
	{name: "quoted .gitattributes pattern", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "my file.txt", "one\r\ntwo\r\n")
		writeAt(t, d, "tab\there.txt", "one\r\n")
		writeAt(t, d, "plain.txt", "one\r\n")
		commitAll(t, e, d, "crlf")
		writeAt(t, d, ".gitattributes", "* -text\n\"my file.txt\" text\n\"tab\\there.txt\"\ttext\n\"plain.txt\"text\n")
		commitAll(t, e, d, "attributes")
		touch(t, d, "my file.txt", "tab\there.txt", "plain.txt")
	}},
	{name: "separate git directory", setup: func(t testing.TB, e gitEnv, d string) {
		separate(t, e, d, false)
		writeAt(t, d, "a.txt", "changed\n")
		writeAt(t, d, "new.txt", "n\n")
		writeAt(t, d, "x.log", "ignored\n")
		writeAt(t, d, "dir/staged.txt", "s\n")
		e.run(t, d, "add", "dir/staged.txt")
	}},
	{name: "separate git directory, clean after touching", setup: func(t testing.TB, e gitEnv, d string) {
		separate(t, e, d, false)
		touch(t, d, "a.txt", "dir/c.txt")
	}},
	{name: "separate git directory named relatively, with info/exclude", setup: func(t testing.TB, e gitEnv, d string) {
		gd := separate(t, e, d, true)
		writeAt(t, gd, "info/exclude", "*.tmp\n")
		writeAt(t, d, "scratch.tmp", "t\n")
		writeAt(t, d, "kept.txt", "k\n")
		rmrf(t, d, "b.txt")
	}},
	{name: "linked worktree inside the repository", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "worktree", "add", "-q", "wt")
		writeAt(t, d, "wt/extra.txt", "x\n")
	}},
	{name: "sparse checkout reads a skipped .gitignore from the index", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, d, "other/.gitignore", "*.tmp\n")
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "set", "dir")
		writeAt(t, d, "other/x.tmp", "t\n")
		writeAt(t, d, "other/deep/y.tmp", "t\n")
	}},
	{name: "non-cone sparse checkout reads a skipped root .gitignore from the index", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "sparse-checkout", "set", "--no-cone", "/dir/")
		writeAt(t, d, "x.log", "l\n")
		writeAt(t, d, "build/out.o", "o\n")
	}},
	{name: "file replaced by a nested repository", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "a.txt")
		e.run(t, d, "init", "-q", "a.txt")
		writeAt(t, d, "a.txt/inner.txt", "i\n")
	}},
	{name: "directory replaced by a nested repository", setup: func(t testing.TB, e gitEnv, d string) {
		rmrf(t, d, "dir/sub")
		e.run(t, d, "init", "-q", "dir/sub")
		writeAt(t, d, "dir/sub/inner.txt", "i\n")
	}},
	{name: "untracked file under a conflicted path", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "checkout", "-q", "-b", "other")
		writeAt(t, d, "a.txt", "other side\n")
		commitAll(t, e, d, "other")
		e.run(t, d, "checkout", "-q", "main")
		writeAt(t, d, "a.txt", "main side\n")
		commitAll(t, e, d, "main")
		_, _ = e.try(d, "merge", "-q", "other")
		rmrf(t, d, "a.txt")
		writeAt(t, d, "a.txt/u.txt", "u\n")
		writeAt(t, d, "a.txt/deep/v.log", "v\n")
	}},
	{name: "sparse index with a staged change", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "init", "--cone", "--sparse-index")
		e.run(t, d, "sparse-checkout", "set", "dir/sub")
		writeAt(t, d, "dir/sub/d.txt", "delta, staged\n")
		writeAt(t, d, "dir/sub/new.txt", "new\n")
		e.run(t, d, "add", "dir/sub")
		writeAt(t, d, "dir/sub/d.txt", "delta, staged, then edited\n")
	}},
	{name: "sparse index with a staged deletion", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "init", "--cone", "--sparse-index")
		e.run(t, d, "sparse-checkout", "set", "dir/sub")
		e.run(t, d, "rm", "-q", "--cached", "dir/sub/d.txt")
	}},
	{name: "sparse index, HEAD moved past a change outside the cone", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		writeAt(t, d, "other/added.txt", "added\n")
		writeAt(t, d, "other/x.txt", "x, changed\n")
		rmrf(t, d, "other/deep")
		commitAll(t, e, d, "outside")
		e.run(t, d, "reset", "-q", "--soft", "HEAD~1")
		e.run(t, d, "sparse-checkout", "init", "--cone", "--sparse-index")
		e.run(t, d, "sparse-checkout", "set", "dir/sub")
	}},
	{name: "sparse index, an entry added inside a sparse directory by plumbing", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "init", "--cone", "--sparse-index")
		e.run(t, d, "sparse-checkout", "set", "dir/sub")
		blob := strings.TrimSpace(e.run(t, d, "rev-parse", "HEAD:a.txt"))
		e.run(t, d, "update-index", "--add", "--cacheinfo", "100644,"+blob+",other/added.txt")
		e.run(t, d, "update-index", "--add", "--cacheinfo", "100644,"+blob+",other/x.txt")
	}},
	{name: "sparse index, staged removal outside the cone", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "init", "--cone", "--sparse-index")
		e.run(t, d, "sparse-checkout", "set", "dir/sub")
		e.run(t, d, "rm", "-q", "--cached", "--sparse", "other/x.txt")
	}},
	{name: "sparse index, staged file added outside the cone", setup: func(t testing.TB, e gitEnv, d string) {
		outsideCone(t, e, d)
		e.run(t, d, "sparse-checkout", "init", "--cone", "--sparse-index")
		e.run(t, d, "sparse-checkout", "set", "dir/sub")
		writeAt(t, d, "other/new.txt", "new\n")
		e.run(t, d, "add", "--sparse", "other/new.txt")
	}},
	{name: "core.excludesFile is a directory (git fails)", refuse: ctoharness.BlockSourceUnreadable, setup: func(t testing.TB, e gitEnv, d string) {
		mustDo(t, os.MkdirAll(filepath.Join(e["HOME"], "excludes.d"), 0o755))
		e.run(t, d, "config", "core.excludesFile", filepath.Join(e["HOME"], "excludes.d"))
		if _, err := e.try(d, "status"); err == nil {
			t.Skip("this git reads a directory as an empty exclude file")
		}
	}},
	{name: "clone --shared", setup: func(t testing.TB, e gitEnv, d string) {
		orig := d + ".orig"
		mustDo(t, os.Rename(d, orig))
		e.run(t, "", "clone", "-q", "--shared", orig, d)
		writeAt(t, d, "a.txt", "alpha, edited\n")
		writeAt(t, d, "new.txt", "n\n")
	}},
	{name: "clone --shared, new commits in both", setup: func(t testing.TB, e gitEnv, d string) {
		orig := d + ".orig"
		mustDo(t, os.Rename(d, orig))
		e.run(t, "", "clone", "-q", "--shared", orig, d)
		writeAt(t, orig, "a.txt", "same change\n")
		commitAll(t, e, orig, "in the original")
		writeAt(t, d, "a.txt", "same change\n")
		commitAll(t, e, d, "in the clone")
		writeAt(t, d, "dir/c.txt", "charlie, edited\n")
	}},
	{name: "includeIf hasconfig:remote.*.url, matching", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], "work.gitconfig", "[core]\n\tattributesFile = "+crlfTextAttributes(t, e, d)+"\n")
		writeAt(t, e["HOME"], ".gitconfig", "[includeIf \"hasconfig:remote.*.url:https://example.invalid/**\"]\n\tpath = work.gitconfig\n")
		e.run(t, d, "remote", "add", "origin", "https://example.invalid/team/repo.git")
	}},
	{name: "includeIf hasconfig:remote.*.url, not matching", setup: func(t testing.TB, e gitEnv, d string) {
		writeAt(t, e["HOME"], "ignores", "*.txt\n")
		writeAt(t, e["HOME"], "work.gitconfig", "[core]\n\texcludesFile = ~/ignores\n")
		writeAt(t, e["HOME"], ".gitconfig", "[includeIf \"hasconfig:remote.*.url:https://example.invalid/**\"]\n\tpath = work.gitconfig\n")
		e.run(t, d, "remote", "add", "origin", "https://elsewhere.invalid/team/repo.git")
		writeAt(t, d, "new.txt", "n\n")
	}},
	{name: "core.fsmonitor=true on Linux", setup: func(t testing.TB, e gitEnv, d string) {
		if runtime.GOOS != "linux" {
			t.Skip("git runs its fsmonitor daemon for core.fsmonitor=true outside Linux")
		}
		e.run(t, d, "config", "core.fsmonitor", "true")
		writeAt(t, d, "a.txt", "alpha, edited\n")
		writeAt(t, d, "new.txt", "n\n")
	}},
	{name: "key on the [core] line", setup: func(t testing.TB, e gitEnv, d string) {
		cfg := filepath.Join(d, ".git/config")
		data, err := os.ReadFile(cfg)
		mustDo(t, err)
		mustDo(t, os.WriteFile(cfg, []byte(strings.Replace(string(data), "[core]\n", "[core] fileMode = true\n", 1)), 0o644))
		chmod(t, d, "a.txt", 0o755)
	}},
	{name: "legacy [branch.main] header", setup: func(t testing.TB, e gitEnv, d string) {
		cfg := filepath.Join(d, ".git/config")
		data, err := os.ReadFile(cfg)
		mustDo(t, err)
		mustDo(t, os.WriteFile(cfg, append(data, "[branch.main]\n\tremote = origin\n\tmerge = refs/heads/main\n"...), 0o644))
		writeAt(t, d, "b.txt", "bravo, edited\n")
	}},
	{name: "modified skip-worktree file outside a sparse checkout", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "update-index", "--skip-worktree", "b.txt")
		writeAt(t, d, "b.txt", "bravo, local settings\n")
		writeAt(t, d, "a.txt", "alpha, edited\n")
	}},
	{name: "core.trustctime=false, ctime changed", setup: func(t testing.TB, e gitEnv, d string) {
		e.run(t, d, "config", "core.trustctime", "false")
		nextSecond()
		chmod(t, d, "a.txt", 0o600)
		chmod(t, d, "a.txt", 0o644)
		mustDo(t, os.Link(filepath.Join(d, "b.txt"), filepath.Join(d, "b.hardlink")))
		rmrf(t, d, "b.hardlink")
	}},
}

// crlfTextAttributes commits crlf.txt with CRLF line endings, touches it,
// and writes (outside the repository) an attributes file giving it the
// text attribute: git then reports it modified, because its blob is not
// normalised. It returns the attributes file's path.
func crlfTextAttributes(t testing.TB, e gitEnv, d string) string {
	t.Helper()
	writeAt(t, d, "crlf.txt", "one\r\ntwo\r\n")
	commitAll(t, e, d, "crlf")
	touch(t, d, "crlf.txt")
	writeAt(t, e["HOME"], "text.attributes", "crlf.txt text\n")
	return filepath.Join(e["HOME"], "text.attributes")
}

// knownGaps are states the route does not agree on yet; each must still
// disagree (a gap that closes fails the test until it is removed here).
var knownGaps = map[string]bool{}

// TestStatusAgreesWithGit is the differential table: for every state the
// route's entries (tracked changes, untracked and ignored paths) and its
// clean verdict must equal git's, or the route must refuse the state with
// its specific blocker.
func TestStatusAgreesWithGit(t *testing.T) {
	if len(scenarios) < 140 {
		t.Fatalf("the table has %d scenarios; it must keep at least 140", len(scenarios))
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			problems := checkScenario(t, sc)
			switch {
			case knownGaps[sc.name] && len(problems) == 0:
				t.Errorf("a known gap now agrees with git; remove %q from knownGaps", sc.name)
			case knownGaps[sc.name]:
				t.Skipf("known gap: %s", strings.Join(problems, "; "))
			default:
				for _, p := range problems {
					t.Error(p)
				}
			}
		})
	}
}

// checkScenario builds sc and lists how the route disagrees with git.
func checkScenario(t *testing.T, sc scenario) []string {
	e := newGitEnv(t)
	d := baseRepo(t, e, sc.init...)
	sc.setup(t, e, d)
	got, route, err := routeStatusLines(t, e, d)
	if sc.refuse != "" {
		var be *ctoharness.BlockerError
		if !errors.As(err, &be) || be.Blocker.Code != sc.refuse {
			return []string{fmt.Sprintf("route: %v (entries %q); want a refusal with %s", err, got, sc.refuse)}
		}
		return nil
	}
	if err != nil {
		return []string{fmt.Sprintf("route: %v", err)}
	}
	var problems []string
	p, perr := Prove(context.Background(), mustClassify(t, d), ProofOptions{RunID: "diff", Kind: KindBefore, Now: time.Now(), Getenv: e.get}, nil)
	if perr != nil {
		return []string{fmt.Sprintf("prove: %v", perr)}
	}
	dirty := slices.ContainsFunc(got, func(l string) bool { return !strings.HasPrefix(l, "!!") })
	if p.StatusClean == dirty || p.StatusRoute != route {
		problems = append(problems, fmt.Sprintf("proof says clean=%v route=%q; the route listed %q (route %q)", p.StatusClean, p.StatusRoute, got, route))
	}
	if route != RouteFast {
		problems = append(problems, fmt.Sprintf("status was computed by route %q, want %q", route, RouteFast))
	}
	if sc.reveal != nil {
		sc.reveal(t, e, d)
	}
	args := append([]string{"-c", "status.showUntrackedFiles=all"}, sc.gitArgs...)
	want := e.gitStatus(t, d, args...)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		problems = append(problems, fmt.Sprintf("status differs from git\nroute:\n  %s\ngit:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  ")))
	}
	return problems
}
