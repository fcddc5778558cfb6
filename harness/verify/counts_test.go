package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

func TestParseCountsSamples(t *testing.T) {
	cases := []struct {
		file   string
		want   *ctoharness.TestCounts
		format string
	}{
		{"pytest_verbose.txt", &ctoharness.TestCounts{Passed: 3, Failed: 2, Skipped: 2}, FormatPytest},
		{"pytest_quiet.txt", &ctoharness.TestCounts{Passed: 3, Skipped: 1}, FormatPytest},
		{"pytest_none.txt", &ctoharness.TestCounts{}, FormatPytest},
		{"node_tap.txt", &ctoharness.TestCounts{Passed: 2, Failed: 1, Skipped: 1}, FormatNodeTest},
		{"node_spec.txt", &ctoharness.TestCounts{Passed: 2, Failed: 1, Skipped: 1}, FormatNodeTest},
		{"tap_plain.txt", &ctoharness.TestCounts{Passed: 2, Failed: 1, Skipped: 1}, FormatTAP},
		{"mocha_spec.txt", &ctoharness.TestCounts{Passed: 3, Failed: 1, Skipped: 1}, FormatMocha},
		{"unknown.txt", nil, ""},
	}
	for _, c := range cases {
		data, err := os.ReadFile(filepath.Join("testdata", "counts", c.file))
		if err != nil {
			t.Fatal(err)
		}
		got, format := ParseCounts(string(data))
		if format != c.format || (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("%s: got %+v %q, want %+v %q", c.file, got, format, c.want, c.format)
		}
		// Streaming in small chunks gives the same answer.
		p := newCountParser()
		for i := 0; i < len(data); i += 7 {
			p.Write(data[i:min(i+7, len(data))])
		}
		if got2, f2 := p.result(); f2 != format || (got2 == nil) != (got == nil) || (got2 != nil && *got2 != *got) {
			t.Errorf("%s: chunked parse differs: %+v %q", c.file, got2, f2)
		}
	}
}

func TestParseCountsCombined(t *testing.T) {
	out := "ok  \texample.com/a\t0.01s\n3 passed in 0.2s\n"
	got, format := ParseCounts(out)
	if format != FormatGoTestPkgs+"+"+FormatPytest || *got != (ctoharness.TestCounts{Passed: 4}) {
		t.Fatalf("got %+v %q", got, format)
	}
	// A line longer than the parser keeps is skipped, not mis-parsed.
	long := strings.Repeat("x", maxCountLineLength+10) + " 9 passed in 1s\n1 passed in 0.1s\n"
	if got, _ := ParseCounts(long); got == nil || got.Passed != 1 {
		t.Fatalf("long line: %+v", got)
	}
}

// goModule writes a tiny module whose tests pass, fail, skip and nest.
func goModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/sample\n\ngo 1.21\n",
		"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) {}
func TestFail(t *testing.T) { t.Fatal("boom") }
func TestSkip(t *testing.T) { t.Skip("later") }
func TestSub(t *testing.T) {
	t.Run("one", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) {})
}
`,
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestOK(t *testing.T) {}\n",
		"c/c.go":      "package c\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func goEnv(t *testing.T) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	cache, err := exec.Command(goBin, "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "GOCACHE=" + strings.TrimSpace(string(cache)),
		"GOPATH=" + t.TempDir(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off", "GO111MODULE=on"}
}

// Counts from real go test runs, in its three output shapes.
func TestCountsFromRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs go test")
	}
	mod := goModule(t)
	env := goEnv(t)
	cases := []struct {
		cmd    string
		want   ctoharness.TestCounts
		format string
	}{
		{"go test -count=1 ./...", ctoharness.TestCounts{Passed: 1, Failed: 1}, FormatGoTestPkgs},
		{"go test -count=1 -v ./...", ctoharness.TestCounts{Passed: 5, Failed: 1, Skipped: 1}, FormatGoTest},
		{"go test -count=1 -json ./...", ctoharness.TestCounts{Passed: 5, Failed: 1, Skipped: 1}, FormatGoJSON},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			e := newEnv(t)
			e.fixture = mod
			in := e.input(t, c.cmd, 3*time.Minute)
			in.Env = env
			rec, err := Execute(context.Background(), in, NewBudget(5*time.Minute, 1), 0)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Classification != ctoharness.TestFailure {
				t.Fatalf("TestFail fails, so the run fails: %+v\n%s", rec, e.log(t))
			}
			if rec.Counts == nil || *rec.Counts != c.want || rec.CountsFormat != c.format {
				t.Fatalf("got %+v %q, want %+v %q\n%s", rec.Counts, rec.CountsFormat, c.want, c.format, e.log(t))
			}
		})
	}
}

// Counts from a real node --test run, when node is installed.
func TestCountsFromRealNodeTest(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH")
	}
	dir := t.TempDir()
	src := `const test = require('node:test');
const assert = require('node:assert');
test('adds', () => assert.strictEqual(1 + 1, 2));
test('breaks', () => assert.strictEqual(1, 2));
test('later', { skip: true }, () => {});
`
	if err := os.WriteFile(filepath.Join(dir, "a.test.js"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.fixture = dir
	in := e.input(t, "node --test a.test.js", time.Minute)
	in.Env = []string{"PATH=" + filepath.Dir(node) + ":/usr/bin:/bin", "HOME=" + t.TempDir()}
	rec, err := Execute(context.Background(), in, NewBudget(2*time.Minute, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := ctoharness.TestCounts{Passed: 1, Failed: 1, Skipped: 1}
	if rec.Classification != ctoharness.TestFailure || rec.Counts == nil || *rec.Counts != want {
		t.Fatalf("got %+v %+v %q\n%s", rec.Classification, rec.Counts, rec.CountsFormat, e.log(t))
	}
}
