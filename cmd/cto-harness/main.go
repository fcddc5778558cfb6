// Command cto-harness runs and validates staged proof routes for a coding
// agent working on a copy of a local git repository.
package main

import (
	"os"

	"github.com/cto-harness/cto-harness/cli"
)

func main() {
	ctx, stop := cli.SignalContext()
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
