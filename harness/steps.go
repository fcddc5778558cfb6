package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/overlay"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/caserun"
	"github.com/cto-harness/cto-harness/harness/step/checked"
	"github.com/cto-harness/cto-harness/harness/step/hidden"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/store"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// artificialCommitTime makes the materialized artificial fixture's commit
// identical across runs.
var artificialCommitTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (r *run) gate(ctx context.Context) bool {
	r.SetStep(ctoharness.StepGate)
	d := gates.Check(ctx, gates.Request{Stage: r.o.Stage, Getenv: r.o.Getenv, Records: r.o.recordCheck(), Signing: r.o.Signing})
	r.stage, r.prev = d.Stage, d.Previous
	r.Report.StageName = d.Stage.Name
	if r.Report.StageName == "" {
		r.Report.StageName = "unknown"
	}
	r.Report.Backend = d.Stage.Backend
	if r.Report.Backend == "" {
		r.Report.Backend = ctoharness.BackendCase
	}
	if r.Report.Backend == ctoharness.BackendCase {
		r.Report.CaseLane = r.o.Lane
	}
	for _, b := range d.Blockers {
		r.Block(b)
	}
	if r.OK() && r.o.Agent.Name != "" {
		// Before the probe: the agent adds to what the sandbox must allow.
		r.checkAgent(ctx)
	}
	if r.OK() {
		r.checkTools(ctx)
	}
	if r.OK() {
		r.launcher.Probe()
	}
	if r.OK() && r.Report.Backend == ctoharness.BackendCase && r.o.Lane == ctoharness.LaneReal && len(r.caseCommand()) == 0 {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockCaseCommandMissing, Step: ctoharness.StepGate,
			Message: "the real lane needs a Case command: pass --case-cmd, set CTO_HARNESS_CASE_CMD, or set case_command in the config"})
	}
	prev := map[string]any{}
	if d.Previous != nil {
		// The record's digest names exactly the record the gate trusted:
		// stage 3's validation orders this run after that record by it,
		// not by two processes' wall clocks.
		prev = map[string]any{"stage": d.Previous.Stage, "run_id": d.Previous.RunID, "validated_at": d.Previous.ValidatedAt,
			"record_digest": d.Previous.RecordDigest}
	}
	codes := []string{}
	for _, b := range r.Report.Blockers {
		codes = append(codes, string(b.Code))
	}
	r.Emit(ctx, ctoharness.EvGateChecked, map[string]any{"stage": r.o.Stage, "allowed": r.OK(), "blockers": codes, "previous_stage_record": prev,
		"warm_caches": r.ecoRecord()})
	return r.OK()
}

func (r *run) caseCommand() []string {
	if r.agent != nil {
		return r.agent.Exe()
	}
	if len(r.o.CaseCmd) > 0 {
		return r.o.CaseCmd
	}
	return r.o.Config.CaseCommand
}

// classify finds the source: the user's repository, classified against the
// policy, or for stages 1–2 without --source the embedded artificial fixture
// materialized in the workspace.
func (r *run) classify(ctx context.Context) bool {
	r.SetStep(ctoharness.StepClassify)
	pol := r.o.sourcePolicy()
	path := r.o.Source
	builtin := ""
	if path == "" {
		if r.stage.Fixture != gates.FixtureArtificial {
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockSourceNotFound, Step: ctoharness.StepClassify,
				Message: fmt.Sprintf("%s copies an owned repository: pass --source PATH", r.stage)})
			r.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false})
			return false
		}
		builtin = fixtures.Artificial
		path = filepath.Join(r.Report.RuntimeWorkspaceRoot, "artificial-source")
		if err := r.materialize(ctx, builtin, path); err != nil {
			r.BlockErr(err, ctoharness.StepClassify)
			r.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false})
			return false
		}
		// The harness made this repository itself, so it owns it.
		pol.Owned = append(append([]string(nil), pol.Owned...), path)
	}
	repo, err := source.Classify(ctx, path, pol, r.Trace)
	if err != nil {
		r.BlockErr(err, ctoharness.StepClassify)
		r.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false, "path": filepath.Clean(path)})
		return false
	}
	r.repo = repo
	r.Report.SourcePath = repo.Root
	if repo.Separate() {
		r.Report.SourceGitDir = repo.GitDir
	}
	r.launcher.SetSource(launch.Source{Root: repo.Root, Given: repo.Given, GitDir: r.Report.SourceGitDir})
	if r.o.Spec == nil && builtin == "" && r.o.RequireTask {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskRequired, Step: ctoharness.StepClassify,
			Message: fmt.Sprintf("no task was given for %s: the built-in sample task (a note in CASE_NOTES.md) would grade none of its tests; "+
				"give --task FILE (see docs/tasks.md), or --sample-task to run the sample task on purpose", repo.Root)})
		r.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false, "root": repo.Root, "owned": true})
		return false
	}
	spec, err := r.taskSpec(builtin)
	if err != nil {
		r.BlockErr(err, ctoharness.StepClassify)
		return false
	}
	r.Report.SampleTask = r.o.Spec == nil && builtin == ""
	if spec.HiddenTests != "" {
		rec, err := r.hiddenTests(ctx, spec.HiddenTests, repo.Root)
		if err != nil {
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepClassify, Message: err.Error()})
			r.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false, "root": repo.Root, "owned": true})
			return false
		}
		r.Report.HiddenTests = rec
	}
	if spec.Layout != nil && r.o.Unsandboxed {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepClassify,
			Message: fmt.Sprintf("the task's layout shows the repository at %s, which only the sandbox's view can do, and the run is --unsandboxed: run it sandboxed", spec.Layout.Workdir)})
		r.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false, "root": repo.Root, "owned": true})
		return false
	}
	r.spec = spec
	r.launcher.SetTask(spec)
	r.Report.AllowedPaths = append([]string{}, spec.AllowedPaths...)
	data := map[string]any{"ok": true, "root": repo.Root, "builtin": builtin, "owned": true}
	// Fixed in the event chain before Case starts: the criteria cannot
	// change once the result is known.
	crit := criteria(spec, r.Report)
	r.Report.Criteria = crit
	data["task_spec_digest"] = crit.SpecDigest
	if h := r.Report.HiddenTests; h != nil {
		data["hidden_tests_digest"] = h.Digest
	}
	if len(spec.FailToPass) > 0 || len(spec.PassToPass) > 0 {
		data["fail_to_pass"], data["pass_to_pass"] = nonNil(spec.FailToPass), nonNil(spec.PassToPass)
	}
	r.Emit(ctx, ctoharness.EvSourceClassified, data)
	return true
}

// criteria are what the run's verdict will be judged by.
func criteria(spec task.Spec, rep *ctoharness.Report) *ctoharness.TaskCriteria {
	raw, _ := json.Marshal(spec) // the same digest a batch trial's task_digest is
	sum := sha256.Sum256(raw)
	c := &ctoharness.TaskCriteria{SpecDigest: hex.EncodeToString(sum[:]), FailToPass: nonNil(spec.FailToPass), PassToPass: nonNil(spec.PassToPass),
		SampleTask: rep.SampleTask}
	if h := rep.HiddenTests; h != nil {
		c.HiddenTestsDigest = h.Digest
	}
	if tr := spec.TestResults; tr != nil {
		c.TestResults = string(tr.Format) + ":" + tr.Path
	}
	return c
}

// hiddenTests reads the task's hidden test directory before Case starts
// and says why it cannot be used: outside the source (whose copy Case
// gets), and with the sandbox (which hides it from Case).
func (r *run) hiddenTests(ctx context.Context, dir, sourceRoot string) (*ctoharness.HiddenTests, error) {
	set, err := hidden.Read(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("%v; fix the task's hidden_tests", err)
	}
	real, err := filepath.EvalSymlinks(set.Dir)
	if err != nil {
		return nil, fmt.Errorf("hidden tests %s: %v", set.Dir, err)
	}
	if sandbox.Within(real, sourceRoot) {
		return nil, fmt.Errorf("the hidden tests %s lie inside the source %s, whose copy Case works in: keep them outside the repository", set.Dir, sourceRoot)
	}
	if r.o.Unsandboxed {
		return nil, fmt.Errorf("the task has hidden tests (%s), and --unsandboxed lets Case read any file: run it sandboxed", set.Dir)
	}
	return set.Record(), nil
}

func (r *run) materialize(ctx context.Context, name, dst string) error {
	archive, err := fixtures.Archive(name)
	if err != nil {
		return err
	}
	r.Trace.Trace(ctoharness.TraceMkdir, dst)
	if _, err := fixtures.Materialize(ctx, archive, dst, artificialCommitTime); err != nil {
		return ctoharness.Block(ctoharness.BlockSourceUnreadable, ctoharness.StepClassify, err,
			"cannot materialize the embedded %s fixture at %s", name, dst)
	}
	return nil
}

func (r *run) taskSpec(builtin string) (task.Spec, error) {
	if r.o.Spec != nil {
		return *r.o.Spec, nil
	}
	if builtin == "" {
		return DefaultSpec(), nil
	}
	data, err := fixtures.TaskSpec(builtin)
	if err != nil {
		return task.Spec{}, err
	}
	return task.Parse(data, "embedded "+builtin+" task", r.o.Schemas.Validator(schemas.TaskSpec))
}

func (r *run) proveBefore(ctx context.Context) bool {
	r.SetStep(ctoharness.StepSourceProof)
	p, err := source.Prove(ctx, r.repo, source.ProofOptions{RunID: r.RunID, Kind: "before", Deep: r.o.Deep, Now: r.o.Clock(), Getenv: r.o.Getenv}, r.Trace)
	if err != nil {
		r.BlockErr(err, ctoharness.StepSourceProof)
		return false
	}
	r.before = &p
	r.SourceProven()
	r.Report.Commits.SourceHead = p.Head.Commit
	r.Report.Commits.SourceTree = p.Head.Tree
	r.Report.Commits.BaseCommit, r.Report.Commits.BaseTree = p.Head.Commit, p.Head.Tree
	if r.WriteJSON(ctx, evidence.SourceBefore, schemas.SourceProof, p, ctoharness.StepSourceProof) {
		r.Emit(ctx, ctoharness.EvSourceProofBefore, map[string]any{"proof": evidence.SourceBefore, "head": p.Head.Commit,
			"status_clean": p.StatusClean, "manifest_digest": p.ManifestDigest, "entries": len(p.Manifest)})
	}
	// The task's base and the task check it requires are held once the
	// source proof is written: a refusal still proves the source unchanged.
	if rev := r.baseRev(); rev != "" {
		c, t, err := fixture.ResolveBase(r.repo.Root, r.repo.GitDir, rev)
		if err != nil {
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepSourceProof,
				Message: fmt.Sprintf("the task's base %s; give a commit, branch or tag of %s", err, r.repo.Root)})
			return false
		}
		r.Report.Commits.BaseCommit, r.Report.Commits.BaseTree = c, t
	}
	if tc := r.o.TaskCheck; tc != nil && r.Report.Criteria != nil {
		r.Report.TaskCheck = tc.Ref()
		if err := r.Dir.WriteFile(ctx, checked.Artifact, tc.Raw); err != nil {
			r.BlockWrite(err, ctoharness.StepSourceProof)
			return false
		}
		if err := checked.Hold(tc.Check, *r.Report.Criteria, r.Report.Commits.BaseCommit); err != nil {
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepSourceProof, Message: "--require-task-check: " + err.Error()})
			return false
		}
	}
	if !p.StatusClean {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSourceDirty, Step: ctoharness.StepSourceProof,
			Message: fmt.Sprintf("source %s is not clean (%s); commit or stash the changes, then run again", r.repo.Root, source.DescribeStatus(p.Status))})
	}
	return r.OK()
}

// record is the harness's own account of the fixture, made before Case
// runs and kept where Case cannot write: the store holding the baseline
// (and later the result), when the baseline was made, and the fixture's
// .git as the harness left it.
type record struct {
	store      string // "" when it could not be made
	baselineAt time.Time
	gitBefore  []ctoharness.ManifestEntry
	// conversions are the source's checkout settings the copy used, for
	// the collect to hash Case's changes as git add would.
	conversions gitstatus.CheckoutSettings
	// checkout is the verification checkout's baseline, copied from the
	// source alongside the fixture (the source is out of Case's reach), so
	// that the verification later only writes the change.
	checkout *checkout.Baseline
	// fixture is the overlay the fixture is, when it is one (nil: a copy).
	fixture *overlay.Mount
}

// release detaches what the record holds mounted once no step needs it:
// the verification checkout and an overlay fixture. The fixture's mount
// point is left empty (and removed with the run's work); the overlay's layer,
// which holds what Case wrote, stays in the workspace until then.
func (rec record) release() {
	rec.checkout.Stop()
	_ = rec.fixture.Unmount()
}

// fixtureLayer is the directory of an overlay fixture's writable layer, in
// the run's workspace (outside every view).
func (r *run) fixtureLayer() string {
	return filepath.Join(r.Report.RuntimeWorkspaceRoot, evidence.FixtureDir)
}

// makeFixture shows the source's HEAD tree at dst for Case to work in. Where
// it can, that is an overlay of the source worktree (package overlay) whose
// every file is hashed against the tree (fixture.AdoptHashed): nothing is
// copied, and Case's writes land in a layer in the run's workspace. It is a
// copy instead when the run is unsandboxed (Case could then write the
// source, the overlay's lower layer), when the work is kept (a kept fixture
// must outlive the run, a mount must not), for trees with submodules or
// filtered paths, and where the machine cannot mount.
func (r *run) makeFixture(ctx context.Context, dst string, when time.Time) (fixture.CopyResult, *overlay.Mount, error) {
	in := fixture.CopyInput{SourceRoot: r.repo.Root, SourceGitDir: r.repo.GitDir, Dest: dst, When: when, Tracer: r.Trace, Progress: r.o.Progress, Getenv: r.o.Getenv, History: r.history(), Base: r.otherBase()}
	// Another base than HEAD is written from the object store: the
	// worktree, the overlay's lower layer, shows HEAD.
	if r.o.Unsandboxed || r.o.KeepWork || in.Base != "" {
		res, err := fixture.Copy(ctx, in)
		return res, nil, err
	}
	layer := r.fixtureLayer()
	r.Trace.Trace(ctoharness.TraceMkdir, layer)
	if err := os.MkdirAll(layer, 0o755); err != nil {
		return fixture.CopyResult{}, nil, ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, err, "create the fixture's layer directory %s", layer)
	}
	upper, work := filepath.Join(layer, "layer"), filepath.Join(layer, "layer-work")
	m, err := overlay.Tree(ctx, overlay.Input{Source: r.repo.Root, GitDir: r.repo.GitDir, Dest: dst, Upper: upper, Work: work, Tracer: r.Trace})
	if err == nil {
		var res fixture.CopyResult
		if res, err = fixture.AdoptHashed(ctx, in); !errors.Is(err, fixture.ErrAdoptNeedsCopy) {
			return res, m, err
		}
		for _, p := range []string{dst, upper, work} {
			r.Trace.Trace(ctoharness.TraceRemove, p)
		}
		if derr := m.Discard(); derr != nil {
			return res, nil, ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, derr, "give up the overlay fixture %s before copying it instead", dst)
		}
	} else if !errors.Is(err, overlay.ErrUnavailable) {
		return fixture.CopyResult{}, nil, ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, err, "make the overlay fixture %s", dst)
	}
	res, err := fixture.Copy(ctx, in)
	return res, nil, err
}

// collected is what the collect step made: the result's time (its tree and
// commit are in the report).
type collected struct {
	at time.Time
}

// copyFixture copies the source into the fixture, commits the baseline and
// makes the harness's store from it. It reports false only when there is
// no fixture at all.
func (r *run) copyFixture(ctx context.Context) (record, bool) {
	r.SetStep(ctoharness.StepCopy)
	dst := r.Dir.Path(evidence.FixtureDir)
	r.o.Progress.Step("copy")
	rec := record{baselineAt: r.o.Clock()}
	work, _ := r.roots(true)
	rec.checkout = checkout.Begin(ctx, checkout.Input{SourceRoot: r.repo.Root, SourceGitDir: r.repo.GitDir, Dest: work, BaselineTime: rec.baselineAt, Tracer: r.Trace, Getenv: r.o.Getenv, History: r.history(), Base: r.otherBase(),
		// Unsandboxed, Case can write the source, the overlay's lower layer:
		// the copy is at least a snapshot.
		Overlay: !r.o.Unsandboxed, SourceManifest: r.before.Manifest})
	res, mnt, err := r.makeFixture(ctx, dst, rec.baselineAt)
	rec.fixture = mnt
	if _, statErr := os.Lstat(dst); statErr == nil {
		r.fixture = dst
		r.launcher.SetFixture(dst)
		r.Report.FixturePath = dst
	}
	if err != nil {
		rec.release() // no verification will need the checkout; no step will read the fixture
		r.BlockErr(err, ctoharness.StepCopy)
		return rec, r.fixture != ""
	}
	storeDir := r.Dir.Path(evidence.StoreDir)
	if err := store.Create(ctx, filepath.Join(dst, ".git"), storeDir, res.BaselineCommit, r.Trace); err != nil {
		r.BlockErr(err, ctoharness.StepBaseline)
	} else if rec.gitBefore, err = fixture.GitSnapshot(ctx, dst, r.Trace); err != nil {
		r.BlockErr(ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepBaseline, err, "list the fixture's .git"), ctoharness.StepBaseline)
	} else {
		rec.store = storeDir
	}
	r.Report.Commits.BaselineCommit = res.BaselineCommit
	r.Report.Commits.BaselineTree = res.BaselineTree
	objects := res.Closure
	r.Report.FixtureObjects = &objects
	rec.conversions = res.Checkout
	if r.o.Fault == FaultFixtureDirtyStart {
		p := filepath.Join(dst, "injected-untracked.txt")
		r.Trace.Trace(ctoharness.TraceWrite, p)
		if err := os.WriteFile(p, []byte("left by the fixture_dirty_start fault\n"), 0o644); err != nil {
			r.BlockErr(err, ctoharness.StepBaseline)
		}
	}
	r.Emit(ctx, ctoharness.EvFixtureCopied, map[string]any{"fixture": dst, "files": res.Files, "symlinks_outside": nonNil(res.SymlinksOutside),
		"overlay": mnt != nil})
	r.SetStep(ctoharness.StepBaseline)
	r.Emit(ctx, ctoharness.EvBaselineCommitted, map[string]any{"commit": res.BaselineCommit, "tree": res.BaselineTree,
		"source_tree": res.SourceTree, "tree_matches_source": res.BaselineTree == res.SourceTree,
		"base_commit": res.BaseCommit, "base_tree": res.BaseTree,
		"history": objects.History, "objects": objects.Objects, "objects_digest": objects.Digest, "objects_left_out": objects.LeftOut})
	if res.BaselineTree != r.Report.Commits.BaseTree {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockCopyUnfaithful, Step: ctoharness.StepBaseline,
			Message: fmt.Sprintf("baseline tree %s differs from the tree %s of the base %s", res.BaselineTree, r.Report.Commits.BaseTree, r.Report.Commits.BaseCommit)})
	}
	return rec, true
}

func (r *run) cleanStart(ctx context.Context) bool {
	if !r.OK() {
		return false
	}
	r.SetStep(ctoharness.StepCleanStart)
	p, err := fixture.CleanProof(ctx, r.RunID, "clean_start", r.fixture, r.Report.Commits.BaseTree, r.o.Clock(), r.Trace)
	if err != nil {
		r.BlockErr(err, ctoharness.StepCleanStart)
		return false
	}
	if r.WriteJSON(ctx, evidence.CleanStart, schemas.FixtureProof, p, ctoharness.StepCleanStart) {
		r.Emit(ctx, ctoharness.EvFixtureCleanStart, map[string]any{"proof": evidence.CleanStart, "clean": p.Clean, "tree": p.Tree})
	}
	if !p.Clean {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockFixtureDirtyStart, Step: ctoharness.StepCleanStart,
			Message: "the copied fixture is not clean after the baseline commit: " + strings.Join(p.Problems, "; ")})
	}
	return r.OK()
}

func (r *run) writeContract(ctx context.Context) bool {
	r.SetStep(ctoharness.StepContract)
	r.agentLimits()
	c := task.NewContract(r.spec, r.RunID, r.fixture)
	if r.spec.Adversary != nil {
		if r.o.Unsandboxed {
			// Refused before Case, not after: the step could never finish.
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryFailed, Step: ctoharness.StepContract,
				Message: "the task's adversary runs only in a sandbox of its own; run without --unsandboxed"})
			return false
		}
		if !r.autoConfirm() && r.o.Confirm == nil {
			// Asked after Case, the question would find nobody: refused now.
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryNotConfirmed, Step: ctoharness.StepContract,
				Message: "the task's adversary writes tests that run only once a person confirms them, and there is no terminal to ask on; run with --auto-confirm (or \"auto_confirm\": true in the config) to let them run without asking"})
			return false
		}
		c.ClaimsFile = filepath.Join(r.scratch, claimsFile) // Case's scratch, shown at its own path
		if !r.startAdversaryAgent(ctx) {
			return false
		}
	}
	data, _ := json.Marshal(c)
	if leak := r.leaksSource(string(data)); leak != "" {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepContract,
			Message: "the task contract would reveal the source path (" + leak + "); remove it from the task text"})
		return false
	}
	if !r.WriteJSON(ctx, evidence.TaskFile, schemas.TaskContract, c, ctoharness.StepContract) {
		return false
	}
	r.contract = &c
	r.launcher.SetLimits(c.Limits)
	r.Emit(ctx, ctoharness.EvTaskContractWritten, map[string]any{"contract": evidence.TaskFile, "allowed_paths": c.AllowedPaths})
	return r.OK()
}

// leaksSource returns the source path if s names it, as itself or as JSON
// encodes it.
func (r *run) leaksSource(s string) string {
	for _, p := range []string{r.repo.Root, r.repo.Given, r.Report.SourceGitDir} {
		if p != "" && p != "/" && task.RevealsPath([]byte(s), p) {
			return p
		}
	}
	return ""
}

// change makes the task's change: in-process for the fake backend (stage 1),
// by a Case process otherwise.
func (r *run) change(ctx context.Context) {
	r.SetStep(ctoharness.StepCase)
	if r.Interrupted() {
		return // stopped before Case could start
	}
	if r.Report.Backend == ctoharness.BackendFake {
		path, err := fakecase.Apply(*r.contract, r.fixture)
		r.Trace.Trace(ctoharness.TraceWrite, filepath.Join(r.fixture, filepath.FromSlash(path)))
		if err != nil {
			r.BlockErr(ctoharness.Block(ctoharness.BlockInternal, ctoharness.StepCase, err, "the built-in change failed"), ctoharness.StepCase)
		}
		r.Emit(ctx, ctoharness.EvFakeChangeApplied, map[string]any{"path": path})
		return
	}
	r.runCase(ctx)
}

// runCase runs one Case process: started (command, environment, logs,
// watches, launch), watched while it runs, and judged once it ended.
func (r *run) runCase(ctx context.Context) {
	r.o.Progress.Step("Case")
	l, ok := r.startCase(ctx)
	if !ok {
		return
	}
	defer l.cmds.Close()
	out, err, ok := r.watchCase(ctx, l)
	if !ok {
		return
	}
	r.endCase(ctx, l, out, err)
}

// caseLaunch is what startCase prepared for one Case process.
type caseLaunch struct {
	argv, env []string
	launch    []string // argv under the launcher
	attr      *syscall.SysProcAttr
	extra     []*os.File
	logs      map[string]*os.File
	cmds      *caserun.Commands
	watch     *caserun.Watch
}

func (l *caseLaunch) closeLogs() {
	for _, f := range l.logs {
		f.Close()
	}
}

// startCase prepares Case's command, environment and logs, and the
// launcher with its exec watch. Every exec of Case's processes is seen by
// the exec watch, which counts and refuses commands; Case's own
// case.command events are claims.
func (r *run) startCase(ctx context.Context) (*caseLaunch, bool) {
	l := &caseLaunch{logs: map[string]*os.File{}}
	if !r.caseArgv(l) {
		return nil, false
	}
	r.Report.Case.Argv = l.argv
	r.Report.Case.EnvKeys = backend.EnvKeys(l.env)
	r.Report.Case.TimeoutSeconds = r.contract.CaseTimeoutSeconds
	for _, name := range []string{evidence.CaseStdout, evidence.CaseStderr, evidence.CaseEvents} {
		f, err := r.Dir.OpenAppend(name)
		if err != nil {
			r.BlockWrite(err, ctoharness.StepCase)
			l.closeLogs()
			return nil, false
		}
		l.logs[name] = f
	}
	l.cmds = caserun.NewCommands(r.profile, r.contract.Verification.Command, !r.o.Unsandboxed,
		func(t ctoharness.EventType, data map[string]any) { r.Emit(ctx, t, data) })
	var execs *execwatch.Watch
	if l.cmds.Observed {
		var own []string
		if r.agent != nil {
			own = r.agent.OwnPaths()
		}
		var err error
		if execs, err = execwatch.New(execwatch.Options{AgentPaths: own, Decide: l.cmds.Decide}); err != nil {
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepCase, Message: err.Error()})
			l.closeLogs()
			l.cmds.Close()
			return nil, false
		}
	}
	var err error
	var watch *notify.Watch
	if l.launch, l.attr, l.extra, watch, err = r.launcher.LaunchFor(egress.CommandCase, l.argv, execs, nil); err != nil {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepCase, Message: err.Error()})
		l.closeLogs()
		l.cmds.Close()
		return nil, false
	}
	l.cmds.Attach(watch, execs)
	return l, true
}

// caseArgv is Case's command and environment: the fake Case's, the task's
// or a coding agent's, never naming the source.
func (r *run) caseArgv(l *caseLaunch) bool {
	l.argv = r.caseCommand()
	if r.o.Lane == ctoharness.LaneFake {
		l.argv = []string{r.o.SelfExe, backend.FakeSubcommand, r.o.Scenario}
	} else if leak := r.leaksSource(strings.Join(l.argv, " ")); leak != "" {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockCaseStartFailed, Step: ctoharness.StepCase,
			Message: "the Case command names the source path " + leak + "; Case may only see the fixture"})
		return false
	}
	if err := r.makeScratch(); err != nil {
		r.BlockErr(ctoharness.Block(ctoharness.BlockCaseStartFailed, ctoharness.StepCase, err, "cannot create Case's scratch directories"), ctoharness.StepCase)
		return false
	}
	l.env = append(r.toolEnv(egress.CommandCase, backend.Env(r.scratch, r.Dir.Path(evidence.TaskFile), r.o.Getenv("PATH"), r.repo.Root, r.Report.SourceGitDir)), r.launcher.NetEnv(egress.CommandCase)...)
	if r.agent == nil {
		return true
	}
	var err error
	if l.argv, l.env, err = r.agent.Command(r.contract, r.fixture, l.env, r.Report.Agent); err != nil {
		r.BlockErr(err, ctoharness.StepCase)
		return false
	}
	r.Report.Sandbox.EnvAllowlist = agentcase.MergeKeys(r.Report.Sandbox.EnvAllowlist, backend.EnvKeys(l.env))
	return true
}

// watchCase starts the launched Case and waits for it, turning its events
// into run events. Unsandboxed, the profile's command budget can only be
// counted from Case's case.command events; when it is spent, Case is
// stopped. A failing model provider stops Case now, not at its timeout.
func (r *run) watchCase(ctx context.Context, l *caseLaunch) (backend.Outcome, error, bool) {
	r.Trace.TraceExec(l.argv, r.fixture)
	r.Report.CaseProcessStarted = true
	r.Emit(ctx, ctoharness.EvCaseProcessStarted, map[string]any{"argv": l.argv, "lane": string(r.o.Lane), "env_keys": r.Report.Case.EnvKeys})
	caseCtx, stopCase := context.WithCancel(ctx)
	defer stopCase()
	if r.agent != nil {
		r.agent.StopWith(stopCase)
	}
	l.watch = &caserun.Watch{Lock: l.cmds.Locker(), Started: r.caseStarted, Claim: l.cmds.Claim, Stop: stopCase, Profile: string(r.profile.Name),
		Emit: func(t ctoharness.EventType, data map[string]any) { r.Emit(ctx, t, data) }}
	in := backend.Input{Argv: l.launch, SysProcAttr: l.attr, ExtraFiles: l.extra, Fixture: r.fixture, Env: l.env,
		Timeout: time.Duration(r.contract.CaseTimeoutSeconds) * time.Second,
		Stdout:  l.logs[evidence.CaseStdout], Stderr: l.logs[evidence.CaseStderr], Events: l.logs[evidence.CaseEvents],
		Limits:        backend.Limits{MaxEvents: r.profile.MaxCaseEvents, MaxBytes: r.profile.MaxEventBytes},
		ValidateEvent: r.o.Schemas.Validator(schemas.CaseEvent),
		OnEvent:       l.watch.OnEvent}
	if r.agent != nil {
		if err := r.agent.Wire(&in, r.fixture); err != nil {
			l.closeLogs()
			r.BlockErr(err, ctoharness.StepCase)
			return backend.Outcome{}, nil, false
		}
	}
	out, err := backend.Run(caseCtx, in)
	return out, err, true
}

// endCase records how Case ended and judges it (see caserun.Judge).
func (r *run) endCase(ctx context.Context, l *caseLaunch, out backend.Outcome, err error) {
	e := caserun.Ended{Out: out, Err: err, Sandboxed: !r.o.Unsandboxed, Profile: string(r.profile.Name),
		MaxEvents: r.profile.MaxCaseEvents, MaxBytes: r.profile.MaxEventBytes, TimeoutSeconds: r.contract.CaseTimeoutSeconds}
	if r.agent != nil {
		e.ModelStopped, e.ModelError = r.agent.End(ctx, r.Report.Agent)
	}
	e.WatchErr = l.cmds.Close()
	e.BudgetStop = l.watch.BudgetStop()
	c := &r.Report.Case
	c.Commands = l.cmds.Record()
	c.ExitCode, c.DurationMs, c.TimedOut, c.Events = out.ExitCode, out.Duration.Milliseconds(), out.TimedOut, out.Events
	c.EventLimits = ctoharness.EventLimits{MaxEvents: r.profile.MaxCaseEvents, MaxBytes: r.profile.MaxEventBytes,
		Bytes: out.Usage.Bytes, Dropped: out.Usage.Dropped}
	c.StdoutInline, c.StderrInline, c.OutputTrunc = inlineOutput(out.StdoutInline, out.StderrInline, out.Truncated)
	r.Emit(ctx, ctoharness.EvCaseProcessExited, map[string]any{"exit_code": out.ExitCode, "signal": out.Signal,
		"timed_out": out.TimedOut, "duration_ms": out.Duration.Milliseconds(), "events": out.Events})
	e.Interrupted = r.Interrupted()
	v := caserun.Judge(e)
	if v.WriteErr != nil {
		r.BlockWrite(v.WriteErr, ctoharness.StepCase)
	}
	if v.StartErr != nil {
		r.BlockErr(v.StartErr, ctoharness.StepCase)
	}
	for _, b := range v.Blockers {
		r.Block(b)
	}
}

// inlineOutput keeps the first 50 KB of Case output for the report: stdout
// first, then stderr, so truncation is deterministic.
func inlineOutput(stdout, stderr string, truncated bool) (string, string, bool) {
	const capBytes = 50 * 1024
	if len(stdout) > capBytes {
		return stdout[:capBytes], "", true
	}
	room := capBytes - len(stdout)
	if len(stderr) > room {
		return stdout, stderr[:room], true
	}
	return stdout, stderr, truncated
}

// collect turns what Case left in the fixture worktree into the result
// commit in the harness's store, and the patch.
func (r *run) collect(ctx context.Context, rec record) *collected {
	r.SetStep(ctoharness.StepCollect)
	allowed := task.NewPathPolicy(r.spec.AllowedPaths).Check
	if r.o.AllowedCheck != nil {
		allowed = r.o.AllowedCheck
	}
	col := &collected{at: r.o.Clock()}
	res, err := fixture.Collect(ctx, fixture.CollectInput{Root: r.fixture, Store: rec.store, Baseline: r.Report.Commits.BaselineCommit,
		When: col.at, Tracer: r.Trace, Allowed: allowed, Checkout: rec.conversions})
	r.Report.ChangedFiles = append([]ctoharness.ChangedFile{}, res.Changed...)
	// The patch is streamed from the store (capped, never whole in
	// memory); a failed collect has none, as it has no result commit.
	werr := r.Dir.WriteStream(ctx, evidence.PatchFile, func(w io.Writer) error {
		if err != nil {
			return nil
		}
		return fixture.WritePatch(ctx, w, rec.store, r.Report.Commits.BaselineCommit, res.ResultCommit)
	})
	switch {
	case errors.Is(werr, evidence.ErrWrite):
		r.BlockWrite(werr, ctoharness.StepCollect)
	case werr != nil && err == nil:
		err = werr
	}
	if err != nil {
		r.BlockErr(err, ctoharness.StepCollect)
	}
	r.Report.Commits.ResultCommit = res.ResultCommit
	r.Report.Commits.ResultTree = res.ResultTree
	var bad []string
	for _, c := range res.Changed {
		if !c.Allowed {
			bad = append(bad, c.Path+" ("+c.Reason+")")
		}
	}
	r.Emit(ctx, ctoharness.EvChangesCollected, map[string]any{"changed": len(res.Changed), "disallowed": len(bad),
		"result_commit": res.ResultCommit, "patch": evidence.PatchFile})
	if len(bad) > 0 {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockDisallowedChange, Step: ctoharness.StepCollect,
			Message: "Case changed paths outside the allowed paths: " + listSome(bad) + "; see changed_files"})
	}
	if unsafe := UnsafeNames(res.Changed); len(unsafe) > 0 {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockUnsafeFileName, Step: ctoharness.StepCollect,
			Message: "Case left files whose names hold control, format or bidi characters (shown escaped): " + listSome(unsafe)})
	}
	return col
}

// listSome joins the first items of a list Case decides the length of, and
// says how many more there are: a blocker message stays short whatever
// Case did (the full list is in changed_files).
func listSome(items []string) string {
	const most = 20
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}

// UnsafeNames lists, escaped for display, the changed files whose names hold
// a character display.Hidden reports: no honest change needs one, so each
// blocks the run (UNSAFE_FILE_NAME) whatever the allowed paths say. Bytes
// that are not UTF-8 are not in this list: such names are stored exactly
// (path_b64) and shown escaped.
func UnsafeNames(changed []ctoharness.ChangedFile) []string {
	var out []string
	for _, c := range changed {
		name, ok := c.Name()
		if !ok {
			out = append(out, display.Terminal(c.Path))
			continue
		}
		for _, r := range name {
			if display.Hidden(r) {
				out = append(out, display.Terminal(name))
				break
			}
		}
	}
	return out
}

func (r *run) skipVerify(reason string) {
	verification.Skip(r.Report, r.spec, r.profile, reason)
}

// cleanEnd proves the fixture's end state. Once Case has worked in it (the
// collect ran), its .git is never read: the proof compares the worktree
// with the result in the store and the .git's lstat data with the
// snapshot taken before Case. Before that, the fixture is still the
// harness's own and the start proof's reading applies.
func (r *run) cleanEnd(ctx context.Context, rec record, col *collected) {
	r.SetStep(ctoharness.StepCleanEnd)
	expected := r.Report.Commits.ResultTree
	if expected == "" {
		expected = r.Report.Commits.BaselineTree
	}
	var p ctoharness.FixtureProof
	var err error
	if r.Report.Commits.BaselineCommit == "" {
		// Without a baseline every copied file would read as untracked,
		// blaming on Case what the copy's own blocker already explains.
		why := "the fixture has no baseline commit (the copy failed), so there is nothing to compare it with"
		if len(r.Report.Blockers) > 0 {
			why = "the fixture has no baseline commit (the copy failed: " + string(r.Report.Blockers[0].Code) + "), so there is nothing to compare it with"
		}
		r.writeCleanEndNotTaken(ctx, why)
		return
	}
	if col != nil && rec.store != "" {
		p, err = fixture.EndProof(ctx, fixture.EndInput{RunID: r.RunID, Root: r.fixture, Store: rec.store, ExpectedTree: expected,
			GitBefore: rec.gitBefore, AllowGitChanges: r.spec.AllowsGitChanges(), Now: r.o.Clock(), Tracer: r.Trace})
	} else {
		p, err = fixture.CleanProof(ctx, r.RunID, "clean_end", r.fixture, expected, r.o.Clock(), r.Trace)
	}
	if err != nil {
		r.BlockErr(err, ctoharness.StepCleanEnd)
		return
	}
	if r.WriteJSON(ctx, evidence.CleanEnd, schemas.FixtureProof, p, ctoharness.StepCleanEnd) {
		r.Emit(ctx, ctoharness.EvFixtureCleanEnd, map[string]any{"proof": evidence.CleanEnd, "clean": p.Clean, "tree": p.Tree,
			"git_changes": p.GitChangesTotal, "ignored": p.IgnoredTotal})
	}
	if !p.Clean {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockFixtureDirtyEnd, Step: ctoharness.StepCleanEnd,
			Message: "the fixture is not clean after the result commit: " + strings.Join(p.Problems, "; ")})
	}
}

// writeCleanEndNotTaken records a clean-end proof that was not taken, and why.
func (r *run) writeCleanEndNotTaken(ctx context.Context, why string) {
	p := ctoharness.FixtureProof{SchemaVersion: ctoharness.SchemaVersion, RunID: r.RunID, Kind: fixture.KindCleanEnd, FixturePath: r.fixture,
		Status: []ctoharness.StatusEntry{}, Problems: []string{}, SymlinksOutside: []string{}, GitChanges: []ctoharness.GitChange{},
		Ignored: []ctoharness.Leftover{}, NotTaken: why, TakenAt: r.o.Clock()}
	if r.WriteJSON(ctx, evidence.CleanEnd, schemas.FixtureProof, p, ctoharness.StepCleanEnd) {
		r.Emit(ctx, ctoharness.EvFixtureCleanEnd, map[string]any{"proof": evidence.CleanEnd, "clean": false, "not_taken": why})
	}
}

func (r *run) proveAfter(ctx context.Context) {
	r.SetStep(ctoharness.StepSourceAfter)
	after, err := source.Prove(ctx, r.repo, source.ProofOptions{RunID: r.RunID, Kind: "after", Deep: r.o.Deep, Now: r.o.Clock(), Getenv: r.o.Getenv, Before: r.before}, r.Trace)
	if err != nil {
		// Unknown state after the run is treated as mutation: fail closed.
		r.Report.SourceRepositoryMutated = true
		r.Block(ctoharness.AsBlocker(ctoharness.Block(ctoharness.BlockSourceMutated, ctoharness.StepSourceAfter, err,
			"the source could not be proven unchanged after the run"), ctoharness.StepSourceAfter))
		return
	}
	// On a full disk the partial fixture and scratch give their room back
	// first: the after-proof is the evidence that must not be lost.
	r.freeSpace()
	wrote := r.WriteJSON(ctx, evidence.SourceAfter, schemas.SourceProof, after, ctoharness.StepSourceAfter)
	if !wrote && r.DiskFull() && !r.freed {
		r.freeSpace()
		wrote = r.WriteJSON(ctx, evidence.SourceAfter, schemas.SourceProof, after, ctoharness.StepSourceAfter)
	}
	if wrote {
		r.Emit(ctx, ctoharness.EvSourceProofAfter, map[string]any{"proof": evidence.SourceAfter, "head": after.Head.Commit,
			"status_clean": after.StatusClean, "manifest_digest": after.ManifestDigest, "entries": len(after.Manifest)})
	}
	r.SetStep(ctoharness.StepNonMutation)
	nm := source.Compare(r.RunID, *r.before, after)
	r.Report.SourceRepositoryMutated = nm.Mutated
	if r.WriteJSON(ctx, evidence.NonMutation, schemas.NonMutation, nm, ctoharness.StepNonMutation) {
		r.Report.SourceNonMutation = ctoharness.NonMutationRef{Checked: true, ProofPath: evidence.NonMutation}
		r.Emit(ctx, ctoharness.EvSourceNonMutation, map[string]any{"proof": evidence.NonMutation, "mutated": nm.Mutated,
			"differences": nm.DifferenceCount})
	}
	if nm.Mutated {
		var paths []string
		for i, d := range nm.Differences {
			if i == 5 {
				paths = append(paths, fmt.Sprintf("and %d more", nm.DifferenceCount-5))
				break
			}
			paths = append(paths, d.Path+" "+d.Field)
		}
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSourceMutated, Step: ctoharness.StepNonMutation,
			Message: fmt.Sprintf("the source %s changed during the run: %s; see %s", r.repo.Root, strings.Join(paths, ", "), evidence.NonMutation)})
	}
}

// makeScratch creates the scratch directories (HOME, TMPDIR, caches) that Case
// and the verification command share; the first call traces them.
func (r *run) makeScratch() error {
	if r.scratchMade {
		return nil
	}
	for _, d := range backend.ScratchDirs(r.scratch) {
		r.Trace.Trace(ctoharness.TraceMkdir, d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	r.scratchMade = true
	return nil
}

// history is how much of the base's history the task lets reach Case (the
// spec's form was checked by its schema; a form the copy cannot take
// blocks it).
func (r *run) history() fixture.History {
	h, err := fixture.ParseHistory(r.spec.HistoryText())
	if err != nil {
		return fixture.History{Mode: r.spec.HistoryText()}
	}
	return h
}

// baseRev is the revision the task starts from: --rev, else the spec's
// base, else "" (HEAD).
func (r *run) baseRev() string {
	if r.o.Rev != "" {
		return r.o.Rev
	}
	return r.spec.Base
}

// otherBase is the base commit when it is not the source's HEAD, "" when
// it is.
func (r *run) otherBase() string {
	if c := r.Report.Commits; c.BaseCommit != c.SourceHead {
		return c.BaseCommit
	}
	return ""
}
