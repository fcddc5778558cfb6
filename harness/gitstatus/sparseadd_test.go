package gitstatus_test

import "testing"

// TestSparseIndexAddOutsideConeAgreesWithGit: in a sparse index, `git add
// --sparse` of a file outside the cone expands the directory it is in
// (siblings become skip-worktree entries, subdirectories sparse directory
// entries), and git names the added file, not its directory.
func TestSparseIndexAddOutsideConeAgreesWithGit(t *testing.T) {
	cases := []struct {
		name string
		add  func(t *testing.T, e gitEnv, dir string)
	}{
		{"new file in a sparse directory", func(t *testing.T, e gitEnv, dir string) {
			write(t, dir, "other/new.txt", "new\n", 0o644)
			e.run(t, dir, "add", "--sparse", "other/new.txt")
		}},
		{"new file in a nested sparse directory", func(t *testing.T, e gitEnv, dir string) {
			write(t, dir, "other/deep/new.txt", "new\n", 0o644)
			e.run(t, dir, "add", "--sparse", "other/deep/new.txt")
		}},
		{"changed file in a sparse directory", func(t *testing.T, e gitEnv, dir string) {
			write(t, dir, "other/x.txt", "x, changed\n", 0o644)
			e.run(t, dir, "add", "--sparse", "other/x.txt")
		}},
		{"new file in a new directory outside the cone", func(t *testing.T, e gitEnv, dir string) {
			write(t, dir, "fresh/new.txt", "new\n", 0o644)
			e.run(t, dir, "add", "--sparse", "fresh/new.txt")
		}},
		{"file removed from a sparse directory", func(t *testing.T, e gitEnv, dir string) {
			e.run(t, dir, "rm", "-q", "--sparse", "--cached", "other/x.txt")
		}},
		// Once any command reapplies the patterns, the added files leave
		// the worktree and their directories collapse into sparse
		// directory entries, which HEAD may not have at all.
		{"new directory outside the cone, collapsed again", func(t *testing.T, e gitEnv, dir string) {
			write(t, dir, "fresh/new.txt", "new\n", 0o644)
			write(t, dir, "fresh/deep/n.txt", "n\n", 0o644)
			write(t, dir, "other/n2.txt", "n2\n", 0o644)
			e.run(t, dir, "add", "--sparse", "fresh", "other/n2.txt")
			e.run(t, dir, "sparse-checkout", "reapply")
		}},
		{"new subdirectory of a cone parent, collapsed again", func(t *testing.T, e gitEnv, dir string) {
			e.run(t, dir, "sparse-checkout", "set", "dir", "other/keep")
			write(t, dir, "other/deep2/new.txt", "new\n", 0o644)
			e.run(t, dir, "add", "--sparse", "other/deep2/new.txt")
			e.run(t, dir, "sparse-checkout", "reapply")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newGitEnv(t)
			dir := committedRepo(t, e, map[string]string{
				"a.txt": "alpha\n", "dir/c.txt": "charlie\n",
				"other/x.txt": "x\n", "other/y.txt": "y\n", "other/deep/z.txt": "z\n",
				"other/keep/k.txt": "k\n",
			})
			e.run(t, dir, "sparse-checkout", "init", "--cone")
			e.run(t, dir, "sparse-checkout", "set", "dir")
			e.run(t, dir, "config", "index.sparse", "true")
			tc.add(t, e, dir)
			route, err := e.routeStatus(t, dir)
			agree(t, route, err, e.gitStatusV2(t, dir))
		})
	}
}
