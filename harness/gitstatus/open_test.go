package gitstatus

import (
	"os"
	"path/filepath"
	"testing"
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
