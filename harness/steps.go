package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/caserun"
	"github.com/cto-harness/cto-harness/harness/step/checked"
	"github.com/cto-harness/cto-harness/harness/step/hidden"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/step/workcopy"
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
	if rev := workcopy.BaseRev(r.o.Rev, r.spec); rev != "" {
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

func (r *run) writeContract(ctx context.Context, fixtureDir string) bool {
	r.SetStep(ctoharness.StepContract)
	r.agentLimits()
	c := task.NewContract(r.spec, r.RunID, fixtureDir)
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

// change makes the task's change in the fixture at dir: in-process for the
// fake backend (stage 1), by a Case process otherwise.
func (r *run) change(ctx context.Context, dir string) {
	r.SetStep(ctoharness.StepCase)
	if r.Interrupted() {
		return // stopped before Case could start
	}
	if r.Report.Backend == ctoharness.BackendFake {
		path, err := fakecase.Apply(*r.contract, dir)
		r.Trace.Trace(ctoharness.TraceWrite, filepath.Join(dir, filepath.FromSlash(path)))
		if err != nil {
			r.BlockErr(ctoharness.Block(ctoharness.BlockInternal, ctoharness.StepCase, err, "the built-in change failed"), ctoharness.StepCase)
		}
		r.Emit(ctx, ctoharness.EvFakeChangeApplied, map[string]any{"path": path})
		return
	}
	r.runCase(ctx, dir)
}

// runCase runs one Case process: started (command, environment, logs,
// watches, launch), watched while it runs, and judged once it ended.
func (r *run) runCase(ctx context.Context, dir string) {
	r.o.Progress.Step("Case")
	l, ok := r.startCase(ctx, dir)
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
	fixture   string // where Case works
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
func (r *run) startCase(ctx context.Context, dir string) (*caseLaunch, bool) {
	l := &caseLaunch{fixture: dir, logs: map[string]*os.File{}}
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
	if err := r.scratchDirs.Make(); err != nil {
		r.BlockErr(ctoharness.Block(ctoharness.BlockCaseStartFailed, ctoharness.StepCase, err, "cannot create Case's scratch directories"), ctoharness.StepCase)
		return false
	}
	l.env = append(r.toolEnv(egress.CommandCase, backend.Env(r.scratch, r.Dir.Path(evidence.TaskFile), r.o.Getenv("PATH"), r.repo.Root, r.Report.SourceGitDir)), r.launcher.NetEnv(egress.CommandCase)...)
	if r.agent == nil {
		return true
	}
	var err error
	if l.argv, l.env, err = r.agent.Command(r.contract, l.fixture, l.env, r.Report.Agent); err != nil {
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
	r.Trace.TraceExec(l.argv, l.fixture)
	r.Report.CaseProcessStarted = true
	r.Emit(ctx, ctoharness.EvCaseProcessStarted, map[string]any{"argv": l.argv, "lane": string(r.o.Lane), "env_keys": r.Report.Case.EnvKeys})
	caseCtx, stopCase := context.WithCancel(ctx)
	defer stopCase()
	if r.agent != nil {
		r.agent.StopWith(stopCase)
	}
	l.watch = &caserun.Watch{Lock: l.cmds.Locker(), Started: r.caseStarted, Claim: l.cmds.Claim, Stop: stopCase, Profile: string(r.profile.Name),
		Emit: func(t ctoharness.EventType, data map[string]any) { r.Emit(ctx, t, data) }}
	in := backend.Input{Argv: l.launch, SysProcAttr: l.attr, ExtraFiles: l.extra, Fixture: l.fixture, Env: l.env,
		Timeout: time.Duration(r.contract.CaseTimeoutSeconds) * time.Second,
		Stdout:  l.logs[evidence.CaseStdout], Stderr: l.logs[evidence.CaseStderr], Events: l.logs[evidence.CaseEvents],
		Limits:        backend.Limits{MaxEvents: r.profile.MaxCaseEvents, MaxBytes: r.profile.MaxEventBytes},
		ValidateEvent: r.o.Schemas.Validator(schemas.CaseEvent),
		OnEvent:       l.watch.OnEvent}
	if r.agent != nil {
		if err := r.agent.Wire(&in, l.fixture); err != nil {
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

func (r *run) skipVerify(reason string) {
	verification.Skip(r.Report, r.spec, r.profile, reason)
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
