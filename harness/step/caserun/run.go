package caserun

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/progress"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Agent is what the step asks of a coding agent run as Case (package
// agentcase's Agent).
type Agent interface {
	OwnPaths() []string
	Command(c *task.Contract, fixture string, baseEnv []string, rec *ctoharness.AgentRecord) ([]string, []string, error)
	StopWith(kill func())
	Wire(in *backend.Input, fixture string) error
	End(ctx context.Context, rec *ctoharness.AgentRecord) (stopped, failed *ctoharness.Blocker)
}

// Input is one change step: where and under which contract Case works, and
// the other steps' parts in launching it as hooks.
type Input struct {
	Fixture  string
	Contract *task.Contract
	// FakeBackend makes the change in-process (stage 1); otherwise a Case
	// process runs Argv: the fake Case's (FakeLane) or the real lane's.
	FakeBackend bool
	FakeLane    bool
	Lane        ctoharness.Lane
	Argv        []string
	Profile     profile.Policy
	Sandboxed   bool
	Agent       Agent // nil: no coding agent
	// Leaks names the source path if a string reveals it ("" if not).
	Leaks func(string) string
	// MakeScratch makes Case's scratch directories; Env is Case's
	// environment then (toolchains, warm caches, network), before an
	// agent's own.
	MakeScratch func() error
	Env         func() []string
	// Launch puts argv under the sandbox launcher with the exec watch.
	Launch func(argv []string, execs *execwatch.Watch) ([]string, *syscall.SysProcAttr, []*os.File, *notify.Watch, error)
	// Started is told Case started (the interrupt fault fires on it).
	Started       func()
	ValidateEvent func([]byte) error
	Progress      *progress.Line
}

// Change makes the task's change in the fixture: in-process for the fake
// backend (stage 1), by a Case process otherwise.
func Change(ctx context.Context, s *runsink.Sink, in Input) {
	s.SetStep(ctoharness.StepCase)
	if s.Interrupted() {
		return // stopped before Case could start
	}
	if in.FakeBackend {
		path, err := fakecase.Apply(*in.Contract, in.Fixture)
		s.Trace.Trace(ctoharness.TraceWrite, filepath.Join(in.Fixture, filepath.FromSlash(path)))
		if err != nil {
			s.BlockErr(ctoharness.Block(ctoharness.BlockInternal, ctoharness.StepCase, err, "the built-in change failed"), ctoharness.StepCase)
		}
		s.Emit(ctx, ctoharness.EvFakeChangeApplied, map[string]any{"path": path})
		return
	}
	in.Progress.Step("Case")
	l, ok := start(s, in, func(t ctoharness.EventType, data map[string]any) { s.Emit(ctx, t, data) })
	if !ok {
		return
	}
	defer l.cmds.Close()
	out, err, ok := watch(ctx, s, in, l)
	if !ok {
		return
	}
	end(ctx, s, in, l, out, err)
}

// launched is what start prepared for one Case process.
type launched struct {
	argv, env []string
	launch    []string // argv under the launcher
	attr      *syscall.SysProcAttr
	extra     []*os.File
	logs      map[string]*os.File
	cmds      *Commands
	watch     *Watch
}

func (l *launched) closeLogs() {
	for _, f := range l.logs {
		f.Close()
	}
}

// start prepares Case's command, environment and logs, and the launcher
// with its exec watch. Every exec of Case's processes is seen by the exec
// watch, which counts and refuses commands; Case's own case.command events
// are claims.
func start(s *runsink.Sink, in Input, emit func(ctoharness.EventType, map[string]any)) (*launched, bool) {
	l := &launched{logs: map[string]*os.File{}}
	if !command(s, in, l) {
		return nil, false
	}
	s.Report.Case.Argv = l.argv
	s.Report.Case.EnvKeys = backend.EnvKeys(l.env)
	s.Report.Case.TimeoutSeconds = in.Contract.CaseTimeoutSeconds
	for _, name := range []string{evidence.CaseStdout, evidence.CaseStderr, evidence.CaseEvents} {
		f, err := s.Dir.OpenAppend(name)
		if err != nil {
			s.BlockWrite(err, ctoharness.StepCase)
			l.closeLogs()
			return nil, false
		}
		l.logs[name] = f
	}
	l.cmds = NewCommands(in.Profile, in.Contract.Verification.Command, in.Sandboxed, emit)
	refuse := func(err error) (*launched, bool) {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepCase, Message: err.Error()})
		l.closeLogs()
		l.cmds.Close()
		return nil, false
	}
	var execs *execwatch.Watch
	if l.cmds.Observed {
		var own []string
		if in.Agent != nil {
			own = in.Agent.OwnPaths()
		}
		var err error
		if execs, err = execwatch.New(execwatch.Options{AgentPaths: own, Decide: l.cmds.Decide}); err != nil {
			return refuse(err)
		}
	}
	var err error
	var nw *notify.Watch
	if l.launch, l.attr, l.extra, nw, err = in.Launch(l.argv, execs); err != nil {
		return refuse(err)
	}
	l.cmds.Attach(nw, execs)
	return l, true
}

// command is Case's command and environment: the fake Case's, the task's
// or a coding agent's, never naming the source.
func command(s *runsink.Sink, in Input, l *launched) bool {
	l.argv = in.Argv
	if !in.FakeLane {
		if leak := in.Leaks(strings.Join(l.argv, " ")); leak != "" {
			s.Block(ctoharness.Blocker{Code: ctoharness.BlockCaseStartFailed, Step: ctoharness.StepCase,
				Message: "the Case command names the source path " + leak + "; Case may only see the fixture"})
			return false
		}
	}
	if err := in.MakeScratch(); err != nil {
		s.BlockErr(ctoharness.Block(ctoharness.BlockCaseStartFailed, ctoharness.StepCase, err, "cannot create Case's scratch directories"), ctoharness.StepCase)
		return false
	}
	l.env = in.Env()
	if in.Agent == nil {
		return true
	}
	var err error
	if l.argv, l.env, err = in.Agent.Command(in.Contract, in.Fixture, l.env, s.Report.Agent); err != nil {
		s.BlockErr(err, ctoharness.StepCase)
		return false
	}
	s.Report.Sandbox.EnvAllowlist = mergeKeys(s.Report.Sandbox.EnvAllowlist, backend.EnvKeys(l.env))
	return true
}

// watch starts the launched Case and waits for it, turning its events
// into run events. Unsandboxed, the profile's command budget can only be
// counted from Case's case.command events; when it is spent, Case is
// stopped. A failing model provider stops Case now, not at its timeout.
func watch(ctx context.Context, s *runsink.Sink, in Input, l *launched) (backend.Outcome, error, bool) {
	s.Trace.TraceExec(l.argv, in.Fixture)
	s.Report.CaseProcessStarted = true
	s.Emit(ctx, ctoharness.EvCaseProcessStarted, map[string]any{"argv": l.argv, "lane": string(in.Lane), "env_keys": s.Report.Case.EnvKeys})
	caseCtx, stopCase := context.WithCancel(ctx)
	defer stopCase()
	if in.Agent != nil {
		in.Agent.StopWith(stopCase)
	}
	l.watch = &Watch{Lock: l.cmds.Locker(), Started: in.Started, Claim: l.cmds.Claim, Stop: stopCase, Profile: string(in.Profile.Name),
		Emit: func(t ctoharness.EventType, data map[string]any) { s.Emit(ctx, t, data) }}
	bin := backend.Input{Argv: l.launch, SysProcAttr: l.attr, ExtraFiles: l.extra, Fixture: in.Fixture, Env: l.env,
		Timeout: time.Duration(in.Contract.CaseTimeoutSeconds) * time.Second,
		Stdout:  l.logs[evidence.CaseStdout], Stderr: l.logs[evidence.CaseStderr], Events: l.logs[evidence.CaseEvents],
		Limits:        backend.Limits{MaxEvents: in.Profile.MaxCaseEvents, MaxBytes: in.Profile.MaxEventBytes},
		ValidateEvent: in.ValidateEvent,
		OnEvent:       l.watch.OnEvent}
	if in.Agent != nil {
		if err := in.Agent.Wire(&bin, in.Fixture); err != nil {
			l.closeLogs()
			s.BlockErr(err, ctoharness.StepCase)
			return backend.Outcome{}, nil, false
		}
	}
	out, err := backend.Run(caseCtx, bin)
	return out, err, true
}

// end records how Case ended and judges it (see Judge).
func end(ctx context.Context, s *runsink.Sink, in Input, l *launched, out backend.Outcome, err error) {
	p := in.Profile
	e := Ended{Out: out, Err: err, Sandboxed: in.Sandboxed, Profile: string(p.Name),
		MaxEvents: p.MaxCaseEvents, MaxBytes: p.MaxEventBytes, TimeoutSeconds: in.Contract.CaseTimeoutSeconds}
	if in.Agent != nil {
		e.ModelStopped, e.ModelError = in.Agent.End(ctx, s.Report.Agent)
	}
	e.WatchErr = l.cmds.Close()
	e.BudgetStop = l.watch.BudgetStop()
	c := &s.Report.Case
	c.Commands = l.cmds.Record()
	c.ExitCode, c.DurationMs, c.TimedOut, c.Events = out.ExitCode, out.Duration.Milliseconds(), out.TimedOut, out.Events
	c.EventLimits = ctoharness.EventLimits{MaxEvents: p.MaxCaseEvents, MaxBytes: p.MaxEventBytes,
		Bytes: out.Usage.Bytes, Dropped: out.Usage.Dropped}
	c.StdoutInline, c.StderrInline, c.OutputTrunc = inlineOutput(out.StdoutInline, out.StderrInline, out.Truncated)
	s.Emit(ctx, ctoharness.EvCaseProcessExited, map[string]any{"exit_code": out.ExitCode, "signal": out.Signal,
		"timed_out": out.TimedOut, "duration_ms": out.Duration.Milliseconds(), "events": out.Events})
	e.Interrupted = s.Interrupted()
	v := Judge(e)
	if v.WriteErr != nil {
		s.BlockWrite(v.WriteErr, ctoharness.StepCase)
	}
	if v.StartErr != nil {
		s.BlockErr(v.StartErr, ctoharness.StepCase)
	}
	for _, b := range v.Blockers {
		s.Block(b)
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

// mergeKeys adds keys to a sorted-unique list (the sandbox's environment
// allowlist gains the agent's variables).
func mergeKeys(have, add []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range append(append([]string{}, have...), add...) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
