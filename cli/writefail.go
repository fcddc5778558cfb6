package cli

import (
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
)

// warnWriteFailures puts an evidence write failure (a full disk, say, and
// what the harness removed to free space) on stderr even with --json, where
// an operator or CI log sees it.
func warnWriteFailures(env *Env, rep *ctoharness.Report) {
	for _, b := range rep.Blockers {
		if b.Code == ctoharness.BlockArtifactWriteFailed {
			fmt.Fprintf(env.Stderr, "cto-harness: %s at %s: %s\n", term(b.Code), term(b.Step), term(b.Message))
		}
	}
}
