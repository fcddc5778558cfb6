package gates

import (
	"context"
	"strconv"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
)

// Environment variables that open the case backend.
const (
	EnvAllowCase = "CTO_HARNESS_ALLOW_CASE"
	EnvCaseStage = "CTO_HARNESS_CASE_STAGE"
)

// Request is what a run asks the gate for.
type Request struct {
	Stage   int
	Getenv  func(string) string // injected so tests and validators never touch the process environment
	Records RecordCheck
	// Signing holds the public keys a previous stage's record and its run
	// must be signed by. Without one the record is refused, unless signing
	// is explicitly disabled (Signing.Disabled).
	Signing attest.Keys
}

// Decision is the gate's answer: the stage, the previous stage's record when
// one was required, and every blocker found (empty means allowed).
type Decision struct {
	Stage    Stage
	Previous *Record
	Blockers []ctoharness.Blocker
}

// Allowed reports whether the run may proceed.
func (d Decision) Allowed() bool { return len(d.Blockers) == 0 }

// Check applies the ladder. It collects every failing gate rather than the
// first, so that one run reports all that is missing.
func Check(ctx context.Context, req Request) Decision {
	st, err := Lookup(req.Stage)
	if err != nil {
		return Decision{Blockers: []ctoharness.Blocker{ctoharness.AsBlocker(err, ctoharness.StepGate)}}
	}
	d := Decision{Stage: st}
	add := func(err error) { d.Blockers = append(d.Blockers, ctoharness.AsBlocker(err, ctoharness.StepGate)) }
	if !st.Approved {
		add(ctoharness.Block(ctoharness.BlockStageNotApproved, ctoharness.StepGate, nil,
			"%s is not approved: only stages 1 to 3 may run", st))
		return d
	}
	if st.Backend == ctoharness.BackendCase {
		if v := req.Getenv(EnvAllowCase); v != "1" {
			add(ctoharness.Block(ctoharness.BlockAllowCaseMissing, ctoharness.StepGate, nil,
				"the case backend is disabled: set %s=1 to allow it (got %q)", EnvAllowCase, v))
		}
		switch v := req.Getenv(EnvCaseStage); {
		case v == "":
			add(ctoharness.Block(ctoharness.BlockCaseStageMissing, ctoharness.StepGate, nil,
				"%s is not set: set %s=%d to run %s", EnvCaseStage, EnvCaseStage, st.N, st))
		case v != strconv.Itoa(st.N):
			add(ctoharness.Block(ctoharness.BlockCaseStageMismatch, ctoharness.StepGate, nil,
				"%s=%q but %s was requested; set %s=%d", EnvCaseStage, v, st, EnvCaseStage, st.N))
		}
	}
	if st.N >= 2 {
		rec, err := req.Records.Verify(ctx, st.N-1)
		if err != nil {
			add(err)
		} else {
			d.Previous = &rec
		}
	}
	if err := req.recordTrusted(ctx, d.Previous); err != nil {
		add(err)
	}
	return d
}
