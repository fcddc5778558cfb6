package batch

import (
	"sort"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Graded lists of a trial's tests (AttemptTest.List).
const (
	ListFailToPass = "fail_to_pass"
	ListPassToPass = "pass_to_pass"
)

// AttemptTest is one listed test of an attempt's grading: its outcome on
// the result and whether it held.
type AttemptTest struct {
	ID      string `json:"id"`
	List    string `json:"list"`
	Outcome string `json:"outcome"`
	OK      bool   `json:"ok"`
}

// attemptTests reads the grading of a run's report: every listed test.
func attemptTests(rep *ctoharness.Report) []AttemptTest {
	r := rep.Tests.Results
	if r == nil || r.Grading == nil {
		return nil
	}
	var out []AttemptTest
	for _, l := range []struct {
		list  string
		tests []ctoharness.GradedTest
	}{{ListFailToPass, r.Grading.FailToPass}, {ListPassToPass, r.Grading.PassToPass}} {
		for _, t := range l.tests {
			out = append(out, AttemptTest{ID: t.ID, List: l.list, Outcome: t.Outcome, OK: t.OK})
		}
	}
	return out
}

// TestCell is one listed test of one task for one agent, over the
// trials whose last attempt was graded: how often it held. Every
// fail-to-pass test has a cell; a pass-to-pass test has one only when it
// failed in some trial, so that a task with hundreds of them lists those
// that tell something.
type TestCell struct {
	Task    string `json:"task"`
	Agent   string `json:"agent"`
	Test    string `json:"test"`
	List    string `json:"list"`
	Graded  int    `json:"graded"` // trials whose last attempt graded it
	Held    int    `json:"held"`
	Missing int    `json:"missing"` // of the failures, absent from the test report
}

// testAcc gathers TestCells in the order the trials first name them.
type testAcc struct {
	cells map[[3]string]*TestCell
	order [][3]string
}

func (a *testAcc) add(task, agent string, tests []AttemptTest) {
	if a.cells == nil {
		a.cells = map[[3]string]*TestCell{}
	}
	for _, t := range tests {
		k := [3]string{task, agent, t.List + "\x00" + t.ID}
		c := a.cells[k]
		if c == nil {
			c = &TestCell{Task: task, Agent: agent, Test: t.ID, List: t.List}
			a.cells[k] = c
			a.order = append(a.order, k)
		}
		c.Graded++
		switch {
		case t.OK:
			c.Held++
		case t.Outcome == "missing":
			c.Missing++
		}
	}
}

// list is the cells worth showing: fail-to-pass tests, and pass-to-pass
// tests that broke at least once; by task, test list, test and agent.
func (a *testAcc) list() []TestCell {
	out := []TestCell{}
	for _, k := range a.order {
		c := a.cells[k]
		if c.List == ListFailToPass || c.Held < c.Graded {
			out = append(out, *c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.Task != y.Task {
			return x.Task < y.Task
		}
		if x.List != y.List {
			return x.List < y.List
		}
		if x.Test != y.Test {
			return x.Test < y.Test
		}
		return x.Agent < y.Agent
	})
	return out
}
