package gitquote_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/gitquote"
)

func TestQuoteRoundTripsEveryByte(t *testing.T) {
	var names []string
	for c := 1; c < 256; c++ {
		names = append(names, "docs/x"+string([]byte{byte(c)})+"y")
	}
	names = append(names, "docs/café.md", `docs/say "hi".md`, "docs/a b.md", "docs/x\xff\xfe.md")
	for _, n := range names {
		q := gitquote.Quote(n)
		if q == n {
			continue
		}
		got, rest, err := gitquote.Unquote(q + " tail")
		if err != nil || got != n || rest != " tail" {
			t.Errorf("Unquote(Quote(%q)) = %q, %q, %v", n, got, rest, err)
		}
	}
	if q := gitquote.Quote("docs/café.md"); q != `"docs/caf\303\251.md"` {
		t.Errorf("Quote(café) = %s", q)
	}
}

func TestUnquoteRefusesWhatGitDoesNotWrite(t *testing.T) {
	for _, s := range []string{`"abc`, `"a\x41"`, `"a\400"`, `"a\12"`, `"a\`, `abc`} {
		if _, _, err := gitquote.Unquote(s); err == nil {
			t.Errorf("Unquote(%q) accepted", s)
		}
	}
}

func TestDiffHeader(t *testing.T) {
	cases := []struct{ line, a, b string }{
		{"diff --git a/docs/x.md b/docs/x.md", "a/docs/x.md", "b/docs/x.md"},
		{"diff --git a/a b/c b/a b/c", "a/a b/c", "b/a b/c"},
		{`diff --git "a/docs/caf\303\251.md" "b/docs/caf\303\251.md"`, "a/docs/café.md", "b/docs/café.md"},
		{`diff --git "a/docs/say \"hi\".md" "b/docs/say \"hi\".md"`, `a/docs/say "hi".md`, `b/docs/say "hi".md`},
		{`diff --git "a/x\377" "b/x\377"`, "a/x\xff", "b/x\xff"},
		{`diff --git a/plain "b/q\"uoted"`, "a/plain", `b/q"uoted`},
	}
	for _, c := range cases {
		a, b, err := gitquote.DiffHeader(c.line)
		if err != nil || a != c.a || b != c.b {
			t.Errorf("DiffHeader(%q) = %q, %q, %v; want %q, %q", c.line, a, b, err, c.a, c.b)
		}
	}
}

// TestAgreesWithGit checks Quote against git's own header for names git
// quotes, when git is installed.
func TestAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	names := []string{"café.md", `say "hi".md`, "tab\there.md", "raw\xffbyte.md", "back\\slash.md", "esc\x1b[31m.md"}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "core.quotePath=true"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", "-A")
	out := git("diff", "--cached", "--no-renames")
	for _, n := range names {
		want := "diff --git " + gitquote.Quote("a/"+n) + " " + gitquote.Quote("b/"+n) + "\n"
		if !strings.Contains(out, want) {
			t.Errorf("git's diff lacks %q", want)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "diff --git ") {
			if _, _, err := gitquote.DiffHeader(line); err != nil {
				t.Errorf("DiffHeader(%q): %v", line, err)
			}
		}
	}
}
