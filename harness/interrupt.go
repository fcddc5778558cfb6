package harness

import (
	"context"
	"errors"
)

// A SIGTERM or SIGINT reaches a run as a cancelled context. It stops Case (or
// the verification command) and every step still to come that is optional,
// but never the proofs: collection, the clean-end proof, the source
// after-proof, the non-mutation comparison and the report run on a context
// that ignores the cancellation, so an interrupted run still says truthfully
// whether the source changed, and is blocked with INTERRUPTED.

// proofCtx is the context for the steps that must finish whatever happened.
func proofCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

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
