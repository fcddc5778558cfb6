package gate

import (
	"context"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/runsink/runsinktest"
)

func newSink(t *testing.T) *runsink.Sink { return runsinktest.New(t, nil) }

// hooks records which of the other steps' checks the gate asked, in order.
func hooks(called *[]string, caseCmd []string) Hooks {
	return Hooks{
		Agent:       func(context.Context) { *called = append(*called, "agent") },
		Tools:       func(context.Context) { *called = append(*called, "tools") },
		Probe:       func() { *called = append(*called, "probe") },
		CaseCommand: func() []string { *called = append(*called, "case"); return caseCmd },
		WarmRecord:  func() map[string]any { return map[string]any{} },
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Stage 1 passes the gate, and every check of the other steps is asked,
// in order; the real lane without a Case command is refused.
func TestGateAsksTheOtherStepsInOrder(t *testing.T) {
	var called []string
	s := newSink(t)
	p, ok := Run(context.Background(), s, Input{Request: gates.Request{Stage: 1, Getenv: env(nil)}, Lane: ctoharness.LaneFake, Agent: true,
		Hooks: hooks(&called, nil)})
	if !ok || p.Stage.N != 1 || s.Report.StageName == "" || s.Report.Backend != ctoharness.BackendFake {
		t.Fatalf("stage 1: ok %v stage %+v report %q %q, blockers %+v", ok, p.Stage, s.Report.StageName, s.Report.Backend, s.Report.Blockers)
	}
	if got := strings.Join(called, ","); got != "agent,tools,probe" {
		t.Errorf("checks asked: %s, want agent,tools,probe (no Case command for the fake backend)", got)
	}

	called = nil
	s = newSink(t)
	_, ok = Run(context.Background(), s, Input{Request: gates.Request{Stage: 2, Getenv: env(map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "2"})},
		Lane: ctoharness.LaneReal, Hooks: hooks(&called, nil)})
	if ok || len(called) != 0 {
		t.Errorf("stage 2 without a stage-1 record: ok %v, checks asked %v (none should be: the gate already refused)", ok, called)
	}
}

// A real-lane Case run whose gate holds is refused without a Case command.
func TestGateRefusesARealLaneWithoutACommand(t *testing.T) {
	var called []string
	s := newSink(t)
	in := Input{Lane: ctoharness.LaneReal, Hooks: hooks(&called, nil)}
	s.Report.Backend = ctoharness.BackendCase
	check(context.Background(), s, in)
	if len(s.Report.Blockers) != 1 || s.Report.Blockers[0].Code != ctoharness.BlockCaseCommandMissing {
		t.Fatalf("blockers %+v, want CASE_COMMAND_MISSING", s.Report.Blockers)
	}
	s = newSink(t)
	s.Report.Backend = ctoharness.BackendCase
	check(context.Background(), s, Input{Lane: ctoharness.LaneReal, Hooks: hooks(&called, []string{"case"})})
	if len(s.Report.Blockers) != 0 {
		t.Errorf("with a command: blockers %+v", s.Report.Blockers)
	}
}
