package gitstatus_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFileReplacedByRepositoryAgreesWithGit: a tracked file replaced by a
// nested repository at its path is a type change when the repository's
// HEAD resolves (git reads the directory as a gitlink), and a deletion
// when it has no commit yet; porcelain v2 and v1 must both agree.
func TestFileReplacedByRepositoryAgreesWithGit(t *testing.T) {
	commitInside := func(t *testing.T, e gitEnv, dir string) {
		write(t, dir, "inner.txt", "i\n", 0o644)
		e.run(t, dir, "add", "-A")
		e.run(t, dir, "commit", "-q", "-m", "inner")
	}
	cases := []struct {
		name   string
		path   string // the tracked path replaced
		nested func(t *testing.T, e gitEnv, dir string)
	}{
		{"nested repository with a commit", "a.txt", func(t *testing.T, e gitEnv, dir string) {
			e.run(t, dir, "init", "-q", "-b", "main", "a.txt")
			commitInside(t, e, filepath.Join(dir, "a.txt"))
		}},
		{"nested repository with packed refs", "a.txt", func(t *testing.T, e gitEnv, dir string) {
			e.run(t, dir, "init", "-q", "-b", "main", "a.txt")
			commitInside(t, e, filepath.Join(dir, "a.txt"))
			e.run(t, filepath.Join(dir, "a.txt"), "pack-refs", "--all")
		}},
		{"nested repository with a detached HEAD", "a.txt", func(t *testing.T, e gitEnv, dir string) {
			e.run(t, dir, "init", "-q", "-b", "main", "a.txt")
			commitInside(t, e, filepath.Join(dir, "a.txt"))
			e.run(t, filepath.Join(dir, "a.txt"), "checkout", "-q", "--detach")
		}},
		{"nested repository without a commit", "a.txt", func(t *testing.T, e gitEnv, dir string) {
			e.run(t, dir, "init", "-q", "a.txt")
			write(t, dir, "a.txt/inner.txt", "i\n", 0o644)
		}},
		{"nested worktree with a gitfile", "a.txt", func(t *testing.T, e gitEnv, dir string) {
			other := filepath.Join(t.TempDir(), "other")
			e.run(t, "", "init", "-q", "-b", "main", "--separate-git-dir", other+".git", other)
			commitInside(t, e, other)
			must(t, os.Mkdir(filepath.Join(dir, "a.txt"), 0o755))
			write(t, dir, "a.txt/.git", "gitdir: "+other+".git\n", 0o644)
		}},
		{"symlink replaced by a nested repository", "link", func(t *testing.T, e gitEnv, dir string) {
			e.run(t, dir, "init", "-q", "-b", "main", "link")
			commitInside(t, e, filepath.Join(dir, "link"))
		}},
		{"intent-to-add file replaced by a nested repository", "ita.txt", func(t *testing.T, e gitEnv, dir string) {
			e.run(t, dir, "init", "-q", "-b", "main", "ita.txt")
			commitInside(t, e, filepath.Join(dir, "ita.txt"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newGitEnv(t)
			dir := committedRepo(t, e, map[string]string{"a.txt": "alpha\n", "b.txt": "bravo\n"})
			must(t, os.Symlink("b.txt", filepath.Join(dir, "link")))
			e.run(t, dir, "add", "link")
			e.run(t, dir, "commit", "-q", "-m", "link")
			write(t, dir, "ita.txt", "ita\n", 0o644)
			e.run(t, dir, "add", "-N", "ita.txt")
			must(t, os.Remove(filepath.Join(dir, tc.path)))
			tc.nested(t, e, dir)
			route, err := e.routeStatus(t, dir)
			agree(t, route, err, e.gitStatusV2(t, dir))
			agree(t, route, err, e.gitStatusV1(t, dir))
		})
	}
}
