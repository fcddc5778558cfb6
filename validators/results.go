package validators

import (
	"encoding/json"
	"os"
	"slices"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/step/results"
	"github.com/cto-harness/cto-harness/harness/testresults"
)

// checkTestResults recounts the report's per-test summary from tests.json,
// and holds a pass to what the results say: a passing run with a test
// report has at least one test that passed and none that failed.
func checkTestResults(v *runView, c collector) {
	const chk = "test_results"
	sum := v.report.Tests.Results
	if sum == nil || sum.Artifact == "" {
		if v.files[evidence.TestsJSON] {
			c.fail(chk, evidence.TestsJSON, "the run directory holds per-test results the report does not record")
		}
		if sum != nil && v.report.Status == ctoharness.StatusPass {
			c.fail(chk, evidence.ReportJSON, "a passing run whose test report could not be read (%s)", sum.Problem)
		}
		return
	}
	data, err := os.ReadFile(v.path(evidence.TestsJSON))
	if err != nil {
		c.fail(chk, evidence.TestsJSON, "the report records per-test results, and tests.json cannot be read: %v", err)
		return
	}
	var f testresults.File
	if err := json.Unmarshal(data, &f); err != nil {
		c.fail(chk, evidence.TestsJSON, "does not decode: %v", err)
		return
	}
	got := map[testresults.Outcome]int{}
	for _, t := range f.Tests {
		got[t.Outcome]++
	}
	if len(f.Tests) != sum.Total || got[testresults.Pass] != sum.Pass || got[testresults.Fail] != sum.Fail || got[testresults.Error] != sum.Error ||
		got[testresults.Skip] != sum.Skip || got[testresults.XFail] != sum.XFail {
		c.fail(chk, evidence.TestsJSON, "tests.json holds %d tests (%v); the report counts %d (pass %d, fail %d, error %d, skip %d, xfail %d)",
			len(f.Tests), got, sum.Total, sum.Pass, sum.Fail, sum.Error, sum.Skip, sum.XFail)
	}
	if f.RunID != v.report.RunID || string(f.Format) != sum.Format || f.Path != sum.Path {
		c.fail(chk, evidence.TestsJSON, "tests.json is of run %s, format %s, path %s; the report says %s, %s, %s", f.RunID, f.Format, f.Path, v.report.RunID, sum.Format, sum.Path)
	}
	if g := sum.Grading; g != nil {
		fixed := v.classified()
		if !slices.Equal(ids(g.FailToPass), fixed.FailToPass) || !slices.Equal(ids(g.PassToPass), fixed.PassToPass) {
			c.fail(chk, evidence.EventsFile, "the graded lists (fail_to_pass %v, pass_to_pass %v) are not the ones the source_classified event fixed before Case started (%v, %v)",
				ids(g.FailToPass), ids(g.PassToPass), fixed.FailToPass, fixed.PassToPass)
		}
		checkGrading(c, g, f.Tests, v.report.Status == ctoharness.StatusPass)
		checkBaseline(v, c, g)
		return
	}
	if v.report.Status == ctoharness.StatusPass && (sum.Fail+sum.Error > 0 || sum.Pass+sum.XFail == 0) {
		c.fail(chk, evidence.ReportJSON, "a passing run whose test report shows %d passed, %d failed and %d errored tests", sum.Pass+sum.XFail, sum.Fail, sum.Error)
	}
}

func ids(g []ctoharness.GradedTest) []string {
	out := make([]string, len(g))
	for i, t := range g {
		out[i] = t.ID
	}
	return out
}

// checkBaseline holds the baseline run's record to its rule: every listed
// fail-to-pass test is there, one that passed on the baseline makes the
// run TASK_INVALID (never a pass), and its log is in the run directory.
func checkBaseline(v *runView, c collector, g *ctoharness.Grading) {
	const chk = "test_results"
	b := g.Baseline
	if b == nil {
		return
	}
	if b.Log != "" && !v.files[b.Log] {
		c.fail(chk, b.Log, "the baseline run's log is missing")
	}
	if !b.Ran {
		return
	}
	if !slices.Equal(ids(b.FailToPass), ids(g.FailToPass)) {
		c.fail(chk, evidence.ReportJSON, "the baseline run grades %v, the fail-to-pass list is %v", ids(b.FailToPass), ids(g.FailToPass))
	}
	invalid := false
	for _, t := range b.FailToPass {
		passed := t.Outcome == "pass" || t.Outcome == "xfail"
		if t.OK == passed {
			c.fail(chk, evidence.ReportJSON, "baseline outcome %s of %s is graded ok=%v", t.Outcome, t.ID, t.OK)
		}
		invalid = invalid || passed
	}
	if invalid && (!v.hasBlocker(ctoharness.BlockTaskInvalid) || v.report.Status == ctoharness.StatusPass) {
		c.fail(chk, evidence.ReportJSON, "a fail-to-pass test passed on the baseline, and the run is not TASK_INVALID")
	}
	// Pass-to-pass tests are held there only where the baseline run is the
	// verification's environment; then all of them, each by its outcome.
	if len(b.PassToPass) > 0 && !slices.Equal(ids(b.PassToPass), ids(g.PassToPass)) {
		c.fail(chk, evidence.ReportJSON, "the baseline run holds pass-to-pass tests %v, the list is %v", ids(b.PassToPass), ids(g.PassToPass))
	}
	if len(b.PassToPass) == 0 && len(g.PassToPass) > 0 && b.PassToPassNote == "" && !invalid {
		c.fail(chk, evidence.ReportJSON, "the baseline run neither held the pass-to-pass tests nor said why")
	}
	broken := false
	for _, t := range b.PassToPass {
		held := t.Outcome == "pass" || t.Outcome == "xfail" || t.Outcome == "skip"
		if t.OK != held {
			c.fail(chk, evidence.ReportJSON, "baseline outcome %s of pass-to-pass test %s is graded ok=%v", t.Outcome, t.ID, t.OK)
		}
		broken = broken || !held
	}
	if broken && (!v.hasBlocker(ctoharness.BlockTaskInvalid) || v.report.Status == ctoharness.StatusPass) {
		c.fail(chk, evidence.ReportJSON, "a pass-to-pass test failed on the baseline, and the run is not TASK_INVALID")
	}
}

// checkGrading grades the listed tests again from tests.json, with the
// grading step's own rules (results.Grade): each one's outcome, whether it
// holds, and the verdict.
func checkGrading(c collector, g *ctoharness.Grading, tests []testresults.Result, passed bool) {
	const chk = "test_results"
	want := results.Grade(ids(g.FailToPass), ids(g.PassToPass), tests)
	if want == nil {
		c.fail(chk, evidence.ReportJSON, "a grading without listed tests")
		return
	}
	for _, list := range []struct {
		name      string
		got, want []ctoharness.GradedTest
	}{{"fail_to_pass", g.FailToPass, want.FailToPass}, {"pass_to_pass", g.PassToPass, want.PassToPass}} {
		for i, gt := range list.got {
			if w := list.want[i]; gt != w {
				c.fail(chk, evidence.TestsJSON, "%s test %s is graded %s (ok %v); tests.json makes it %s (ok %v)", list.name, gt.ID, gt.Outcome, gt.OK, w.Outcome, w.OK)
			}
		}
	}
	if g.Passed != want.Passed {
		c.fail(chk, evidence.ReportJSON, "the grading says passed=%v; its listed tests make it %v", g.Passed, want.Passed)
	}
	if passed && !want.Passed {
		c.fail(chk, evidence.ReportJSON, "a passing run whose listed tests do not all hold")
	}
}
