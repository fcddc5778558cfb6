package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/proof"
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
	rep := newReport(o, runID, nonce, prof, workspace, runDir, now)
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

// usable refuses a request nothing can be run for (ErrUsage: nothing is
// written), and returns the execution profile it names.
func (o *Options) usable() (profile.Policy, error) {
	if err := o.defaults(); err != nil {
		return profile.Policy{}, err
	}
	if _, err := gates.Lookup(o.Stage); err != nil {
		return profile.Policy{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if o.Lane != ctoharness.LaneFake && o.Lane != ctoharness.LaneReal {
		return profile.Policy{}, fmt.Errorf("%w: unknown lane %q; use fake or real", ErrUsage, o.Lane)
	}
	if err := o.checkFault(); err != nil {
		return profile.Policy{}, err
	}
	if o.Agent.Name != "" && o.Lane != ctoharness.LaneReal {
		return profile.Policy{}, fmt.Errorf("%w: an agent (%s) runs on the real lane, not %q", ErrUsage, o.Agent.Name, o.Lane)
	}
	if err := o.checkNet(); err != nil {
		return profile.Policy{}, err
	}
	prof, err := o.lookupProfile()
	if err != nil {
		return profile.Policy{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return prof, runsDirOutsideSource(o.RunsDir, o.Source)
}

// newReport is the report a run starts from: every list empty rather than
// null, and the verification not reached.
func newReport(o Options, runID, nonce string, prof profile.Policy, workspace, runDir string, now time.Time) *ctoharness.Report {
	return &ctoharness.Report{
		SchemaVersion:        ctoharness.SchemaVersion,
		RunID:                runID,
		Stage:                o.Stage,
		CaseLane:             ctoharness.LaneNone,
		RuntimeWorkspaceRoot: workspace,
		RunArtifactDir:       runDir,
		Policy: ctoharness.Policy{OwnedSources: nonNil(o.Config.OwnedSources), TargetRoots: nonNil(o.Config.TargetRoots),
			ExternalRoots: nonNil(o.Config.ExternalRoots)},
		AllowedPaths: []string{},
		ChangedFiles: []ctoharness.ChangedFile{},
		Blockers:     []ctoharness.Blocker{},
		Case:         ctoharness.CaseRecord{Argv: []string{}, EnvKeys: []string{}},
		Tests: ctoharness.TestsRecord{Classification: ctoharness.TestNotRun, Reason: "the run did not reach verification", LogPath: evidence.TestLog,
			Profile: string(prof.Name), Findings: []ctoharness.ScanFinding{}, Scripts: []string{}},
		Profile:        string(prof.Name),
		Sandbox:        ctoharness.SandboxRecord{Mechanisms: []string{}, WritableRoots: []string{}, ReadOnlyRoots: []string{}, EnvAllowlist: []string{}},
		Freshness:      ctoharness.Freshness{RunID: runID, Nonce: nonce, StartedAt: now, HarnessVersion: ctoharness.Version},
		FaultInjection: o.Fault,
		Trial:          o.Trial,
	}
}

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
	before, clean := proof.Before(ctx, r.Sink, proof.BeforeInput{Input: r.proofInput(), Rev: workcopy.BaseRev(r.o.Rev, r.spec), TaskCheck: r.o.TaskCheck})
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
	return workcopy.Input{Repo: r.repo, Spec: r.spec, SourceManifest: r.before.Manifest, CheckoutDir: work,
		Unsandboxed: r.o.Unsandboxed, KeepWork: r.o.KeepWork, DirtyStart: r.o.Fault == FaultFixtureDirtyStart,
		Allowed: r.o.AllowedCheck, Getenv: r.o.Getenv, Progress: r.o.Progress,
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

// runsDirOutsideSource refuses a runs directory inside the source: the run
// would then write into the repository it must never change.
func runsDirOutsideSource(runsDir, src string) error {
	if src == "" {
		return nil
	}
	absSrc, err := filepath.Abs(src)
	if err != nil {
		return fmt.Errorf("%w: source %q: %v", ErrUsage, src, err)
	}
	candidates := []string{runsDir}
	if real, err := evalExisting(runsDir); err == nil {
		candidates = append(candidates, real)
	}
	for _, c := range candidates {
		if c == absSrc || strings.HasPrefix(c, absSrc+string(filepath.Separator)) {
			return fmt.Errorf("%w: the runs directory %s is inside the source %s; the harness never writes to a source, so pass --runs-dir outside it", ErrUsage, runsDir, absSrc)
		}
	}
	return nil
}

// evalExisting resolves symlinks in the longest existing prefix of p.
func evalExisting(p string) (string, error) {
	rest := ""
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest), nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", os.ErrNotExist
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
