package validators

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTreeDigestSeesEveryWrite(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, ".git", "info"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a"), []byte("a\n"), 0o644))
	base, err := treeDigest(dir)
	must(err)
	same := func(want bool, what string) {
		t.Helper()
		got, err := treeDigest(dir)
		must(err)
		if (got == base) != want {
			t.Errorf("%s: digest unchanged=%v, want %v", what, got == base, want)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "a"), []byte("a\n"), 0o644))
	same(true, "rewriting the same bytes")
	must(os.WriteFile(filepath.Join(dir, ".git", "hook-ran"), nil, 0o644))
	same(false, "a new empty file under .git")
	must(os.Remove(filepath.Join(dir, ".git", "hook-ran")))
	same(true, "the file removed again")
	must(os.Chmod(filepath.Join(dir, "a"), 0o600))
	same(false, "a mode change")
	must(os.Chmod(filepath.Join(dir, "a"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "a"), []byte("b\n"), 0o644))
	same(false, "new content of the same size")
}
