// Command cto-harness runs and validates staged proof routes for a coding
// agent working on a copy of a local git repository.
package main

import (
	"os"
	"runtime/debug"

	"github.com/cto-harness/cto-harness/cli"
)

// memoryLimit is the collector's soft target: what a run holds is far
// less, and what it reads and lets go (a long history's trees, a copy's
// buffers) would otherwise grow the heap to twice its peak before it is
// collected. GOMEMLIMIT, when set, wins.
const memoryLimit = 192 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	ctx, stop := cli.SignalContext()
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
