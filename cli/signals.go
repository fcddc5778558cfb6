package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext is cancelled by the first SIGTERM or SIGINT, with the signal
// as its cause: a run then stops Case, still takes its proofs and writes its
// evidence (blocked with INTERRUPTED), and validation stops. A second signal
// ends the process at once, as if there were no handler (the evidence of a
// run stopped that way is incomplete; Case still dies with the harness).
func SignalContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // restore the default action for the next signal
	}()
	return ctx, stop
}
