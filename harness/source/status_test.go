package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

// fastStatus runs the fast status exactly as Prove does, failing the test
// if it fell back to go-git.
func fastStatus(t *testing.T, repo Repo) []ctoharness.StatusEntry {
	t.Helper()
	gs, err := readGit(repo)
	if err != nil {
		t.Fatal(err)
	}
	if gs.fallback != nil {
		t.Fatalf("fast status fell back: %v", gs.fallback)
	}
	manifest, err := walkManifest(context.Background(), repo.Root, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := gitstatus.Status(repo.Root, gs.idx, gs.staging, manifest)
	if err != nil {
		t.Fatalf("fast status: %v", err)
	}
	return st
}

func oracleStatus(t *testing.T, repo Repo) []ctoharness.StatusEntry {
	t.Helper()
	r, err := git.PlainOpen(repo.Root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := gitstatus.GoGitStatus(r)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFastStatusMatchesGoGit is a differential test: for each worktree
// state, the fast status must equal go-git's Worktree.Status exactly, and
// where the expected entries are spelled out, both must equal them.
func TestFastStatusMatchesGoGit(t *testing.T) {
	files := map[string]string{
		"a.txt":             "alpha\n",
		"a-b.txt":           "dash\n",
		"a.b":               "dot\n",
		"a/inner.txt":       "inner\n",
		"dir/b.txt":         "bravo\n",
		"dir/sub/c.txt":     "charlie\n",
		"dir/sub/deep/d.go": "package d\n",
		"tool.sh":           "#!/bin/sh\n",
		".gitignore":        "*.log\n/build/\n/only-root.txt\n",
		"dir/.gitignore":    "*.tmp\n!keep.log\n",
		"x":                 "file x\n",
	}
	tests := []struct {
		name   string
		mutate func(t *testing.T, repo Repo, r *git.Repository, head plumbing.Hash)
		want   []ctoharness.StatusEntry // nil: only compare with go-git
	}{
		{name: "clean", mutate: func(*testing.T, Repo, *git.Repository, plumbing.Hash) {}, want: []ctoharness.StatusEntry{}},
		{
			name: "modified, deleted, untracked",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository, _ plumbing.Hash) {
				writeFile(t, filepath.Join(repo.Root, "dir/sub/c.txt"), "charlie changed\n")
				rm(t, filepath.Join(repo.Root, "a-b.txt"))
				writeFile(t, filepath.Join(repo.Root, "new/deeper/n.txt"), "n\n")
				writeFile(t, filepath.Join(repo.Root, "a/zz.txt"), "z\n")
			},
			want: []ctoharness.StatusEntry{
				{Path: "a-b.txt", Staging: " ", Worktree: "D"},
				{Path: "a/zz.txt", Staging: "?", Worktree: "?"},
				{Path: "dir/sub/c.txt", Staging: " ", Worktree: "M"},
				{Path: "new/deeper/n.txt", Staging: "?", Worktree: "?"},
			},
		},
		{
			name: "same size rewrite with the old mtime",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository, _ plumbing.Hash) {
				p := filepath.Join(repo.Root, "a.txt")
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, p, "ALPHA\n")
				if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:   "racy: same size and mtime, index not newer than the file",
			mutate: func(t *testing.T, repo Repo, r *git.Repository, _ plumbing.Hash) { forgeStat(t, repo, r, 0) },
			want:   []ctoharness.StatusEntry{{Path: "a.txt", Staging: " ", Worktree: "M"}},
		},
		{
			name:   "same size and mtime, index newer: metadata is trusted",
			mutate: func(t *testing.T, repo Repo, r *git.Repository, _ plumbing.Hash) { forgeStat(t, repo, r, time.Second) },
			want:   []ctoharness.StatusEntry{},
		},
		{
			name: "ignore rules",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository, _ plumbing.Hash) {
				for _, p := range []string{
					"debug.log", "dir/x.log", "dir/keep.log", "dir/sub/y.tmp", "build/out.o", "sub/build/out.o",
					"only-root.txt", "dir/only-root.txt", "excluded.dat", "ignored-dir/.gitignore", "ignored-dir/z.log",
				} {
					writeFile(t, filepath.Join(repo.Root, p), "x\n")
				}
				writeFile(t, filepath.Join(repo.Root, ".git/info/exclude"), "*.dat\n")
				writeFile(t, filepath.Join(repo.Root, ".gitignore"), "*.log\n/build/\n/only-root.txt\nignored-dir/\n")
			},
		},
		{
			name: "ignored directory holding a negating .gitignore",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository, _ plumbing.Hash) {
				writeFile(t, filepath.Join(repo.Root, "build/.gitignore"), "!*.o\n")
				writeFile(t, filepath.Join(repo.Root, "build/out.o"), "o\n")
				writeFile(t, filepath.Join(repo.Root, "lib/build/.gitignore"), "!*.o\n")
				writeFile(t, filepath.Join(repo.Root, "lib/build/out.o"), "o\n")
			},
		},
		{
			name: "staged add, modify, delete and mixed",
			mutate: func(t *testing.T, repo Repo, r *git.Repository, _ plumbing.Hash) {
				w := worktree(t, r)
				writeFile(t, filepath.Join(repo.Root, "staged-new.txt"), "s\n")
				writeFile(t, filepath.Join(repo.Root, "dir/sub/deep/d.go"), "package d // changed\n")
				writeFile(t, filepath.Join(repo.Root, "a/inner.txt"), "staged inner\n")
				writeFile(t, filepath.Join(repo.Root, "added-then-gone.txt"), "g\n")
				for _, p := range []string{"staged-new.txt", "dir/sub/deep/d.go", "a/inner.txt", "added-then-gone.txt"} {
					if _, err := w.Add(p); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := w.Remove("x"); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(repo.Root, "a/inner.txt"), "staged inner, then edited again\n")
				rm(t, filepath.Join(repo.Root, "added-then-gone.txt"))
			},
			want: []ctoharness.StatusEntry{
				{Path: "a/inner.txt", Staging: "M", Worktree: "M"},
				{Path: "added-then-gone.txt", Staging: "A", Worktree: "D"},
				{Path: "dir/sub/deep/d.go", Staging: "M", Worktree: " "},
				{Path: "staged-new.txt", Staging: "A", Worktree: " "},
				{Path: "x", Staging: "D", Worktree: " "},
			},
		},
		{
			name: "removed from the index only",
			mutate: func(t *testing.T, repo Repo, r *git.Repository, _ plumbing.Hash) {
				idx, err := r.Storer.Index()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := idx.Remove("dir/b.txt"); err != nil {
					t.Fatal(err)
				}
				if err := r.Storer.SetIndex(idx); err != nil {
					t.Fatal(err)
				}
			},
			want: []ctoharness.StatusEntry{{Path: "dir/b.txt", Staging: "?", Worktree: "?"}},
		},
		{
			name: "executable bit",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository, _ plumbing.Hash) {
				if err := os.Chmod(filepath.Join(repo.Root, "tool.sh"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want: []ctoharness.StatusEntry{{Path: "tool.sh", Staging: " ", Worktree: "M"}},
		},
		{
			name: "symlinks",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository, _ plumbing.Hash) {
				symlink(t, "a.txt", filepath.Join(repo.Root, "link-new"))
				symlink(t, "dir", filepath.Join(repo.Root, "dirlink"))
			},
		},
		{
			name: "file becomes a directory and a directory becomes a file",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository, _ plumbing.Hash) {
				rm(t, filepath.Join(repo.Root, "x"))
				writeFile(t, filepath.Join(repo.Root, "x/inside.txt"), "i\n")
				if err := os.RemoveAll(filepath.Join(repo.Root, "a")); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(repo.Root, "a"), "now a file\n")
			},
		},
		{
			name: "nested repository, empty directory and a fifo",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository, _ plumbing.Hash) {
				initRepo(t, filepath.Join(repo.Root, "nested"), map[string]string{"n.txt": "n\n"})
				mkdir(t, filepath.Join(repo.Root, "empty/also-empty"))
				if err := syscall.Mkfifo(filepath.Join(repo.Root, "pipe"), 0o600); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(repo.Root, "dir/.git"), "gitdir: nowhere\n")
			},
		},
		{
			name: "HEAD moved back one commit",
			mutate: func(t *testing.T, repo Repo, r *git.Repository, head plumbing.Hash) {
				c, err := r.CommitObject(head)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(repo.GitDir, "refs/heads/main"), c.ParentHashes[0].String()+"\n")
			},
			want: []ctoharness.StatusEntry{
				{Path: "dir/sub/deep/d.go", Staging: "M", Worktree: " "},
				{Path: "later.txt", Staging: "A", Worktree: " "},
				{Path: "x", Staging: "A", Worktree: " "},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			repo, r, _ := classified(t, files)
			if err := os.Chmod(filepath.Join(repo.Root, "tool.sh"), 0o644); err != nil {
				t.Fatal(err)
			}
			// A second commit that changes a deep file, adds one and turns
			// "x" from absent to present, so moving HEAD back exercises
			// the tree descent.
			rm(t, filepath.Join(repo.Root, "x"))
			commitFiles(t, r, repo.Root, nil, "drop x")
			head := commitFiles(t, r, repo.Root, map[string]string{"x": "file x\n", "later.txt": "l\n", "dir/sub/deep/d.go": "package d // v2\n"}, "second")
			// Let file mtimes fall clearly before the index mtime so the
			// racy-git rule does not decide the outcome.
			time.Sleep(20 * time.Millisecond)

			tc.mutate(t, repo, r, head)
			got := fastStatus(t, repo)
			oracle := oracleStatus(t, repo)
			if !slices.Equal(got, oracle) {
				t.Fatalf("fast status differs from go-git:\nfast:   %v\ngo-git: %v", got, oracle)
			}
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Fatalf("status = %v, want %v", got, tc.want)
			}
		})
	}
}

// forgeStat rewrites a.txt with different content of the same size and
// makes the index record its size and mtime with the old hash, then sets
// the index file's mtime to the file's mtime plus indexLead. With no lead
// the entry is racy and must be hashed; with a lead the metadata is
// trusted, as git and go-git do.
func forgeStat(t *testing.T, repo Repo, r *git.Repository, indexLead time.Duration) {
	t.Helper()
	p := filepath.Join(repo.Root, "a.txt")
	writeFile(t, p, "ALPHA\n")
	when := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, when, when); err != nil {
		t.Fatal(err)
	}
	idx, err := r.Storer.Index()
	if err != nil {
		t.Fatal(err)
	}
	e, err := idx.Entry("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	e.ModifiedAt = when
	e.Size = 6
	if err := r.Storer.SetIndex(idx); err != nil {
		t.Fatal(err)
	}
	at := when.Add(indexLead)
	if err := os.Chtimes(filepath.Join(repo.GitDir, "index"), at, at); err != nil {
		t.Fatal(err)
	}
}

func worktree(t *testing.T, r *git.Repository) *git.Worktree {
	t.Helper()
	w, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func rm(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// TestFastStatusFallsBack checks that repositories the fast status does not
// model are handed to go-git, and that Prove then still reports go-git's
// status.
func TestFastStatusFallsBack(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, repo Repo, r *git.Repository)
	}{
		{
			name: "submodule entry in the index",
			mutate: func(t *testing.T, repo Repo, r *git.Repository) {
				idx, err := r.Storer.Index()
				if err != nil {
					t.Fatal(err)
				}
				e := idx.Add("sub")
				e.Mode = filemode.Submodule
				e.Hash = plumbing.NewHash("1111111111111111111111111111111111111111")
				sortIndex(idx)
				if err := r.Storer.SetIndex(idx); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: ".gitmodules present",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository) {
				writeFile(t, filepath.Join(repo.Root, ".gitmodules"), "")
			},
		},
		{
			name: "no index",
			mutate: func(t *testing.T, repo Repo, _ *git.Repository) {
				rm(t, filepath.Join(repo.GitDir, "index"))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			repo, r, _ := classified(t, map[string]string{"a.txt": "a\n", "b/c.txt": "c\n"})
			writeFile(t, filepath.Join(repo.Root, "a.txt"), "changed\n")
			tc.mutate(t, repo, r)

			gs, err := readGit(repo)
			if err != nil {
				t.Fatal(err)
			}
			fellBack := gs.fallback != nil
			if !fellBack {
				manifest, err := walkManifest(context.Background(), repo.Root, false)
				if err != nil {
					t.Fatal(err)
				}
				_, err = gitstatus.Status(repo.Root, gs.idx, gs.staging, manifest)
				fellBack = errors.Is(err, gitstatus.ErrFallback)
			}
			if !fellBack {
				t.Fatal("fast status did not step aside")
			}
			p := prove(t, repo, KindBefore, false)
			if want := oracleStatus(t, repo); !slices.Equal(p.Status, want) {
				t.Fatalf("proof status %v, go-git %v", p.Status, want)
			}
			if p.StatusClean {
				t.Fatal("modified repository reported clean")
			}
		})
	}
}

func sortIndex(idx *index.Index) {
	slices.SortFunc(idx.Entries, func(a, b *index.Entry) int { return strings.Compare(a.Name, b.Name) })
}
