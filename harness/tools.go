package harness

import (
	"context"
	"os"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/step/warm"
	"github.com/cto-harness/cto-harness/harness/toolenv"
)

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
		Overlay: true, SourceManifest: r.before.Manifest,
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
