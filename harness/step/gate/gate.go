// Package gate is a run's first step: the stage's gate (package gates:
// the enabling variables, the previous stage's record), then what the
// other steps must find before anything is copied (a coding agent and its
// meter, the toolchains and warm caches, what the sandbox can enforce, a
// Case command), each asked through a hook so that the step that owns it
// keeps its state. Its one event, gate.checked, records the decision.
package gate

import (
	"context"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/runsink"
)

// Input is the gate's request and the other steps' checks.
type Input struct {
	Request gates.Request
	Lane    ctoharness.Lane
	Agent   bool // a coding agent runs as Case
	Hooks   Hooks
}

// Hooks are the checks other steps make at the gate, in this order; each
// blocks the run through the sink when it fails.
type Hooks struct {
	// Agent checks the coding agent (before the probe: the agent adds to
	// what the sandbox must allow).
	Agent func(ctx context.Context)
	// Tools finds the toolchains and warm caches.
	Tools func(ctx context.Context)
	// Probe asks what the sandbox can enforce.
	Probe func()
	// CaseCommand is the real lane's Case command ("" blocks the run).
	CaseCommand func() []string
	// WarmRecord is the warm caches' record for the event.
	WarmRecord func() map[string]any
}

// Passed is what the gate decided: the stage and the previous stage's
// record it accepted (nil for stage 1 or a refusal).
type Passed struct {
	Stage    gates.Stage
	Previous *gates.Record
}

// Run checks the gate; false means the run is blocked.
func Run(ctx context.Context, s *runsink.Sink, in Input) (Passed, bool) {
	s.SetStep(ctoharness.StepGate)
	d := gates.Check(ctx, in.Request)
	rep := s.Report
	rep.StageName = d.Stage.Name
	if rep.StageName == "" {
		rep.StageName = "unknown"
	}
	rep.Backend = d.Stage.Backend
	if rep.Backend == "" {
		rep.Backend = ctoharness.BackendCase
	}
	if rep.Backend == ctoharness.BackendCase {
		rep.CaseLane = in.Lane
	}
	for _, b := range d.Blockers {
		s.Block(b)
	}
	check(ctx, s, in)
	prev := map[string]any{}
	if d.Previous != nil {
		// The record's digest names exactly the record the gate trusted:
		// stage 3's validation orders this run after that record by it,
		// not by two processes' wall clocks.
		prev = map[string]any{"stage": d.Previous.Stage, "run_id": d.Previous.RunID, "validated_at": d.Previous.ValidatedAt,
			"record_digest": d.Previous.RecordDigest}
	}
	codes := []string{}
	for _, b := range rep.Blockers {
		codes = append(codes, string(b.Code))
	}
	s.Emit(ctx, ctoharness.EvGateChecked, map[string]any{"stage": in.Request.Stage, "allowed": s.OK(), "blockers": codes, "previous_stage_record": prev,
		"warm_caches": in.Hooks.WarmRecord()})
	return Passed{Stage: d.Stage, Previous: d.Previous}, s.OK()
}

// check asks the other steps' checks while nothing is blocked.
func check(ctx context.Context, s *runsink.Sink, in Input) {
	h := in.Hooks
	if s.OK() && in.Agent {
		h.Agent(ctx)
	}
	if s.OK() {
		h.Tools(ctx)
	}
	if s.OK() {
		h.Probe()
	}
	if s.OK() && s.Report.Backend == ctoharness.BackendCase && in.Lane == ctoharness.LaneReal && len(h.CaseCommand()) == 0 {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockCaseCommandMissing, Step: ctoharness.StepGate,
			Message: "the real lane needs a Case command: pass --case-cmd, set CTO_HARNESS_CASE_CMD, or set case_command in the config"})
	}
}
