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
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/supervise"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// ErrUsage marks a request that cannot start a run at all (nothing is written).
var ErrUsage = errors.New("invalid run request")

// run is the state one run passes from step to step.
type run struct {
	o           Options
	runID       string
	nonce       string
	dir         *evidence.Dir
	ev          *evidence.Events
	tr          *evidence.Trace
	rep         *ctoharness.Report
	stage       gates.Stage
	spec        task.Spec
	scratch     string // Case's HOME/TMPDIR/caches, inside runtime_workspace_root
	scratchMade bool
	repo        source.Repo
	before      *ctoharness.SourceProof
	fixture     string // set once the fixture exists
	contract    *task.Contract
	facts       sandbox.Facts    // what the machine can enforce, probed at the gate
	profile     profile.Policy   // the execution profile's limits
	agent       *agentRun        // set at the gate when a coding agent runs as Case
	adv         *adversary.Agent // set at the contract when the task's adversary is a coding agent
	net         *netState        // network egress, when an allowlist is in force
	prev        *gates.Record    // the previous stage's record the gate accepted
	superMode   supervise.Mode   // how an unsandboxed Case's process tree is held (see confine.go)
	cur         ctoharness.Step
	stopped     func() error // non-nil once the run was interrupted (interrupt.go)
	diskFull    bool         // a write failed for lack of space (diskfull.go)
	freed       bool
	interrupt   context.CancelCauseFunc // the interrupt_during_case fault (interrupt.go)
	views       map[bool]*sandbox.View  // the filesystem views built for Case (false) and verification (true)
	viewFiles   map[bool][]sandbox.Bind // the harness-supplied files each view was built with
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
	r := &run{o: o, runID: o.NewRunID(o.Stage, now), nonce: o.NewNonce(), profile: prof}
	r.tr = evidence.NewTrace(r.runID)
	runDir := filepath.Join(o.RunsDir, r.runID)
	workspace := filepath.Join(o.RunsDir, runlist.WorkDir, r.runID)
	r.scratch = filepath.Join(workspace, "scratch")
	if r.dir, err = evidence.Create(ctx, runDir, o.Schemas, r.tr); err != nil {
		return nil, err
	}
	if o.Sync != nil {
		r.dir.WithSync(o.Sync)
	}
	if a, ok := strings.CutPrefix(o.Fault, FaultArtifactPrefix); ok {
		r.dir.WithFault(a)
	}
	if a, ok := strings.CutPrefix(o.Fault, FaultDiskFullPrefix); ok {
		r.dir.WithNoSpaceFault(a)
	}
	ctx = r.injectInterrupt(ctx)
	r.rep = newReport(o, r.runID, r.nonce, prof, workspace, runDir, now)
	r.ev, err = r.dir.OpenEvents(r.runID, r.nonce, func() time.Time { return r.o.Clock() })
	if err != nil {
		r.blockWrite(err, ctoharness.StepGate)
	}
	started := map[string]any{"stage": o.Stage, "nonce": r.nonce,
		"harness_version": ctoharness.Version, "lane": string(o.Lane)}
	if o.Trial != nil {
		started["trial"] = o.Trial
	}
	r.emit(ctx, ctoharness.EvRunStarted, started)

	// Held until the process ends: `runs prune` detaches the mounts of
	// runs nobody holds (killed ones), never of this one.
	if release, err := runlist.Hold(runDir); err != nil {
		r.block(ctoharness.AsBlocker(ctoharness.Block(ctoharness.BlockInternal, ctoharness.StepGate, err, "the run cannot be marked in progress"), ctoharness.StepGate))
	} else {
		defer release()
	}
	r.stopped = stopCause(ctx)
	r.steps(ctx)
	r.dropKeyedStore()
	rep, err := r.finish(proofCtx(ctx), clock.Jumps)
	r.leaveWork()
	return rep, err
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
	defer r.interrupted()
	if !r.gate(ctx) {
		return
	}
	if !r.classify(ctx) {
		return
	}
	clean := r.proveBefore(ctx)
	if r.before == nil {
		return
	}
	defer r.proveAfter(proofCtx(ctx))
	if !clean {
		return
	}
	rec, ok := r.copyFixture(ctx)
	// Whatever happens, nothing may still write once the report is; a copy
	// the verification has not used by now is not needed.
	defer rec.release()
	if !ok {
		return
	}
	var col *collected
	defer func() { r.cleanEnd(proofCtx(ctx), rec, col) }()
	if !r.cleanStart(ctx) || !r.writeContract(ctx) || !r.startEgress(ctx) || !r.prescan(ctx) {
		r.skipVerify("a blocker was raised before the change step")
		return
	}
	// The kept build cache's warm-up needs only the baseline: it runs
	// beside Case, and the verification waits for it.
	warm := r.startKeepGo(ctx, rec)
	defer warm.stop()
	r.change(ctx)
	col = r.collect(proofCtx(ctx), rec)
	r.agentAfterCollect()
	r.verify(ctx, rec, col, warm)
	r.adversarial(ctx, rec)
}

func (r *run) ok() bool { return len(r.rep.Blockers) == 0 }

func (r *run) step(s ctoharness.Step) { r.cur = s; r.tr.SetStep(s) }

// emit appends an event; a failing event log is itself a blocker.
func (r *run) emit(ctx context.Context, t ctoharness.EventType, data any) {
	if r.ev == nil {
		return
	}
	if err := r.ev.Emit(ctx, t, r.redactData(data)); err != nil && r.ev.Count() > 0 {
		r.blockWrite(err, ctoharness.StepReport)
	}
}

// block records a blocker and emits run_blocked for it.
func (r *run) block(b ctoharness.Blocker) {
	b.Message = r.redactString(b.Message)
	for _, have := range r.rep.Blockers {
		if have == b {
			return
		}
	}
	r.rep.Blockers = append(r.rep.Blockers, b)
	if r.ev != nil && r.ev.Err() == nil {
		_ = r.ev.Emit(context.Background(), ctoharness.EvRunBlocked, b)
	}
}

func (r *run) blockErr(err error, step ctoharness.Step) {
	r.noteNoSpace(err, step)
	if r.cancelled(err) {
		r.interrupted()
		return
	}
	r.block(ctoharness.AsBlocker(err, step))
}

func (r *run) blockWrite(err error, step ctoharness.Step) {
	r.diskFull = r.diskFull || noSpace(err)
	for _, b := range r.rep.Blockers {
		if b.Code == ctoharness.BlockArtifactWriteFailed {
			return
		}
	}
	r.rep.Blockers = append(r.rep.Blockers, ctoharness.Blocker{Code: ctoharness.BlockArtifactWriteFailed, Step: step, Message: err.Error()})
}

func (r *run) writeJSON(ctx context.Context, name string, kind schemas.Kind, v any, step ctoharness.Step) bool {
	if err := r.dir.WriteJSON(ctx, name, kind, v); err != nil {
		r.blockWrite(err, step)
		return false
	}
	return true
}

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
