package harness

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/runclock"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/snapshot"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/proof"
	"github.com/cto-harness/cto-harness/harness/step/report"
	"github.com/cto-harness/cto-harness/harness/step/warm"
	"github.com/cto-harness/cto-harness/harness/step/workcopy"
	"github.com/cto-harness/cto-harness/harness/task"
)

// ErrUsage marks a request that cannot start a run at all (nothing is written).
var ErrUsage = errors.New("invalid run request")

// run is the state one run passes from step to step.
type run struct {
	*runsink.Sink // where every step's evidence goes
	o             Options
	stage         gates.Stage
	spec          task.Spec
	scratch       string            // Case's HOME/TMPDIR/caches, inside runtime_workspace_root
	scratchDirs   *workcopy.Scratch // made on first need (package workcopy)
	repo          source.Repo
	before        *ctoharness.SourceProof
	contract      *task.Contract
	profile       profile.Policy          // the execution profile's limits
	agent         *agentcase.Agent        // set at the gate when a coding agent runs as Case
	adv           *adversary.Agent        // set at the contract when the task's adversary is a coding agent
	caches        *warm.Caches            // the toolchains and warm caches the gate offers (tools.go)
	prev          *gates.Record           // the previous stage's record the gate accepted
	interrupt     context.CancelCauseFunc // the interrupt_during_case fault (interrupt.go)
	launcher      *launch.Launcher        // every command's sandbox, view and network (package launch)
}

// Run performs one run and returns its report. The error is non-nil only when
// the request is unusable (ErrUsage: nothing written) or evidence could not be
// written (wrapping evidence.ErrWrite); a blocked run is a report, not an error.
func Run(ctx context.Context, o Options) (*ctoharness.Report, error) {
	prof, err := o.usable()
	if err != nil {
		return nil, err
	}
	// Every time of the run is on one monotonic timeline (package
	// runclock): a wall clock stepped back mid-run cannot put an event
	// before the one it follows. finish records the jumps it saw.
	clock := runclock.New(o.Clock)
	o.Clock = clock.Now
	now := o.Clock().UTC()
	runID, nonce := o.NewRunID(o.Stage, now), o.NewNonce()
	r := &run{o: o, profile: prof}
	tr := evidence.NewTrace(runID)
	runDir := filepath.Join(o.RunsDir, runID)
	workspace := filepath.Join(o.RunsDir, runlist.WorkDir, runID)
	r.scratch = filepath.Join(workspace, "scratch")
	r.scratchDirs = workcopy.NewScratch(r.scratch, tr)
	dir, err := evidence.Create(ctx, runDir, o.Schemas, tr)
	if err != nil {
		return nil, err
	}
	if o.Sync != nil {
		dir.WithSync(o.Sync)
	}
	if a, ok := strings.CutPrefix(o.Fault, FaultArtifactPrefix); ok {
		dir.WithFault(a)
	}
	if a, ok := strings.CutPrefix(o.Fault, FaultDiskFullPrefix); ok {
		dir.WithNoSpaceFault(a)
	}
	ctx = r.injectInterrupt(ctx)
	rep := report.New(report.Start{RunID: runID, Nonce: nonce, Stage: o.Stage, Profile: string(prof.Name), Workspace: workspace, RunDir: runDir,
		StartedAt: now, Fault: o.Fault, Trial: o.Trial, Policy: ctoharness.Policy{OwnedSources: nonNil(o.Config.OwnedSources),
			TargetRoots: nonNil(o.Config.TargetRoots), ExternalRoots: nonNil(o.Config.ExternalRoots)}})
	r.Sink = runsink.New(runID, nonce, dir, tr, rep, func() time.Time { return r.o.Clock() }, runsink.StopCause(ctx))
	r.launcher = r.newLauncher()
	r.SetBulk(func() []string {
		// An overlay fixture is unmounted by now; its layer, which holds
		// what Case wrote, is in the workspace (package workcopy).
		verifyDir, _ := r.roots(true)
		return []string{dir.Path(evidence.FixtureDir), workcopy.Layer(workspace), r.scratch, filepath.Dir(verifyDir)}
	})
	if r.Events, err = dir.OpenEvents(runID, nonce, r.Clock); err != nil {
		r.BlockWrite(err, ctoharness.StepGate)
	}
	started := map[string]any{"stage": o.Stage, "nonce": nonce,
		"harness_version": ctoharness.Version, "lane": string(o.Lane)}
	if o.Trial != nil {
		started["trial"] = o.Trial
	}
	r.Emit(ctx, ctoharness.EvRunStarted, started)

	// Held until the process ends: `runs prune` detaches the mounts of
	// runs nobody holds (killed ones), never of this one.
	if release, err := runlist.Hold(runDir); err != nil {
		r.Block(ctoharness.AsBlocker(ctoharness.Block(ctoharness.BlockInternal, ctoharness.StepGate, err, "the run cannot be marked in progress"), ctoharness.StepGate))
	} else {
		defer release()
	}
	r.steps(ctx)
	r.agent.DropKeyedStore(RemoveTree)
	res, err := r.finish(proofCtx(ctx), clock.Jumps)
	r.leaveWork()
	return res, err
}

// beforeAside is the file of the run's workspace that holds the packed
// before-proof until the after-proof.
const beforeAside = "source-before.packed"

// steps runs the pipeline. Once the source has been proven, the after-proof
// always runs; once the fixture exists, collection and the clean-end proof
// always run; the change and verification run only while nothing is blocked.
func (r *run) steps(ctx context.Context) {
	defer r.Interrupted()
	if !r.gate(ctx) {
		return
	}
	if !r.classify(ctx) {
		return
	}
	before, clean := proof.Before(ctx, r.Sink, proof.BeforeInput{Input: r.proofInput(), Rev: workcopy.BaseRev(r.o.Rev, r.spec), TaskCheck: r.o.TaskCheck,
		Aside: filepath.Join(r.Report.RuntimeWorkspaceRoot, beforeAside)})
	if before == nil {
		return
	}
	r.before = before
	defer proof.After(proofCtx(ctx), r.Sink, r.proofInput(), before)
	if !clean {
		return
	}
	rec, ok := workcopy.Make(ctx, r.Sink, r.copyInput())
	// Whatever happens, nothing may still write once the report is; a copy
	// the verification has not used by now is not needed.
	defer rec.Release()
	if !ok {
		return
	}
	var col *collected
	defer func() { rec.CleanEnd(proofCtx(ctx), r.Sink, col) }()
	if !rec.CleanStart(ctx, r.Sink) || !r.writeContract(ctx, rec.Path) || !r.startEgress(ctx) || !r.prescan(ctx, rec.Path) {
		r.skipVerify("a blocker was raised before the change step")
		return
	}
	// The kept build cache's warm-up needs only the baseline: it runs
	// beside Case, and the verification waits for it.
	kept := r.startKeepGo(ctx, rec)
	defer func() { r.Report.Sandbox.KeptBuildCache = kept.Stop() }()
	r.change(ctx, rec.Path)
	col = rec.Collect(proofCtx(ctx), r.Sink)
	r.agent.AfterCollect(rec.Path)
	r.verify(ctx, rec, col, kept)
	r.adversarial(ctx, rec)
}

// record is the run's work copy (package workcopy), as the verification,
// baseline and adversary steps read it; collected is its collect's result.
type (
	record    = workcopy.Copy
	collected = workcopy.Collected
)

// copyInput is what the work copy is made from: the proven source, the
// task and the options that choose the copy, and the launcher told where
// Case works once it exists.
func (r *run) copyInput() workcopy.Input {
	work, _ := r.roots(true)
	return workcopy.Input{Repo: r.repo, Spec: r.spec, SourceProof: r.before, CheckoutDir: work,
		Unsandboxed: r.o.Unsandboxed, KeepWork: r.o.KeepWork, DirtyStart: r.o.Fault == FaultFixtureDirtyStart,
		Allowed: r.o.AllowedCheck, Getenv: r.o.Getenv, Progress: r.o.Progress,
		Snapshots: snapshot.Root(r.o.RunsDir), Signer: r.o.Signing.Signer,
		Hooks: workcopy.Hooks{Made: r.launcher.SetFixture}}
}

// UnsafeNames lists the changed files whose names no honest change needs
// (workcopy.UnsafeNames); the validator checks a run's report with it.
func UnsafeNames(changed []ctoharness.ChangedFile) []string { return workcopy.UnsafeNames(changed) }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// finish stops what the steps still hold (the egress, the agents' meters,
// the progress line) and closes the run (package report).
func (r *run) finish(ctx context.Context, jumps func() []ctoharness.ClockJump) (*ctoharness.Report, error) {
	r.SetStep(ctoharness.StepReport)
	r.launcher.StopEgress()
	r.agent.Close()
	r.adv.Close()
	r.FreeSpace()
	r.o.Progress.Close()
	if r.Report.Tests.Classification == "" {
		r.skipVerify("the run did not reach verification")
	}
	o := r.o
	return report.Finish(ctx, r.Sink, report.Input{
		Qualifiable: o.Scenario == "pass" && o.Fault == "" && o.AllowedCheck == nil && o.Sync == nil && !o.Unsandboxed && r.profile.Qualifies && !o.AllowDangerous,
		Unsandboxed: o.Unsandboxed, RunsDir: o.RunsDir, Signing: o.Signing, Schemas: o.Schemas, Getenv: o.Getenv, Clock: o.Clock,
		SelfExe: o.SelfExe, Previous: r.prev, Jumps: jumps,
		Redact:       func(names ...string) { agentcase.Sweep(r.Sink, r.secrets(), names...) },
		RedactReport: func(rep *ctoharness.Report) { agentcase.RedactReport(rep, r.secrets()) }})
}

// leaveWork deals with the run's workspace (RUNS_DIR/work/<id>: Case's
// scratch, an agent's caches and session files among them, and the
// verification checkout) and the fixture copy (RUN_DIR/fixture)
// once the evidence is written: removed, unless the operator asked to keep
// it, and then scrubbed of the agent's key, which session files hold in
// plain text whenever a tool printed it. The evidence never needs the
// workspace: the store in the run directory holds the result.
func (r *run) leaveWork() {
	// The fixture copy lives in the run directory (fixture/), outside the
	// artifacts; it goes with the workspace (when the copy never made it,
	// there is nothing there).
	for _, root := range []string{r.Report.RuntimeWorkspaceRoot, r.Dir.Path(evidence.FixtureDir)} {
		if root == "" {
			continue
		}
		if !r.o.KeepWork {
			_ = RemoveTree(root)
			continue
		}
		r.agent.Scrub(root) // Case's world: opened beneath root, never through a link
	}
}

// RemoveTree removes p and everything under it, also trees with read-only
// directories (runlist.RemoveTree).
func RemoveTree(p string) error { return runlist.RemoveTree(p) }

// A SIGTERM or SIGINT reaches a run as a cancelled context. It stops Case (or
// the verification command) and every step still to come that is optional,
// but never the proofs: collection, the clean-end proof, the source
// after-proof, the non-mutation comparison and the report run on a context
// that ignores the cancellation, so an interrupted run still says truthfully
// whether the source changed, and is blocked with INTERRUPTED.

// proofCtx is the context for the steps that must finish whatever happened.
func proofCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// injectInterrupt arms the interrupt_during_case fault: the failure matrix
// cancels the run the way a signal would, once Case has started.
func (r *run) injectInterrupt(ctx context.Context) context.Context {
	if r.o.Fault != FaultInterruptCase {
		return ctx
	}
	ctx, r.interrupt = context.WithCancelCause(ctx)
	return ctx
}

// caseStarted fires the injected interrupt, if armed.
func (r *run) caseStarted() {
	if r.interrupt != nil {
		r.interrupt(errors.New("interrupt injected by the " + FaultInterruptCase + " fault"))
	}
}
