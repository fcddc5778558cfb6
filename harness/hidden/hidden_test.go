package hidden_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/hidden"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		f := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadDigestAndArchive(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"tests/a_test.go": "package a\n", "check.sh": "exit 1\n"})
	if err := os.Chmod(filepath.Join(dir, "check.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := hidden.Read(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 2 || s.Files[0].Path != "check.sh" || !s.Files[0].Exec || s.Files[1].Path != "tests/a_test.go" || s.Bytes != 17 {
		t.Fatalf("set %+v", s)
	}
	again, _ := hidden.Read(context.Background(), dir)
	if again.Digest != s.Digest || len(s.Digest) != 64 {
		t.Errorf("digest %q then %q", s.Digest, again.Digest)
	}
	var b bytes.Buffer
	if err := hidden.WriteArchive(&b, s); err != nil {
		t.Fatal(err)
	}
	back, err := hidden.ReadArchive(&b)
	if err != nil || back.Digest != s.Digest {
		t.Fatalf("the archive digests to %q (%v), the directory to %q", back.Digest, err, s.Digest)
	}
	// One byte changed, or the mode: another digest.
	write(t, dir, map[string]string{"check.sh": "exit 0\n"})
	if c, _ := hidden.Read(context.Background(), dir); c.Digest == s.Digest {
		t.Error("a changed file keeps the digest")
	}
}

func TestReadRefuses(t *testing.T) {
	for name, mk := range map[string]func(dir string) error{
		"a symlink": func(dir string) error { return os.Symlink("/etc/passwd", filepath.Join(dir, "x")) },
		"a fifo":    func(dir string) error { return mkfifo(filepath.Join(dir, "x")) },
		".git":      func(dir string) error { return os.MkdirAll(filepath.Join(dir, "sub", ".GIT", "hooks"), 0o755) },
		"nothing":   func(dir string) error { return nil },
	} {
		dir := t.TempDir()
		if name == ".git" {
			write(t, dir, map[string]string{"sub/.GIT/hooks/pre-commit": "x"})
		}
		if err := mk(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := hidden.Read(context.Background(), dir); !errors.Is(err, hidden.ErrHidden) {
			t.Errorf("%s: %v, want ErrHidden", name, err)
		}
	}
	if _, err := hidden.Read(context.Background(), "relative/dir"); !errors.Is(err, hidden.ErrHidden) {
		t.Errorf("a relative path: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := hidden.Read(context.Background(), link); err == nil || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("a link to a directory: %v", err)
	}
}

// Laying never follows what Case's result holds: a link where a directory
// of the hidden tree is, or where a hidden file goes, is replaced, and
// nothing is written where it pointed.
func TestLayReplacesWithoutFollowing(t *testing.T) {
	dir, checkout, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, dir, map[string]string{"tests/a_test.go": "hidden a\n", "check.sh": "hidden check\n", "deep/x/y.txt": "y\n"})
	write(t, checkout, map[string]string{"check.sh": "exit 0 # Case's\n", "keep.txt": "kept\n"})
	if err := os.Symlink(outside, filepath.Join(checkout, "tests")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, "deep"), []byte("a file where a directory goes"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := hidden.Read(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	over, err := hidden.Lay(context.Background(), s, checkout)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(over, ",") != "check.sh" {
		t.Errorf("overridden %v, want [check.sh]", over)
	}
	for p, want := range map[string]string{"check.sh": "hidden check\n", "tests/a_test.go": "hidden a\n", "deep/x/y.txt": "y\n", "keep.txt": "kept\n"} {
		got, err := os.ReadFile(filepath.Join(checkout, p))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q (%v), want %q", p, got, err, want)
		}
	}
	if st, err := os.Lstat(filepath.Join(checkout, "tests")); err != nil || !st.IsDir() {
		t.Errorf("tests is not a directory after laying: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("a hidden file was written through Case's link: %v", ents)
	}
}

// A layout's directories are made empty in the checkout: Case's files
// there are removed unread, a link on the way is replaced (what it pointed
// to is untouched), and a kept report stays for the results step.
func TestMakeDirs(t *testing.T) {
	checkout, outside := t.TempDir(), t.TempDir()
	for p, data := range map[string]string{"outside/keep": "x", "c/.cto-harness/tests/conftest.py": "planted", "c/.cto-harness/logs/reward.txt": "1", "c/.cto-harness/logs/extra": "e"} {
		root := checkout
		if strings.HasPrefix(p, "outside/") {
			root, p = outside, strings.TrimPrefix(p, "outside/")
		} else {
			p = strings.TrimPrefix(p, "c/")
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(checkout, "linked")); err != nil {
		t.Fatal(err)
	}
	removed, err := hidden.MakeDirs(context.Background(), checkout, []string{".cto-harness/tests", ".cto-harness/logs", "linked/sub"}, []string{".cto-harness/logs/reward.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(removed, " "); got != ".cto-harness/tests/conftest.py .cto-harness/logs/extra" {
		t.Errorf("removed %q", got)
	}
	if _, err := os.Stat(filepath.Join(checkout, ".cto-harness/logs/reward.txt")); err != nil {
		t.Errorf("the kept report was removed: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(checkout, "linked")); err != nil || !fi.IsDir() {
		t.Errorf("the link on the way was not replaced by a directory: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("what the link pointed to was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "sub")); err == nil {
		t.Error("a directory was made through the link")
	}
	if _, err := hidden.MakeDirs(context.Background(), checkout, []string{"../x"}, nil); err == nil {
		t.Error("a directory outside the checkout was accepted")
	}
}
