package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/caserun"
	"github.com/cto-harness/cto-harness/harness/step/classify"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/proof"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

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

// classify finds the source and fixes the task (package classify); the
// launcher is told both.
func (r *run) classify(ctx context.Context) bool {
	c, ok := classify.Run(ctx, r.Sink, classify.Input{Stage: r.stage, Source: r.o.Source, Policy: r.o.sourcePolicy(), Spec: r.o.Spec,
		DefaultSpec: DefaultSpec(), RequireTask: r.o.RequireTask, Unsandboxed: r.o.Unsandboxed, Schemas: r.o.Schemas})
	if c.Repo.Root != "" {
		r.repo = c.Repo
		r.launcher.SetSource(launch.Source{Root: c.Repo.Root, Given: c.Repo.Given, GitDir: r.Report.SourceGitDir})
	}
	if !ok {
		return false
	}
	r.spec = c.Spec
	r.launcher.SetTask(c.Spec)
	return true
}

// proofInput is what the source proofs read (package proof).
func (r *run) proofInput() proof.Input {
	return proof.Input{Repo: r.repo, Deep: r.o.Deep, Now: r.o.Clock, Getenv: r.o.Getenv}
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
