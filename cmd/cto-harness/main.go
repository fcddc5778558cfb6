// Command cto-harness runs and validates staged proof routes for a coding
// agent working on a copy of a local git repository.
package main

import (
	"os"
	"runtime/debug"

	"github.com/cto-harness/cto-harness/cli"
	"github.com/cto-harness/cto-harness/harness"
)

func main() {
	// The collector's soft target (harness.MemoryLimit); GOMEMLIMIT, when
	// set, wins.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(harness.MemoryLimit)
	}
	ctx, stop := cli.SignalContext()
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
