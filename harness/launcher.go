package harness

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/warm"
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
	return launch.New(launch.Input{SelfExe: o.SelfExe, Unsandboxed: o.Unsandboxed, Probe: o.SandboxProbe, Trials: o.ViewTrials, TrialsRoot: o.ViewTrialsRoot,
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

// tools is what the config's toolchains and variables give cmd (package
// harness/step/warm); the gate's check holds for every later call.
func tools(o Options, cmd egress.Command) (toolenv.Set, error) {
	return warm.Tools(o.Config, cmd, o.Getenv)
}

// checkTools refuses, at the gate, a run whose toolchains, variables or
// caches cannot be given to every command, and pins the harness's
// environment to the caches it found. Finding them is not the run's to
// cancel: an interrupt is seen by the step after the gate.
func (r *run) checkTools(ctx context.Context) {
	c, err := warm.New(context.WithoutCancel(ctx), warm.Input{Config: r.o.Config, Getenv: r.o.Getenv,
		Source: r.o.Source, RunsDir: r.o.RunsDir, Unsandboxed: r.o.Unsandboxed})
	if err != nil {
		r.BlockErr(err, ctoharness.StepGate)
		return
	}
	r.caches = c
	r.o.Getenv = c.Getenv()
}

// toolEnv is env with cmd's toolchains, variables and warm caches in it;
// the gate has checked that they resolve.
func (r *run) toolEnv(cmd egress.Command, env []string) []string {
	return r.caches.Env(cmd, env, r.netAllowed(cmd))
}

// netAllowed says whether cmd's allowlist lets it reach a host (none
// without an allowlist in force).
func (r *run) netAllowed(cmd egress.Command) func(host string) bool {
	if a := r.launcher.NetAllowed(cmd); a != nil {
		return a
	}
	return func(string) bool { return false }
}

// ecoRecord is the caches' record for the gate's event ({} when the gate
// refused the run: then nothing is asked of the host's tools).
func (r *run) ecoRecord() map[string]any {
	if !r.OK() || r.caches == nil {
		return map[string]any{}
	}
	return r.caches.Record()
}

// startKeepGo starts the kept Go build cache's warm-up of the baseline
// (package harness/step/warm) beside Case, with the verification's
// sandbox as this run builds it.
func (r *run) startKeepGo(ctx context.Context, own record) *warm.Warming {
	co := checkout.Input{SourceRoot: r.repo.Root, BaselineTime: own.BaselineAt, Tracer: r.Trace, Getenv: r.o.Getenv, History: own.History, Base: own.Base,
		Overlay: true, SourceProof: r.before,
		Store: own.Store, Baseline: r.Report.Commits.BaselineCommit, Result: r.Report.Commits.BaselineCommit, ResultTime: own.BaselineAt}
	return r.caches.StartKeep(ctx, r.Sink, warm.Keep{RunsDir: r.o.RunsDir, Workspace: r.Report.RuntimeWorkspaceRoot,
		BaselineTree: r.Report.Commits.BaselineTree, Command: r.spec.Verification.Command,
		Timeout: time.Duration(r.spec.Verification.TimeoutSeconds) * time.Second, Profile: r.profile, AllowDangerous: r.o.AllowDangerous,
		Checkout: co, RepoRoot: r.repo.Root, Allowed: r.netAllowed(egress.CommandVerify),
		Sandbox: func() (sandbox.Policy, error) {
			v, _, err := r.planView(true, []string{"/bin/sh"})
			if err != nil {
				return sandbox.Policy{}, err
			}
			pol := r.policy(true)
			pol.View = v
			return pol, nil
		},
		Launch: func(pol sandbox.Policy, argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
			launch, attr, pf, err := sandbox.Command(r.o.SelfExe, pol, argv)
			return launch, attr, []*os.File{pf}, err
		},
		RemoveTree: RemoveTree})
}
