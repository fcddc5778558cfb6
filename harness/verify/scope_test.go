package verify

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// scopeFixture builds:
//
//	tests/unit/       allowed
//	tests/link-in  -> ../src     (inside the fixture, outside the allowed paths)
//	tests/link-up  -> tests/unit (inside, allowed)
//	tests/escape   -> OUTSIDE    (out of the fixture)
//	tests/dangling -> /nonexistent/x (out of the fixture, and missing)
//	tests/future   -> unit/later (inside, not yet created)
//	tests/loop     -> loop
//	src/, docs/00_foundations/ (protected)
func scopeFixture(t *testing.T) (root, outside string) {
	t.Helper()
	root, outside = t.TempDir(), t.TempDir()
	for _, d := range []string{"tests/unit", "src", "docs/00_foundations", "docs/guide"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"tests/link-in":  "../src",
		"tests/link-up":  "unit",
		"tests/escape":   outside,
		"tests/dangling": "/nonexistent/x",
		"tests/future":   "unit/later",
		"tests/loop":     "loop",
	}
	for l, dest := range links {
		if err := os.Symlink(dest, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func TestCheckScope(t *testing.T) {
	root, outside := scopeFixture(t)
	allowed := []string{"tests/**"}
	protected := []string{".git", ".git/**", "docs/00_foundations/**"}
	cases := []struct {
		target  string
		allowed []string
		want    string // "" = accepted
	}{
		{"tests", allowed, ""},
		{"tests/unit/test_a.py", allowed, ""},
		{"tests/unit/not_yet_written.py", allowed, ""},
		{"tests/link-up/test_b.py", allowed, ""},
		{filepath.Join(root, "tests/unit"), allowed, ""},
		{"./tests/unit", allowed, ""},
		{"src", allowed, ScopeOutside},
		{".", allowed, ScopeProtected}, // it contains a protected path, which is checked first
		{"tests/link-in", allowed, ScopeOutside},
		{"tests/link-in/x_test.go", allowed, ScopeOutside},
		{"tests/../src", allowed, ScopeTraversal},
		{"tests/unit/../../../etc/passwd", allowed, ScopeTraversal},
		{`tests\..\..\etc`, allowed, ScopeTraversal},
		{"..", nil, ScopeTraversal},
		{"/etc/passwd", allowed, ScopeAbsolute},
		{outside, nil, ScopeAbsolute},
		{"tests/escape", allowed, ScopeSymlink},
		{"tests/escape/deeper/x.py", allowed, ScopeSymlink},
		{"tests/dangling", allowed, ScopeSymlink},
		{"tests/future/test_x.py", allowed, ""},
		{"tests/loop", allowed, ScopeSymlink},
		{"docs/00_foundations/constitution.md", nil, ScopeProtected},
		{"docs", nil, ScopeProtected},
		{".", nil, ScopeProtected},
		{".git/hooks", nil, ScopeProtected},
		{"docs/guide", nil, ""},
		{"src/x_test.go", nil, ""},
		{"", allowed, ScopeGovernance},
		{"tests/a\x00b", allowed, ScopeGovernance},
	}
	for _, c := range cases {
		err := CheckScope(root, []string{c.target}, c.allowed, protected)
		var se *ScopeError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: refused: %v", c.target, err)
		case c.want != "" && !errors.As(err, &se):
			t.Errorf("%q: want %s, got %v", c.target, c.want, err)
		case c.want != "" && se.Reason != c.want:
			t.Errorf("%q: want %s, got %v", c.target, c.want, err)
		}
	}
}

func TestCheckScopeRoot(t *testing.T) {
	root, _ := scopeFixture(t)
	link := filepath.Join(t.TempDir(), "root-link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		root string
		want string
	}{
		{link, ScopeSymlink},
		{"relative/root", ScopeGovernance},
		{"", ScopeGovernance},
		{filepath.Join(root, "missing"), ScopeGovernance},
	}
	for _, c := range cases {
		var se *ScopeError
		if err := CheckScope(c.root, []string{"tests"}, nil, nil); !errors.As(err, &se) || se.Reason != c.want {
			t.Errorf("root %q: want %s, got %v", c.root, c.want, err)
		}
	}
	var se *ScopeError
	if err := CheckScope(root, nil, nil, nil); !errors.As(err, &se) || se.Reason != ScopeGovernance {
		t.Errorf("no targets: %v", err)
	}
	if err := CheckScope(root, []string{"tests"}, []string{"../x"}, nil); !errors.As(err, &se) || se.Reason != ScopeGovernance {
		t.Errorf("bad pattern: %v", err)
	}
}

// Every refused target is reported, not only the first.
func TestCheckScopeReportsAll(t *testing.T) {
	root, _ := scopeFixture(t)
	err := CheckScope(root, []string{"tests/unit", "src", "/etc", "tests/../x"}, []string{"tests"}, nil)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{ScopeOutside, ScopeAbsolute, ScopeTraversal} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"tests/unit"`) {
		t.Errorf("an allowed target was reported: %v", err)
	}
}

func TestTargets(t *testing.T) {
	cases := []struct {
		cmd  string
		want []string
		err  bool
	}{
		{"go test ./...", []string{"."}, false},
		{"go test -run 'TestA|TestB' -count=1 ./pkg/... ./cmd/tool", []string{"cmd/tool", "pkg"}, false},
		{"go test -v -race -timeout 30s ./internal/x/...", []string{"internal/x"}, false},
		{"go test", []string{"."}, false},
		{"go test example.com/m/pkg", nil, true},
		{"pytest -q tests/unit tests/test_a.py::test_one -k 'not slow'", []string{"tests/test_a.py", "tests/unit"}, false},
		{"python3 -m pytest -x --maxfail 2 runtime/tests", []string{"runtime/tests"}, false},
		{"pytest", []string{"."}, false},
		{"node --test test/", []string{"test"}, false},
		{"sh scripts/check.sh", []string{"scripts/check.sh"}, false},
		{"./check.sh --fast", []string{"check.sh"}, false},
		{"cd web && npm ci && npm test", []string{"."}, false},
		{"cd sub && go test ./...", []string{"sub"}, false},
		{"make test", []string{"."}, false},
		{"timeout 60 env CI=1 pytest tests", []string{"tests"}, false},
		{`pytest "$TARGET"`, nil, true},
		{"go test ../other/...", []string{"../other"}, false},
		{"echo 'unterminated", nil, true},
	}
	for _, c := range cases {
		got, err := Targets(c.cmd)
		if (err != nil) != c.err {
			t.Errorf("%q: err %v", c.cmd, err)
			continue
		}
		if !c.err && !slices.Equal(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.cmd, got, c.want)
		}
	}
}
