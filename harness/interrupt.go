package harness

import (
	"context"
	"errors"
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
)

// A SIGTERM or SIGINT reaches a run as a cancelled context. It stops Case (or
// the verification command) and every step still to come that is optional,
// but never the proofs: collection, the clean-end proof, the source
// after-proof, the non-mutation comparison and the report run on a context
// that ignores the cancellation, so an interrupted run still says truthfully
// whether the source changed, and is blocked with INTERRUPTED.

// proofCtx is the context for the steps that must finish whatever happened.
func proofCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// stopCause returns why ctx was cancelled, or nil while it is not.
func stopCause(ctx context.Context) func() error {
	return func() error {
		if ctx.Err() == nil {
			return nil
		}
		if c := context.Cause(ctx); c != nil {
			return c
		}
		return ctx.Err()
	}
}

// interrupted records INTERRUPTED (once) at the current step if the run was
// cancelled, and reports whether it was.
func (r *run) interrupted() bool {
	cause := r.stopped()
	if cause == nil {
		return false
	}
	for _, b := range r.rep.Blockers {
		if b.Code == ctoharness.BlockInterrupted {
			return true
		}
	}
	why := "the run was cancelled"
	if cause != context.Canceled { // a signal's cause also matches context.Canceled with errors.Is
		why = cause.Error()
	}
	after := "nothing had been copied yet"
	if r.before != nil {
		after = "what was running was stopped, and the fixture and source proofs were still taken"
	}
	r.block(ctoharness.Blocker{Code: ctoharness.BlockInterrupted, Step: r.cur,
		Message: fmt.Sprintf("interrupted during %s (%s); %s", r.cur, why, after)})
	return true
}

// cancelled reports whether err is the run's own cancellation rather than a
// failure of the step that returned it.
func (r *run) cancelled(err error) bool {
	return r.stopped() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// injectInterrupt arms the interrupt_during_case fault: the failure matrix
// cancels the run the way a signal would, once Case has started.
func (r *run) injectInterrupt(ctx context.Context) context.Context {
	if r.o.Fault != FaultInterruptCase {
		return ctx
	}
	ctx, r.interrupt = context.WithCancelCause(ctx)
	return ctx
}

// caseStarted fires the injected interrupt, if armed.
func (r *run) caseStarted() {
	if r.interrupt != nil {
		r.interrupt(errors.New("interrupt injected by the " + FaultInterruptCase + " fault"))
	}
}
