package source

import (
	"bytes"
	"context"
	"crypto/sha1"
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
	st, err := worktreeStatus(repo.Root, gs.idx, gs.staging, manifest)
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
	st, err := goGitStatus(r)
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
				_, err = worktreeStatus(repo.Root, gs.idx, gs.staging, manifest)
				fellBack = errors.Is(err, errFallback)
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

// TestParseIndexMatchesGoGit decodes the same index, written by go-git in
// versions 2, 3 and 4, with parseIndex and with go-git's decoder.
func TestParseIndexMatchesGoGit(t *testing.T) {
	long := strings.Repeat("d/", 2100) + "long-name.txt" // > 0xfff bytes
	names := []string{"a", "a-b", "a.b", "a/b", "a/b/c", "b", long, "z/y/x/w"}
	slices.Sort(names)
	for _, version := range []uint32{2, 3, 4} {
		idx := &index.Index{Version: version}
		for i, n := range names {
			e := idx.Add(n)
			e.Mode = filemode.Regular
			if i%3 == 1 {
				e.Mode = filemode.Executable
			}
			if i%3 == 2 {
				e.Mode = filemode.Symlink
			}
			e.Size = uint32(100 + i)
			e.ModifiedAt = time.Unix(1700000000+int64(i), int64(i*1000))
			e.Hash = plumbing.ComputeHash(plumbing.BlobObject, []byte(n))
		}
		var buf bytes.Buffer
		if err := index.NewEncoder(&buf).Encode(idx); err != nil {
			t.Fatal(err)
		}
		got, err := parseIndex(buf.Bytes())
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		var dec index.Index
		if err := index.NewDecoder(bytes.NewReader(buf.Bytes())).Decode(&dec); err != nil {
			t.Fatalf("v%d: go-git decode: %v", version, err)
		}
		if len(got) != len(dec.Entries) {
			t.Fatalf("v%d: %d entries, go-git %d", version, len(got), len(dec.Entries))
		}
		for i, e := range dec.Entries {
			g := got[i]
			if g.name != e.Name || g.mode != e.Mode || g.size != e.Size || g.hash != e.Hash || g.mtime != e.ModifiedAt.UnixNano() || !g.hasMod {
				t.Errorf("v%d entry %d: got %+v, go-git %+v", version, i, g, e)
			}
		}
	}
}

func TestParseIndexRefusesWhatItDoesNotModel(t *testing.T) {
	build := func(mutate func(idx *index.Index)) []byte {
		idx := &index.Index{Version: 3}
		for _, n := range []string{"a", "b"} {
			e := idx.Add(n)
			e.Mode = filemode.Regular
		}
		mutate(idx)
		var buf bytes.Buffer
		if err := index.NewEncoder(&buf).Encode(idx); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	tests := map[string][]byte{
		"unmerged":       build(func(idx *index.Index) { idx.Entries[0].Stage = index.OurMode }),
		"skip-worktree":  build(func(idx *index.Index) { idx.Entries[0].SkipWorktree = true }),
		"intent-to-add":  build(func(idx *index.Index) { idx.Entries[1].IntentToAdd = true }),
		"submodule":      build(func(idx *index.Index) { idx.Entries[1].Mode = filemode.Submodule }),
		"out of order":   rawIndex("b", "a"),
		"duplicate":      rawIndex("a", "a"),
		"bad checksum":   corrupt(build(func(*index.Index) {})),
		"not an index":   []byte("this is not an index file at all, honestly"),
		"split index":    withExtension(t, build(func(*index.Index) {}), "link"),
		"sparse (sdir)":  withExtension(t, build(func(*index.Index) {}), "sdir"),
		"version 5":      version5(build(func(*index.Index) {})),
		"truncated data": build(func(*index.Index) {})[:30],
	}
	for name, data := range tests {
		if _, err := parseIndex(data); !errors.Is(err, errFallback) {
			t.Errorf("%s: err = %v, want errFallback", name, err)
		}
	}
	// The hand-written index is valid when in order, so the refusals above
	// are about order, not about the writer.
	if got, err := parseIndex(rawIndex("a", "b/c")); err != nil || len(got) != 2 || got[1].name != "b/c" || got[1].mode != filemode.Regular {
		t.Errorf("rawIndex in order: %+v, %v", got, err)
	}
	// An optional (uppercase) extension is skipped.
	if _, err := parseIndex(withExtension(t, build(func(*index.Index) {}), "TREE")); err != nil {
		t.Errorf("TREE extension: %v", err)
	}
}

// rawIndex writes a version 2 index by hand with names in the given order
// (go-git's encoder would sort them).
func rawIndex(names ...string) []byte {
	body := []byte{'D', 'I', 'R', 'C', 0, 0, 0, 2, 0, 0, 0, byte(len(names))}
	for _, n := range names {
		e := make([]byte, 62)
		e[26], e[27] = 0x81, 0xa4 // mode 0100644
		e[60], e[61] = 0, byte(len(n))
		e = append(e, n...)
		e = append(e, make([]byte, 8-(len(e)%8))...)
		body = append(body, e...)
	}
	return resum(body)
}

func corrupt(b []byte) []byte {
	b[len(b)-1] ^= 0xff
	return b
}

func version5(b []byte) []byte {
	b[7] = 5
	return resum(b[:len(b)-20])
}

// withExtension inserts an extension record before the checksum.
func withExtension(t *testing.T, b []byte, sig string) []byte {
	t.Helper()
	body := append([]byte(nil), b[:len(b)-20]...)
	body = append(body, sig...)
	body = append(body, 0, 0, 0, 4, 1, 2, 3, 4)
	return resum(body)
}

func resum(body []byte) []byte {
	sum := sha1.Sum(body)
	return append(append([]byte(nil), body...), sum[:]...)
}

// FuzzParseIndex checks that no input makes the index parser panic or
// return entries out of order: anything it cannot read must be errFallback.
func FuzzParseIndex(f *testing.F) {
	for _, version := range []uint32{2, 3, 4} {
		idx := &index.Index{Version: version}
		for _, n := range []string{"a", "b/c", "b/d", "e"} {
			e := idx.Add(n)
			e.Mode = filemode.Regular
			e.ModifiedAt = time.Unix(1700000000, 5)
		}
		var buf bytes.Buffer
		if err := index.NewEncoder(&buf).Encode(idx); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add(rawIndex("a", "b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Re-sum so mutations reach the entry parser instead of failing the
		// checksum.
		if len(data) >= 20 {
			data = resum(data[:len(data)-20])
		}
		entries, err := parseIndex(data)
		if err != nil {
			if !errors.Is(err, errFallback) {
				t.Fatalf("error %v is not errFallback", err)
			}
			return
		}
		for i := 1; i < len(entries); i++ {
			if entries[i-1].name >= entries[i].name {
				t.Fatalf("entries out of order: %q, %q", entries[i-1].name, entries[i].name)
			}
		}
	})
}
