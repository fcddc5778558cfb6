package gitstatus_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/source"
)

// gitCLI runs git in a scratch repository with user and system
// configuration ignored.
func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@invalid")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

func write(t *testing.T, root, rel, content string, perm os.FileMode) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// lsTree lists a tree's leaves as index-ordered entries.
func lsTree(t *testing.T, dir, tree string) []gitstatus.Entry {
	t.Helper()
	var out []gitstatus.Entry
	for _, rec := range strings.Split(gitCLI(t, dir, "ls-tree", "-r", "-z", "--full-tree", tree), "\x00") {
		if rec == "" {
			continue
		}
		meta, name, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		mode, _ := strconv.ParseUint(f[0], 8, 32)
		out = append(out, gitstatus.Entry{Name: name, Mode: filemode.FileMode(mode), Hash: plumbing.NewHash(f[2])})
	}
	return out
}

// diffTree is what git itself says changed between two trees.
func diffTree(t *testing.T, dir, from, to string) []gitstatus.Change {
	t.Helper()
	out := []gitstatus.Change{}
	recs := strings.Split(gitCLI(t, dir, "diff-tree", "-r", "-z", "--no-renames", from, to), "\x00")
	for i := 0; i+1 < len(recs); i += 2 {
		f := strings.Fields(strings.TrimPrefix(recs[i], ":"))
		c := gitstatus.Change{Path: recs[i+1]}
		blob := func(mode, hash string) *gitstatus.Blob {
			m, _ := strconv.ParseUint(mode, 8, 32)
			if m == 0 {
				return nil
			}
			return &gitstatus.Blob{Mode: filemode.FileMode(m), Hash: plumbing.NewHash(hash)}
		}
		c.From, c.To = blob(f[0], f[2]), blob(f[1], f[3])
		out = append(out, c)
	}
	return out
}

func sameChanges(a, b []gitstatus.Change) bool {
	return slices.EqualFunc(a, b, func(x, y gitstatus.Change) bool {
		eq := func(p, q *gitstatus.Blob) bool { return (p == nil) == (q == nil) && (p == nil || *p == *q) }
		return x.Path == y.Path && eq(x.From, y.From) && eq(x.To, y.To)
	})
}

func describe(cs []gitstatus.Change) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Path)
		for _, s := range []*gitstatus.Blob{c.From, c.To} {
			if s == nil {
				b.WriteString(" -")
			} else {
				b.WriteString(" " + strconv.FormatUint(uint64(s.Mode), 8) + ":" + s.Hash.String()[:7])
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestChangesMatchesGitAddAll is a differential test: for each worktree
// state, Changes (with the index as stat cache, and again with no index
// at all) must list exactly what `git add -A` and `git write-tree` change
// relative to HEAD's tree.
func TestChangesMatchesGitAddAll(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(t *testing.T, root string)
		noIndex bool // the scenario depends on the index (skip the no-index run)
		want    int  // number of changes
	}{
		{name: "clean", mutate: func(*testing.T, string) {}},
		{name: "edits everywhere", want: 9, mutate: func(t *testing.T, root string) {
			write(t, root, "dir/sub/c.txt", "charlie, changed\n", 0o644)
			must(t, os.Remove(filepath.Join(root, "a-b.txt")))
			write(t, root, "new/deeper/n.txt", "n\n", 0o644)
			write(t, root, "debug.log", "ignored\n", 0o644)
			write(t, root, "build/out.o", "ignored\n", 0o644)
			must(t, os.Chmod(filepath.Join(root, "tool.sh"), 0o755))
			must(t, os.Symlink("a.txt", filepath.Join(root, "link-new")))
			must(t, os.Remove(filepath.Join(root, "link")))
			must(t, os.Symlink("dir/b.txt", filepath.Join(root, "link")))
			must(t, os.Remove(filepath.Join(root, "only/one.txt"))) // the last file of only/
			write(t, root, "empty.txt", "", 0o644)
			write(t, root, "dir/sub/deep/d.go", "package d // v2\n", 0o644)
		}},
		{name: "file becomes directory and directory becomes file", want: 4, mutate: func(t *testing.T, root string) {
			must(t, os.Remove(filepath.Join(root, "x")))
			write(t, root, "x/inside.txt", "i\n", 0o644)
			must(t, os.RemoveAll(filepath.Join(root, "a")))
			write(t, root, "a", "now a file\n", 0o644)
		}},
		{name: "file becomes symlink", want: 1, mutate: func(t *testing.T, root string) {
			must(t, os.Remove(filepath.Join(root, "a.txt")))
			must(t, os.Symlink("x", filepath.Join(root, "a.txt")))
		}},
		{name: "touched but unchanged", mutate: func(t *testing.T, root string) {
			future := time.Now().Add(time.Hour)
			must(t, os.Chtimes(filepath.Join(root, "a.txt"), future, future))
			write(t, root, "dir/b.txt", "bravo\n", 0o644)
		}},
		{name: "same-size rewrite with the mtime restored", want: 1, mutate: func(t *testing.T, root string) {
			p := filepath.Join(root, "a.txt")
			fi, err := os.Lstat(p)
			must(t, err)
			must(t, os.WriteFile(p, []byte("ALPHA\n"), 0o644))
			must(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
		}},
		{name: "staged then reverted", noIndex: true, mutate: func(t *testing.T, root string) {
			write(t, root, "a.txt", "staged\n", 0o644)
			gitCLI(t, root, "add", "a.txt")
			write(t, root, "a.txt", "alpha\n", 0o644)
		}},
		{name: "staged new file, then edited", want: 1, noIndex: true, mutate: func(t *testing.T, root string) {
			write(t, root, "staged.txt", "one\n", 0o644)
			gitCLI(t, root, "add", "staged.txt")
			write(t, root, "staged.txt", "two\n", 0o644)
		}},
		{name: "ignored file force-added", want: 1, noIndex: true, mutate: func(t *testing.T, root string) {
			write(t, root, "forced.log", "kept\n", 0o644)
			gitCLI(t, root, "add", "-f", "forced.log")
		}},
		{name: "tracked file matching an ignore pattern is edited", want: 1, mutate: func(t *testing.T, root string) {
			write(t, root, "tracked.log", "tracked, edited\n", 0o644)
		}},
		{name: "removed from the index only", noIndex: true, mutate: func(t *testing.T, root string) {
			gitCLI(t, root, "rm", "-q", "--cached", "dir/b.txt")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			gitCLI(t, root, "init", "-q", "-b", "main")
			for p, c := range map[string]string{
				"a.txt": "alpha\n", "a-b.txt": "dash\n", "a/inner.txt": "inner\n", "dir/b.txt": "bravo\n",
				"dir/sub/c.txt": "charlie\n", "dir/sub/deep/d.go": "package d\n", "tool.sh": "#!/bin/sh\n",
				"x": "file x\n", "only/one.txt": "one\n", ".gitignore": "*.log\nbuild/\n",
			} {
				write(t, root, p, c, 0o644)
			}
			must(t, os.Symlink("a.txt", filepath.Join(root, "link")))
			write(t, root, "tracked.log", "tracked\n", 0o644)
			gitCLI(t, root, "add", "-A")
			gitCLI(t, root, "add", "-f", "tracked.log")
			gitCLI(t, root, "commit", "-q", "-m", "base")
			head := strings.TrimSpace(gitCLI(t, root, "rev-parse", "HEAD^{tree}"))
			time.Sleep(10 * time.Millisecond) // let the index be older than the edits below

			tc.mutate(t, root)
			base := lsTree(t, root, head)
			idx, err := gitstatus.ReadIndex(filepath.Join(root, ".git"))
			if err != nil {
				t.Fatal(err)
			}
			files, err := source.Manifest(context.Background(), root)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gitstatus.Changes(root, base, idx, files)
			if err != nil {
				t.Fatal(err)
			}
			var noIdx []gitstatus.Change
			if !tc.noIndex {
				if noIdx, err = gitstatus.Changes(root, base, &gitstatus.Index{}, files); err != nil {
					t.Fatal(err)
				}
			}

			gitCLI(t, root, "add", "-A")
			want := diffTree(t, root, head, strings.TrimSpace(gitCLI(t, root, "write-tree")))
			if tc.name == "removed from the index only" {
				// git add -A re-adds it: still tracked, unchanged.
				if len(want) != 0 {
					t.Fatalf("git changed %s", describe(want))
				}
			}
			if len(want) != tc.want {
				t.Errorf("git sees %d changes, the test expects %d:\n%s", len(want), tc.want, describe(want))
			}
			if !sameChanges(got, want) {
				t.Errorf("Changes:\n%s\ngit add -A:\n%s", describe(got), describe(want))
			}
			if !tc.noIndex && !sameChanges(noIdx, want) {
				t.Errorf("Changes without an index:\n%s\ngit add -A:\n%s", describe(noIdx), describe(want))
			}
		})
	}
}

// TestChangesKeepsIgnoredBaselineFile pins the one deliberate difference
// from git add -A: a file of the baseline that Case removed from the index
// but left in the worktree unchanged is not a deletion, even when an ignore
// pattern matches it.
func TestChangesKeepsIgnoredBaselineFile(t *testing.T) {
	root := t.TempDir()
	gitCLI(t, root, "init", "-q", "-b", "main")
	write(t, root, ".gitignore", "*.log\n", 0o644)
	write(t, root, "kept.log", "tracked although ignored\n", 0o644)
	gitCLI(t, root, "add", "-A")
	gitCLI(t, root, "add", "-f", "kept.log")
	gitCLI(t, root, "commit", "-q", "-m", "base")
	gitCLI(t, root, "rm", "-q", "--cached", "kept.log")
	base := lsTree(t, root, "HEAD")
	idx, err := gitstatus.ReadIndex(filepath.Join(root, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := source.Manifest(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gitstatus.Changes(root, base, idx, files)
	if err != nil || len(got) != 0 {
		t.Fatalf("Changes = %s, %v; want none", describe(got), err)
	}
}

// TestChangesRefusesSpecialFiles: a tracked path that became something git
// cannot store is an error, not a silent skip.
func TestChangesRefusesSpecialFiles(t *testing.T) {
	root := t.TempDir()
	gitCLI(t, root, "init", "-q", "-b", "main")
	write(t, root, "p", "file\n", 0o644)
	gitCLI(t, root, "add", "-A")
	gitCLI(t, root, "commit", "-q", "-m", "base")
	must(t, os.Remove(filepath.Join(root, "p")))
	if err := syscall.Mkfifo(filepath.Join(root, "p"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	files, err := source.Manifest(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitstatus.Changes(root, lsTree(t, root, "HEAD"), &gitstatus.Index{}, files); err == nil || !strings.Contains(err.Error(), "git cannot store") {
		t.Fatalf("err = %v", err)
	}
}

// TestTreeHashMatchesWriteTree: hashing the index as trees gives what git
// write-tree writes, nested directories, exec bits and symlinks included.
func TestTreeHashMatchesWriteTree(t *testing.T) {
	root := t.TempDir()
	gitCLI(t, root, "init", "-q", "-b", "main")
	// "a" is a directory and a name prefix of files: git's tree order case.
	for p, c := range map[string]string{"a.b": "dot\n", "a-b": "dash\n", "a/b/c": "deep\n", "a0": "zero\n", "z/y.txt": "y\n"} {
		write(t, root, p, c, 0o644)
	}
	write(t, root, "run.sh", "#!/bin/sh\n", 0o755)
	must(t, os.Symlink("a.b", filepath.Join(root, "lnk")))
	gitCLI(t, root, "add", "-A")
	want := strings.TrimSpace(gitCLI(t, root, "write-tree"))
	idx, err := gitstatus.ReadIndex(filepath.Join(root, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	if got := gitstatus.TreeHash(idx.Entries).String(); got != want {
		t.Fatalf("TreeHash = %s, git write-tree = %s", got, want)
	}
	if got, err := gitstatus.IndexTreeHash(filepath.Join(root, ".git")); err != nil || got.String() != want {
		t.Fatalf("IndexTreeHash = %s, %v; git write-tree = %s", got, err, want)
	}
	// What ReadIndex refuses, the hash as read refuses too.
	write(t, root, "new.txt", "new\n", 0o644)
	gitCLI(t, root, "add", "-N", "new.txt")
	if _, err := gitstatus.IndexTreeHash(filepath.Join(root, ".git")); !errors.Is(err, gitstatus.ErrFallback) {
		t.Fatalf("IndexTreeHash of an index with an intent-to-add entry: %v, want ErrFallback", err)
	}
	if got := gitstatus.TreeHash(nil).String(); got != "4b825dc642cb6eb9a060e54bf8d69288fbee4904" {
		t.Fatalf("TreeHash of no entries = %s, want git's empty tree", got)
	}
}
