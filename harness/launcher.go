package harness

import (
	"context"
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/toolenv"
	"github.com/cto-harness/cto-harness/schemas"
)

// newLauncher is the run's launcher (package launch): what it needs from
// the options, and the hooks through which the toolchains, the warm caches
// and Case's scratch, which other steps own, join its views.
func (r *run) newLauncher() *launch.Launcher {
	o := r.o
	var signer string
	if s := o.Signing.Signer; s != nil {
		signer = s.File()
	}
	return launch.New(launch.Input{SelfExe: o.SelfExe, Unsandboxed: o.Unsandboxed, Probe: o.SandboxProbe, Trials: o.ViewTrials,
		Clock: o.Clock, ValidateNet: o.Schemas.Validator(schemas.NetworkRecord),
		NetLimits: egress.Limits{MaxConns: r.profile.NetConns, MaxBytes: r.profile.NetBytes},
		Config:    o.Config, SignerFile: signer, RunsDir: o.RunsDir,
		Workspace: r.Report.RuntimeWorkspaceRoot, Scratch: r.scratch,
		// The gate pins some of the environment (checkTools): read it as it is at each call.
		Getenv: func(k string) string { return r.o.Getenv(k) },
		Tools: func(cmd egress.Command) toolenv.Set {
			s, _ := tools(r.o, cmd) // checked at the gate
			return s
		},
		Warm: func(v *sandbox.View, verification bool, scratch string) error {
			work, _ := r.roots(verification)
			if err := r.caches.ShowGo(v, verification, work, scratch, r.Report.Sandbox.KeptBuildCache); err != nil {
				return err
			}
			return r.caches.ShowEco(v, scratch)
		},
		MakeScratch: r.scratchDirs.Make}, r.Sink)
}

// netGrants are the network endpoints o grants: the config's lists and the flags.
func netGrants(o Options) launch.Grants {
	return launch.Grants{Config: o.Config.Network, Case: o.AllowNetCase, Verify: o.AllowNetVerify, Setup: o.AllowNetSetup,
		Origin: o.AllowNetOrigin}
}

// checkNet refuses malformed --allow-net / --verify-allow-net values before
// anything is written.
func (o *Options) checkNet() error {
	for _, l := range [][]string{o.AllowNetCase, o.AllowNetVerify, o.AllowNetSetup} {
		for _, s := range l {
			if _, err := egress.ParseEndpoint(s); err != nil {
				return fmt.Errorf("%w: %v", ErrUsage, err)
			}
		}
	}
	return nil
}

// startEgress sets the run's network egress up (launch.Launcher.StartEgress);
// an agent adversary's meter is its only endpoint.
func (r *run) startEgress(ctx context.Context) bool {
	var meter string
	if r.adv != nil {
		meter = r.adv.Endpoint()
	}
	// The grants as they are now: a coding agent's endpoint joined them at the gate.
	return r.launcher.StartEgress(ctx, launch.Egress{Grants: netGrants(r.o), Meter: meter})
}

// roots are the directories a command works in and may write (launch.Launcher.Roots).
func (r *run) roots(verification bool) (work, scratch string) { return r.launcher.Roots(verification) }

// policy is what a command may touch (launch.Launcher.Policy).
func (r *run) policy(verification bool) sandbox.Policy { return r.launcher.Policy(verification) }

// planView assembles a view's lists (launch.Launcher.PlanView); the extra
// test runs and the warm-up change it to show their own checkout.
func (r *run) planView(verification bool, argv []string) (*sandbox.View, ctoharness.ViewRecord, error) {
	return r.launcher.PlanView(verification, argv)
}
