package harness

import (
	"context"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/step/prescan"
)

// prescan refuses, before Case, a verification the scanner would refuse
// after it whatever Case did (package prescan): with the verification's
// own policy (its network allowlist included), on the baseline Case
// starts from.
func (r *run) prescan(ctx context.Context, fixtureDir string) bool {
	if r.Report.Backend != ctoharness.BackendCase {
		return true
	}
	_, scratch := r.roots(true)
	_, pol := r.verifyEnv(egress.CommandVerify, fixtureDir, scratch)
	b, _, err := prescan.Check(ctx, prescan.Input{Command: r.spec.Verification.Command, Dir: fixtureDir, Policy: pol, Allowed: r.spec.AllowedPaths,
		Setup: r.spec.Setup != nil, Hidden: r.spec.HiddenTests != ""})
	if err != nil || b == nil {
		return true // a cancelled scan: the run's own interrupt handling ends it
	}
	r.Block(*b)
	return false
}
