package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cto-harness/cto-harness/harness/progress"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
)

// terminalConfirm is the question asked before a task's adversary's tests
// run, when the harness has a person at a terminal (stdin and stderr both
// one); nil otherwise, so that a run with nobody to ask is refused before
// Case rather than left waiting.
func terminalConfirm(env *Env) func(context.Context, adversary.Summary) (bool, error) {
	in, ok := env.Stdin.(*os.File)
	if !ok || !progress.IsTerminal(in) || !progress.IsTerminal(env.Stderr) {
		return nil
	}
	return askOn(in, env.Stderr)
}

// askOn shows the summary on out and reads the answer from in: "y" or
// "yes" lets the tests run, anything else does not. An interrupt while it
// waits is an error, never a yes.
func askOn(in io.Reader, out io.Writer) func(context.Context, adversary.Summary) (bool, error) {
	lines := make(chan string)
	errs := make(chan error, 1)
	r := bufio.NewReader(in)
	return func(ctx context.Context, s adversary.Summary) (bool, error) {
		fmt.Fprintf(out, "\n%sRun them? [y/N] ", s.Text())
		go func() {
			l, err := r.ReadString('\n')
			if err != nil && l == "" {
				errs <- fmt.Errorf("no answer was read from the terminal: %w", err)
				return
			}
			lines <- l
		}()
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("stopped while waiting for the answer: %w", ctx.Err())
		case err := <-errs:
			return false, err
		case l := <-lines:
			a := strings.ToLower(strings.TrimSpace(l))
			return a == "y" || a == "yes", nil
		}
	}
}
