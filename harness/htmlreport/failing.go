package htmlreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/testresults"
)

// Caps of the failing tests shown under the verdict: enough to say what
// broke, the rest is further down and in the artifacts.
const (
	maxFailingShown = 10   // tests
	failingLines    = 12   // first lines of one test's output
	failingRunes    = 1200 // runes of one test's output
	logTailLines    = 15   // lines from the end of the log when no test is named
)

// failingView is what failed in the verification, for the top of the page:
// the failing tests with the first lines of their output, or, when the run
// named no test, the end of the log.
type failingView struct {
	Tests []failingTest
	More  int    // failing tests past Tests
	From  string // the artifact the tests come from
	Tail  string // the end of the log when no failing test could be named
}

type failingTest struct {
	ID      string
	Outcome string
	Output  string
	Cut     bool // the output was clipped
}

// failing gathers what failed: tests.json's failed and errored tests when
// the run read a test report, else the "--- FAIL:" blocks of a go test log,
// else the end of the log of a verification that failed. Nil when nothing
// failed.
func (r reader) failing(rep *ctoharness.Report, logName string) *failingView {
	t := rep.Tests
	if res := t.Results; res != nil && res.Problem == "" {
		if res.Fail+res.Error == 0 {
			return nil
		}
		if res.Artifact != "" && safeName(res.Artifact) {
			if v, ok := r.failingFromResults(res.Artifact); ok && len(v.Tests) > 0 {
				return v
			}
		}
		v := &failingView{From: res.Path}
		for _, id := range res.Failing {
			if len(v.Tests) == maxFailingShown {
				break
			}
			v.Tests = append(v.Tests, failingTest{ID: id, Outcome: "failed or errored"})
		}
		v.More = res.Fail + res.Error - len(v.Tests)
		return v
	}
	if t.Classification != ctoharness.TestFailure && t.Classification != ctoharness.TestTimeout {
		return nil
	}
	log := r.text(logName)
	if v := goFailures(log); v != nil {
		v.From = logName
		return v
	}
	ls := lines(log)
	if len(ls) == 0 {
		return nil
	}
	if len(ls) > logTailLines {
		ls = ls[len(ls)-logTailLines:]
	}
	return &failingView{From: logName, Tail: strings.Join(ls, "\n")}
}

// failingFromResults streams tests.json (it may hold a hundred thousand
// results) and keeps the first failed and errored tests, counting the rest.
func (r reader) failingFromResults(name string) (*failingView, bool) {
	f, err := os.Open(r.path(name))
	if err != nil {
		if !os.IsNotExist(err) {
			*r.notes = append(*r.notes, fmt.Sprintf("%s could not be read: %v", name, err))
		}
		return nil, false
	}
	defer f.Close()
	v := &failingView{From: name}
	dec := json.NewDecoder(bufio.NewReader(f))
	bad := func(err error) (*failingView, bool) {
		*r.notes = append(*r.notes, fmt.Sprintf("%s could not be read to the end: %v", name, err))
		return v, true
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(fmt.Errorf("not a JSON object"))
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		if key != "tests" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return bad(err)
			}
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return bad(fmt.Errorf("tests is not a list"))
		}
		for dec.More() {
			var t testresults.Result
			if err := dec.Decode(&t); err != nil {
				return bad(err)
			}
			if t.Outcome != testresults.Fail && t.Outcome != testresults.Error {
				continue
			}
			if len(v.Tests) == maxFailingShown {
				v.More++
				continue
			}
			out, cut := head(t.Output)
			v.Tests = append(v.Tests, failingTest{ID: t.ID, Outcome: string(t.Outcome), Output: out, Cut: cut})
		}
		if _, err := dec.Token(); err != nil {
			return bad(err)
		}
	}
	return v, true
}

// goFailures finds go test's "--- FAIL: Name" lines in a log, each with the
// lines indented below it (go test without -v), or, when there are none
// (with -v the output comes first), the lines between the test's start and
// its verdict.
func goFailures(log string) *failingView {
	ls := lines(log)
	var v failingView
	for i, l := range ls {
		trimmed := strings.TrimLeft(l, " \t")
		name, ok := strings.CutPrefix(trimmed, "--- FAIL: ")
		if !ok {
			continue
		}
		if len(v.Tests) == maxFailingShown {
			v.More++
			continue
		}
		if j := strings.LastIndex(name, " ("); j > 0 {
			name = name[:j]
		}
		indent := len(l) - len(trimmed)
		var body []string
		for _, next := range ls[i+1:] {
			nt := strings.TrimLeft(next, " \t")
			if len(next)-len(nt) <= indent || strings.HasPrefix(nt, "--- ") || strings.HasPrefix(nt, "=== ") {
				break
			}
			body = append(body, next)
		}
		if len(body) == 0 {
			for k := i - 1; k >= 0; k-- {
				pt := strings.TrimLeft(ls[k], " \t")
				if strings.HasPrefix(pt, "=== ") || strings.HasPrefix(pt, "--- ") {
					break
				}
				body = append([]string{ls[k]}, body...)
			}
		}
		out, cut := head(strings.Join(body, "\n"))
		v.Tests = append(v.Tests, failingTest{ID: name, Outcome: "fail", Output: out, Cut: cut})
	}
	if len(v.Tests) == 0 {
		return nil
	}
	return &v
}

// head is the first failingLines lines of s, at most failingRunes runes.
func head(s string) (string, bool) {
	s = strings.TrimRight(strings.ToValidUTF8(s, "\uFFFD"), "\n")
	cut := false
	if ls := strings.SplitN(s, "\n", failingLines+1); len(ls) > failingLines {
		s, cut = strings.Join(ls[:failingLines], "\n"), true
	}
	if r := []rune(s); len(r) > failingRunes {
		s, cut = string(r[:failingRunes]), true
	}
	return s, cut
}

// safeName says an artifact name from the report stays inside the run
// directory.
func safeName(name string) bool {
	return name != "" && !strings.Contains(name, "..") && !strings.HasPrefix(name, "/")
}

// exists says the run directory holds name as a regular file: the page
// links only to files that are there.
func (r reader) exists(name string) bool {
	if !safeName(name) {
		return false
	}
	st, err := os.Lstat(r.path(name))
	return err == nil && st.Mode().IsRegular()
}
