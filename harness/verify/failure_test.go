package verify

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstFailureRealGoTest runs a real failing go test, plain and -json,
// and checks that the first failing test is named with the lines that say
// why, the subtest rather than its parent.
func TestFirstFailureRealGoTest(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/adder\n\ngo 1.21\n")
	write("add_test.go", `package adder

import "testing"

func TestPasses(t *testing.T) {}

func TestAdd(t *testing.T) {
	t.Run("positive", func(t *testing.T) {})
	t.Run("negative", func(t *testing.T) {
		t.Errorf("add(-1, -2) = %d, want %d", -1, -3)
	})
}
`)
	for _, args := range [][]string{{"test", "-v", "."}, {"test", "-json", "."}, {"test", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("go %v passed:\n%s", args, out)
		}
		f, ok := FirstFailure(strings.NewReader(string(out)))
		if !ok || f.Test != "TestAdd/negative" || f.Line < 1 || len(f.Lines) == 0 || !strings.Contains(f.Lines[0], "add(-1, -2) = -1, want -3") {
			t.Errorf("go %v: %+v, %v; want TestAdd/negative with its message\n%s", args, f, ok, out)
		}
	}
}

func TestFirstFailureRunners(t *testing.T) {
	for _, tc := range []struct {
		name, log, test string
		line            int
		first           string // the first reason line; "" for none
	}{
		{"pytest", "tests/test_a.py .F\n\n=== FAILURES ===\n___ test_sub ___\n\n    def test_sub():\n>       assert sub(3, 1) == 1\nE       assert 2 == 1\nE        +  where 2 = sub(3, 1)\n\ntests/test_a.py:5: AssertionError\n___ test_other ___\nE   assert 0\nFAILED tests/test_a.py::test_sub - assert 2 == 1\n",
			"test_sub", 4, "E       assert 2 == 1"},
		{"pytest summary only", "FAILED tests/test_a.py::test_sub - assert 2 == 1\n", "tests/test_a.py::test_sub", 1, "assert 2 == 1"},
		{"tap", "TAP version 13\nok 1 - adds\nnot ok 2 - subtracts\n  ---\n  message: 'expected 1, got 2'\n", "subtracts", 3, "---"},
		{"cargo", "running 2 tests\ntest tests::adds ... ok\ntest tests::subtracts ... FAILED\n", "tests::subtracts", 3, ""},
		{"mocha", "  2 passing\n  1 failing\n\n  1) math\n       subtracts:\n     AssertionError: expected 2 to equal 1\n", "math", 4, "subtracts:"},
		{"no runner", "building...\nerror: linker failed\n", "", 2, "error: linker failed"},
		// git's build: files named error.o or fail-fast.sh are not failures;
		// the shell's line for the program it did not find is.
		{"make", "    CC reftable/error.o\n    CC t/fail-fast.o\n    GEN t/helper/test-error\n    CC error_.o\n/bin/sh: 1: cargo: not found\nmake: *** [Makefile:3042: target/release/libgitcore.a] Error 127\n",
			"", 5, "/bin/sh: 1: cargo: not found"},
		{"make, bash", "    CC reftable/error.o\n/bin/sh: line 1: cargo: command not found\n", "", 2, "/bin/sh: line 1: cargo: command not found"},
		{"a sentence ending in error", "    CC reftable/error.o\nsomething went wrong: error.\n", "", 2, "something went wrong: error."},
		{"make's error line", "    CC reftable/error.o\nmake: *** [Makefile:12: all] Error 1\n", "", 2, "make: *** [Makefile:12: all] Error 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := FirstFailure(strings.NewReader(tc.log))
			if !ok || f.Test != tc.test || f.Line != tc.line {
				t.Fatalf("FirstFailure = %+v, %v; want test %q at line %d", f, ok, tc.test, tc.line)
			}
			if got := strings.Join(f.Lines, "\n"); tc.first != "" && !strings.HasPrefix(got, tc.first) || tc.first == "" && got != "" {
				t.Errorf("lines %q, want them to start with %q", f.Lines, tc.first)
			}
		})
	}
	if f, ok := FirstFailure(strings.NewReader("all good\n3 passed\n")); ok {
		t.Errorf("a log with no failure gives %+v", f)
	}
}

// TestFailureHint checks the text a TESTS_FAILED blocker carries: the test,
// its line in the log, why, and the log's full path.
func TestFailureHint(t *testing.T) {
	p := filepath.Join(t.TempDir(), "test.log")
	os.WriteFile(p, []byte("=== RUN   TestAdd\n--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4\nFAIL\nFAIL\texample.com/adder\t0.002s\n"), 0o644)
	want := "first failing test: TestAdd (log line 2): add_test.go:9: got 3, want 4; full log: " + p
	if got := FailureHint(p); got != want {
		t.Errorf("FailureHint = %q, want %q", got, want)
	}
	os.WriteFile(p, []byte("nothing to see\n"), 0o644)
	if got := FailureHint(p); got != "full log: "+p {
		t.Errorf("FailureHint without a failure = %q", got)
	}
}
