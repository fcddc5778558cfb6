// Package results is the pipeline step that reads the verification's own
// machine-readable test report (the task's test_results), test by test:
// what was at its path before the verification ran is removed unread (Case's
// result could hold a report of its own), and the report is read after,
// confined to the checkout, never following a link.
package results

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseworld"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
)

// MaxReport caps the report read.
const MaxReport = 64 << 20

// maxFailing is how many failing test ids the summary names.
const maxFailing = 20

// Clear removes what the checkout holds at the report's path before the
// verification runs, and says whether there was something: a report there
// is Case's, not the verification's. A path with a link on the way is left
// alone (the read after refuses it).
func Clear(checkout string, tr task.TestResults) (planted bool, err error) {
	dir, name := path.Split(path.Clean(tr.Path))
	if dir == "" {
		dir = "."
	}
	fd, err := caseworld.Dir(checkout, path.Clean(dir))
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return true, nil // a link or something else on the way: never read after
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return false, nil
	} else if err != nil {
		return true, err
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(fd, name, flags); err != nil {
		return true, fmt.Errorf("remove the test report %s Case's result holds: %w", tr.Path, err)
	}
	return true, nil
}

// Read reads the report the verification wrote and returns tests.json's
// content and the report's summary. A report that is missing, not a regular
// file, too large or not of its format gives a summary with Problem set and
// no tests.
func Read(checkout string, tr task.TestResults, runID string, planted bool) (testresults.File, ctoharness.TestResultsSummary) {
	file := testresults.File{SchemaVersion: testresults.FileVersion, RunID: runID, Format: tr.Format, Path: tr.Path, Tests: []testresults.Result{}}
	sum := ctoharness.TestResultsSummary{Format: string(tr.Format), Path: tr.Path, Failing: []string{}, Planted: planted}
	data, err := readCapped(checkout, tr.Path)
	if err != nil {
		sum.Problem = err.Error()
		if planted {
			sum.Problem += " (a report Case's result held at that path was removed unread before the verification ran)"
		}
		return file, sum
	}
	tests, err := testresults.Parse(tr.Format, data)
	if err != nil {
		sum.Problem = fmt.Sprintf("the test report %s is not %s: %v", tr.Path, tr.Format, err)
		return file, sum
	}
	file.Tests = tests
	sum.Artifact = "tests.json"
	for _, t := range tests {
		sum.Total++
		switch t.Outcome {
		case testresults.Pass:
			sum.Pass++
		case testresults.Fail:
			sum.Fail++
		case testresults.Error:
			sum.Error++
		case testresults.Skip:
			sum.Skip++
		case testresults.XFail:
			sum.XFail++
		}
		if (t.Outcome == testresults.Fail || t.Outcome == testresults.Error) && len(sum.Failing) < maxFailing {
			sum.Failing = append(sum.Failing, t.ID)
		}
	}
	return file, sum
}

func readCapped(checkout, rel string) ([]byte, error) {
	f, err := caseworld.Open(checkout, path.Clean(rel))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("the verification wrote no test report at %s", rel)
	}
	if err != nil {
		return nil, fmt.Errorf("the test report %s cannot be read as a regular file inside the checkout: %v", rel, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxReport+1))
	if err != nil {
		return nil, fmt.Errorf("read the test report %s: %v", rel, err)
	}
	if len(data) > MaxReport {
		return nil, fmt.Errorf("the test report %s is larger than %d bytes", rel, MaxReport)
	}
	return data, nil
}

// Verdict is what blocks a verification that exited 0, given its results:
// a report that could not be read, or that holds no test, means nothing
// was shown to pass (TEST_NOT_RUN); a failed or errored test fails the run
// whatever the exit code said (TESTS_FAILED). "" means nothing blocks.
func Verdict(sum ctoharness.TestResultsSummary) (ctoharness.BlockerCode, string) {
	switch {
	case sum.Problem != "":
		return ctoharness.BlockTestNotRun, sum.Problem + "; a run is never passed on tests nobody saw run"
	case sum.Total == 0:
		return ctoharness.BlockTestNotRun, fmt.Sprintf("the test report %s lists no test: a run that tested nothing does not pass", sum.Path)
	case sum.Pass+sum.XFail == 0:
		return ctoharness.BlockTestNotRun, fmt.Sprintf("the test report %s lists %d tests and every one was skipped: a run that tested nothing does not pass", sum.Path, sum.Total)
	case sum.Fail+sum.Error > 0:
		return ctoharness.BlockTestsFailed, fmt.Sprintf("the command exited 0, yet its test report %s lists %d failed and %d errored tests (%v)", sum.Path, sum.Fail, sum.Error, sum.Failing)
	}
	return "", ""
}

// Grade holds the listed tests to their rules on the result's tests (see
// ctoharness.Grading); nil without lists.
func Grade(failToPass, passToPass []string, tests []testresults.Result) *ctoharness.Grading {
	if len(failToPass) == 0 && len(passToPass) == 0 {
		return nil
	}
	by := make(map[string]testresults.Outcome, len(tests))
	for _, t := range tests {
		by[t.ID] = t.Outcome
	}
	g := &ctoharness.Grading{Passed: true, FailToPass: []ctoharness.GradedTest{}, PassToPass: []ctoharness.GradedTest{}}
	grade := func(id string, ok func(testresults.Outcome) bool) ctoharness.GradedTest {
		o, found := by[id]
		gt := ctoharness.GradedTest{ID: id, Outcome: "missing"}
		if found {
			gt.Outcome, gt.OK = string(o), ok(o)
		}
		g.Passed = g.Passed && gt.OK
		return gt
	}
	for _, id := range failToPass {
		g.FailToPass = append(g.FailToPass, grade(id, func(o testresults.Outcome) bool {
			return o == testresults.Pass || o == testresults.XFail // a skip never makes a test pass
		}))
	}
	for _, id := range passToPass {
		g.PassToPass = append(g.PassToPass, grade(id, func(o testresults.Outcome) bool {
			return o == testresults.Pass || o == testresults.XFail || o == testresults.Skip
		}))
	}
	return g
}

// GradingVerdict is what blocks a run the lists graded ("" when every
// listed test held).
func GradingVerdict(g *ctoharness.Grading) string {
	var bad []string
	for _, t := range g.FailToPass {
		if !t.OK {
			bad = append(bad, fmt.Sprintf("fail-to-pass %s is %s", t.ID, t.Outcome))
		}
	}
	for _, t := range g.PassToPass {
		if !t.OK {
			bad = append(bad, fmt.Sprintf("pass-to-pass %s is %s", t.ID, t.Outcome))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	if len(bad) > maxFailing {
		bad = append(bad[:maxFailing], fmt.Sprintf("and %d more", len(bad)-maxFailing))
	}
	return "the listed tests do not hold on the result: " + strings.Join(bad, ", ")
}

// Flaky lists the tests that failed (or errored) in one run of the
// verification and passed in a later one (the profile's flake reruns),
// from each run's results in order.
func Flaky(runs [][]testresults.Result) []string {
	failedAt := map[string]bool{}
	var out []string
	seen := map[string]bool{}
	for _, tests := range runs {
		for _, t := range tests {
			switch t.Outcome {
			case testresults.Fail, testresults.Error:
				failedAt[t.ID] = true
			case testresults.Pass, testresults.XFail:
				if failedAt[t.ID] && !seen[t.ID] {
					seen[t.ID] = true
					out = append(out, t.ID)
				}
			}
		}
	}
	return out
}

// FlakyListed is the listed tests among flaky, in list order.
func FlakyListed(flaky []string, g *ctoharness.Grading) []string {
	if g == nil {
		return nil
	}
	is := map[string]bool{}
	for _, id := range flaky {
		is[id] = true
	}
	var out []string
	for _, t := range append(append([]ctoharness.GradedTest(nil), g.FailToPass...), g.PassToPass...) {
		if is[t.ID] {
			out = append(out, t.ID)
		}
	}
	return out
}
