package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedactor(t *testing.T) {
	if _, err := NewRedactor(Secret{Var: "K", Value: "short"}); err == nil {
		t.Fatal("a 5-character key must be refused")
	}
	r, err := NewRedactor(Secret{Var: "MY_KEY", Value: "sk-abcdefgh12345"})
	if err != nil {
		t.Fatal(err)
	}
	in := "auth sk-abcdefgh12345 and again sk-abcdefgh12345."
	if got := r.String(in); got != "auth [REDACTED:MY_KEY] and again [REDACTED:MY_KEY]." {
		t.Fatalf("got %q", got)
	}
	if r.Contains([]byte(r.String(in))) || !r.Contains([]byte(in)) {
		t.Fatal("Contains disagrees with String")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "log")
	if err := os.WriteFile(p, []byte(in), 0o640); err != nil {
		t.Fatal(err)
	}
	hit, err := r.File(p)
	if err != nil || !hit {
		t.Fatalf("File: %v %v", hit, err)
	}
	data, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if r.Contains(data) || st.Mode().Perm() != 0o640 {
		t.Fatalf("after File: %q mode %v", data, st.Mode())
	}
	if hit, _ := r.File(p); hit {
		t.Fatal("a clean file reported as holding the key")
	}
}

// The key is found in a changed file even when it straddles two read chunks.
func TestHoldingAcrossChunks(t *testing.T) {
	r, _ := NewRedactor(Secret{Var: "K", Value: "sk-abcdefgh12345"})
	dir := t.TempDir()
	big := strings.Repeat("x", 64*1024-5) + "sk-abcdefgh12345" + strings.Repeat("y", 100)
	for name, body := range map[string]string{"big.txt": big, "clean.txt": "nothing here", "sub/leak.md": "key: sk-abcdefgh12345\n"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.Holding(dir, []string{"big.txt", "clean.txt", "gone.txt", "sub/leak.md"})
	if err != nil || strings.Join(got, ",") != "big.txt,sub/leak.md" {
		t.Fatalf("holding %v %v", got, err)
	}
}

func TestSnapshotChanged(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "a")
	write("keep/b.txt", "b")
	write(".git/HEAD", "ref")
	before, err := Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	write("a.txt", "changed size")
	write("new/c.txt", "c")
	write(".git/HEAD", "other")
	if err := os.Remove(filepath.Join(dir, "keep", "b.txt")); err != nil {
		t.Fatal(err)
	}
	after, _ := Take(dir)
	if got := strings.Join(Changed(before, after), ","); got != "a.txt,keep/b.txt,new/c.txt" {
		t.Fatalf("changed %s", got)
	}
}

func TestRelative(t *testing.T) {
	for _, tc := range []struct {
		p, want string
		inside  bool
	}{
		{"docs/a.md", "docs/a.md", true},
		{"/fx/docs/a.md", "docs/a.md", true},
		{"/fx/../etc/passwd", "/etc/passwd", false},
		{"../escape", "/escape", false},
		{"/tmp/x", "/tmp/x", false},
		{"/fxother/x", "/fxother/x", false},
	} {
		got, inside := Relative("/fx", tc.p)
		if got != tc.want || inside != tc.inside {
			t.Errorf("Relative(%q) = %q %v, want %q %v", tc.p, got, inside, tc.want, tc.inside)
		}
	}
}

func TestPromptNamesPathsAndRules(t *testing.T) {
	p := Prompt("Add a note.", []string{"docs/**"}, []string{"network access"})
	for _, want := range []string{"Add a note.", "docs/**", "Do not commit", "Forbidden: network access."} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
}

// TestHoldingNeverFollowsLinks: a directory Case replaced with a link out of
// the fixture is not read through, even when the path names a file below it.
func TestHoldingNeverFollowsLinks(t *testing.T) {
	r, _ := NewRedactor(Secret{Var: "K", Value: "sk-abcdefgh12345"})
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "host.txt"), []byte("sk-abcdefgh12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "docs")); err != nil {
		t.Fatal(err)
	}
	got, err := r.Holding(dir, []string{"docs/host.txt"})
	if err != nil || len(got) != 0 {
		t.Fatalf("Holding read through a link: %v %v", got, err)
	}
}
