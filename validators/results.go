package validators

import (
	"encoding/json"
	"os"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
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
	if v.report.Status == ctoharness.StatusPass && (sum.Fail+sum.Error > 0 || sum.Pass+sum.XFail == 0) {
		c.fail(chk, evidence.ReportJSON, "a passing run whose test report shows %d passed, %d failed and %d errored tests", sum.Pass+sum.XFail, sum.Fail, sum.Error)
	}
}
