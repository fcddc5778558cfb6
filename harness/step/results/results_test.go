package results_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/step/results"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
)

var tap = task.TestResults{Format: testresults.TAP, Path: "out/results.tap"}

func TestClearRemovesWhatCaseLeft(t *testing.T) {
	co := t.TempDir()
	if planted, err := results.Clear(co, tap); planted || err != nil {
		t.Fatalf("an empty checkout: planted %v, %v", planted, err)
	}
	if err := os.MkdirAll(filepath.Join(co, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(co, "out", "results.tap"), []byte("1..1\nok 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if planted, err := results.Clear(co, tap); !planted || err != nil {
		t.Fatalf("a planted report: planted %v, %v", planted, err)
	}
	if _, err := os.Lstat(filepath.Join(co, "out", "results.tap")); !os.IsNotExist(err) {
		t.Errorf("the planted report is still there: %v", err)
	}
	// A link on the way: nothing outside is touched, and the read refuses.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "results.tap"), []byte("1..1\nok 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	co2 := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(co2, "out")); err != nil {
		t.Fatal(err)
	}
	if planted, _ := results.Clear(co2, tap); !planted {
		t.Error("a link where the report's directory is was not reported")
	}
	if _, err := os.Stat(filepath.Join(outside, "results.tap")); err != nil {
		t.Errorf("Clear removed a file through Case's link: %v", err)
	}
	_, sum := results.Read(co2, tap, "run-1", true)
	if sum.Problem == "" || sum.Artifact != "" || sum.Total != 0 {
		t.Errorf("a report behind a link was read: %+v", sum)
	}
}

func TestReadAndVerdict(t *testing.T) {
	co := t.TempDir()
	_, sum := results.Read(co, tap, "run-1", false)
	if !strings.Contains(sum.Problem, "wrote no test report at out/results.tap") {
		t.Errorf("a missing report: %+v", sum)
	}
	if code, _ := results.Verdict(sum); code != ctoharness.BlockTestNotRun {
		t.Errorf("a missing report's verdict: %s", code)
	}
	if err := os.MkdirAll(filepath.Join(co, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		report string
		want   ctoharness.BlockerCode
		total  int
	}{
		{"1..2\nok 1 - a\nok 2 - b\n", "", 2},
		{"1..0 # SKIP none\n", ctoharness.BlockTestNotRun, 0},
		{"1..1\nok 1 - a # SKIP later\n", ctoharness.BlockTestNotRun, 1},
		{"1..2\nok 1 - a\nnot ok 2 - b\n", ctoharness.BlockTestsFailed, 2},
		{"not TAP at all\n", ctoharness.BlockTestNotRun, 0},
	} {
		if err := os.WriteFile(filepath.Join(co, "out", "results.tap"), []byte(c.report), 0o644); err != nil {
			t.Fatal(err)
		}
		file, sum := results.Read(co, tap, "run-1", false)
		if sum.Total != c.total || len(file.Tests) != c.total || file.RunID != "run-1" {
			t.Errorf("%q: %d tests (%+v)", c.report, sum.Total, sum)
		}
		if code, msg := results.Verdict(sum); code != c.want {
			t.Errorf("%q: verdict %q (%s), want %q", c.report, code, msg, c.want)
		}
	}
}

// The grading rules, each on its own: a listed test missing from the
// results fails; a skip keeps a pass-to-pass test and never passes a
// fail-to-pass one; an expected failure counts as a pass.
func TestGradeRules(t *testing.T) {
	tests := []testresults.Result{
		{ID: "fixed", Outcome: testresults.Pass}, {ID: "xf", Outcome: testresults.XFail}, {ID: "skipped", Outcome: testresults.Skip},
		{ID: "broken", Outcome: testresults.Fail}, {ID: "errored", Outcome: testresults.Error},
	}
	if results.Grade(nil, nil, tests) != nil {
		t.Error("no lists, yet a grading")
	}
	for _, c := range []struct {
		f2p, p2p []string
		passed   bool
		verdict  string
	}{
		{[]string{"fixed", "xf"}, []string{"skipped", "xf"}, true, ""},
		{[]string{"absent"}, nil, false, "fail-to-pass absent is missing"},
		{[]string{"skipped"}, nil, false, "fail-to-pass skipped is skip"},
		{nil, []string{"broken"}, false, "pass-to-pass broken is fail"},
		{nil, []string{"errored", "absent"}, false, "pass-to-pass errored is error, pass-to-pass absent is missing"},
	} {
		g := results.Grade(c.f2p, c.p2p, tests)
		if g == nil || g.Passed != c.passed || len(g.FailToPass) != len(c.f2p) || len(g.PassToPass) != len(c.p2p) {
			t.Errorf("%v / %v: grading %+v, want passed %v", c.f2p, c.p2p, g, c.passed)
			continue
		}
		if msg := results.GradingVerdict(g); (c.verdict == "") != (msg == "") || !strings.Contains(msg, c.verdict) {
			t.Errorf("%v / %v: verdict %q, want %q", c.f2p, c.p2p, msg, c.verdict)
		}
	}
}

// A test is flaky when it failed in one run and passed in a later one;
// failing after passing, or failing throughout, is not flaky.
func TestFlaky(t *testing.T) {
	run := func(o ...testresults.Outcome) []testresults.Result {
		ids := []string{"a", "b", "c", "d"}
		var out []testresults.Result
		for i, x := range o {
			out = append(out, testresults.Result{ID: ids[i], Outcome: x})
		}
		return out
	}
	p, f, e, x := testresults.Pass, testresults.Fail, testresults.Error, testresults.XFail
	flaky := results.Flaky([][]testresults.Result{run(f, p, f, e), run(p, f, f, x)})
	if strings.Join(flaky, ",") != "a,d" {
		t.Errorf("flaky %v, want [a d]", flaky)
	}
	g := results.Grade([]string{"d"}, []string{"b", "a"}, run(p, p, p, p))
	if got := results.FlakyListed(flaky, g); strings.Join(got, ",") != "d,a" {
		t.Errorf("flaky listed %v, want [d a] (list order)", got)
	}
	if results.FlakyListed(flaky, nil) != nil {
		t.Error("no grading, yet flaky listed tests")
	}
}
