package caserun

import (
	"fmt"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
)

// Ended is everything the judgement of Case's end reads.
type Ended struct {
	Out backend.Outcome
	// Err is backend.Run's error: a start failure, or a log that could not be written.
	Err error
	// WatchErr is the seccomp watch's failure, if it failed.
	WatchErr error
	// Interrupted says the run was stopped while Case ran: how Case ended
	// then says nothing about Case.
	Interrupted bool
	// Sandboxed says Case ran under the sandbox launcher (else supervised).
	Sandboxed bool
	// Profile is the execution profile's name and event limits.
	Profile   string
	MaxEvents int
	MaxBytes  int64
	// TimeoutSeconds is the contract's Case timeout.
	TimeoutSeconds int
	// BudgetStop is Watch.BudgetStop.
	BudgetStop string
	// ModelStopped and ModelError are a coding agent's verdicts (nil for a
	// plain Case): the meter stopped it for a failing provider, or its
	// stream reported a model error.
	ModelStopped, ModelError *ctoharness.Blocker
}

// Verdict is the judgement, in the order the pipeline records it.
type Verdict struct {
	// WriteErr is a log that could not be written (an evidence-write failure).
	WriteErr error
	// StartErr is Case that could not be run at all; nothing else is judged.
	StartErr error
	// Blockers are the rest, in order.
	Blockers []ctoharness.Blocker
}

// Judge decides what Case's end means for the run. The first stop that
// explains the end (a limit, the model, the budget, the sandbox, the
// timeout) ends the judgement; an exit status and the stream's breaches of
// the adapter contract are all recorded.
func Judge(e Ended) Verdict {
	var v Verdict
	out := e.Out
	if e.Interrupted {
		if e.Err != nil && (out.TimedOut || out.ExitCode != nil) {
			v.WriteErr = e.Err
		}
		return v
	}
	if e.Err != nil && !out.TimedOut && out.ExitCode == nil {
		v.StartErr = ctoharness.Block(ctoharness.BlockCaseStartFailed, ctoharness.StepCase, e.Err, "Case could not be run")
		return v
	}
	v.WriteErr = e.Err
	if e.WatchErr != nil {
		v.add(ctoharness.BlockSandboxUnavailable, "Case's seccomp watch failed, so its command count and network record cannot be trusted: %v", e.WatchErr)
	}
	if stop, ok := e.stopped(); ok {
		if stop != nil {
			v.Blockers = append(v.Blockers, *stop)
		}
		return v
	}
	if e.ModelError != nil {
		v.Blockers = append(v.Blockers, *e.ModelError)
		return v
	}
	v.Blockers = append(v.Blockers, e.contract()...)
	return v
}

// stopped is the blocker of a stop that explains Case's end, if one does.
func (e Ended) stopped() (*ctoharness.Blocker, bool) {
	out := e.Out
	switch {
	case out.Usage.Hit != "":
		return block(ctoharness.BlockCaseEventLimit, "Case was stopped: it wrote %s, the %s profile's limit (%d events, %d bytes); %d further event(s) were dropped",
			out.Usage.Hit, e.Profile, e.MaxEvents, e.MaxBytes, out.Usage.Dropped), true
	case e.ModelStopped != nil:
		return e.ModelStopped, true
	case e.BudgetStop != "":
		return block(ctoharness.BlockBudgetExceeded, "Case was stopped: %s", e.BudgetStop), true
	}
	code := -1 // killed: no status
	if out.ExitCode != nil {
		code = *out.ExitCode
	}
	if e.Sandboxed {
		if msg, ok := sandbox.IsSetupFailure(code, out.StderrInline); ok {
			return block(ctoharness.BlockSandboxUnavailable, "%s", msg), true
		}
		if msg, ok := sandbox.IsStartFailure(code, out.StderrInline); ok {
			return block(ctoharness.BlockCaseStartFailed, "%s", msg), true
		}
	} else if msg, ok := supervise.IsSetupFailure(code, out.StderrInline); ok {
		return block(ctoharness.BlockCaseStartFailed, "%s", msg), true
	}
	if out.TimedOut {
		return block(ctoharness.BlockCaseTimeout, "Case did not finish within %ds and was killed with its whole process group", e.TimeoutSeconds), true
	}
	return nil, false
}

// contract is Case's exit status and its stream's breaches of the adapter
// contract (docs/case-adapter.md), every one of them.
func (e Ended) contract() []ctoharness.Blocker {
	out := e.Out
	var v Verdict
	switch {
	case out.ExitCode == nil:
		v.add(ctoharness.BlockCaseExitNonZero, "Case was killed by %s", out.Signal)
	case *out.ExitCode != 0:
		v.add(ctoharness.BlockCaseExitNonZero, "Case exited with status %d; see %s", *out.ExitCode, evidence.CaseStderr)
	}
	if out.MalformedN > 0 {
		v.add(ctoharness.BlockCaseEventMalformed, "Case wrote %d stdout line(s) that are not events (%s); stdout is reserved for JSON events as docs/case-adapter.md defines them, use stderr for logs; the lines are in %s",
			out.MalformedN, strings.Join(out.Malformed, "; "), evidence.CaseStdout)
	}
	if len(out.OrderViolations) > 0 {
		v.add(ctoharness.BlockCaseEventOrder, "Case's events break the required order: %s; see docs/case-adapter.md", strings.Join(out.OrderViolations, "; "))
	}
	if miss := out.Missing(); len(miss) > 0 {
		names := make([]string, len(miss))
		for i, m := range miss {
			names[i] = string(m)
		}
		v.add(ctoharness.BlockMissingRequiredEvent, "Case never emitted the required event(s) %s; see docs/case-adapter.md", strings.Join(names, ", "))
	}
	return v.Blockers
}

func block(code ctoharness.BlockerCode, format string, a ...any) *ctoharness.Blocker {
	return &ctoharness.Blocker{Code: code, Step: ctoharness.StepCase, Message: fmt.Sprintf(format, a...)}
}

func (v *Verdict) add(code ctoharness.BlockerCode, format string, a ...any) {
	v.Blockers = append(v.Blockers, *block(code, format, a...))
}
