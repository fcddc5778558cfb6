// Command validate-case-stage3 is `cto-harness validate-stage 3`, as a binary
// of its own for CI.
package main

import (
	"os"

	"github.com/cto-harness/cto-harness/cli"
)

func main() {
	ctx, stop := cli.SignalContext()
	code := cli.MainStage3(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
