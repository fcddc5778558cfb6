package verification

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// BaselineInView is where an extra test run's checkout (the baseline's,
// or the adversary's tests on either commit) appears in its sandbox.
const BaselineInView = "/cto-harness/baseline"

// checkBaseline runs the verification once more, on a fresh checkout of
// the baseline with the hidden tests laid, and holds the fail-to-pass
// tests to failing there and the pass-to-pass tests to passing: a
// fail-to-pass test that already passes before the change cannot tell a
// fix from no change, and a pass-to-pass test that fails there was broken
// before it; either way the task is invalid (TASK_INVALID, not the agent's
// doing). It runs in the verification's own environment: its sandbox, the
// task's setup first, the verification's network.
func (v *Verifier) checkBaseline(ctx context.Context, own Own, tr task.TestResults) {
	g := v.Report.Tests.Results.Grading
	b := &ctoharness.BaselineRun{FailToPass: []ctoharness.GradedTest{}}
	g.Baseline = b
	start := v.in.Clock()
	done, err := v.baselineTests(ctx, own, tr)
	b.Log, b.CommandMs, b.DurationMs = done.Log, done.CommandMs, v.in.Clock().Sub(start).Milliseconds()
	tests := done.Tests
	if err != nil {
		b.Problem = err.Error()
		return
	}
	b.Ran = true
	by := map[string]testresults.Outcome{}
	for _, t := range tests {
		by[t.ID] = t.Outcome
	}
	var passing []string
	for _, id := range v.in.Spec.FailToPass {
		o, found := by[id]
		gt := ctoharness.GradedTest{ID: id, Outcome: "missing", OK: true}
		if found {
			gt.Outcome = string(o)
			gt.OK = o != testresults.Pass && o != testresults.XFail
		}
		if !gt.OK {
			passing = append(passing, id)
		}
		b.FailToPass = append(b.FailToPass, gt)
	}
	if len(passing) > 0 {
		v.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepVerify,
			Message: fmt.Sprintf("fail-to-pass tests already pass on the baseline: %s; the task cannot tell a fix from no change (see %s)", strings.Join(passing, ", "), evidence.BaselineLog)})
	}
	if len(v.in.Spec.PassToPass) == 0 {
		return
	}
	var broken []string
	for _, id := range v.in.Spec.PassToPass {
		o, found := by[id]
		gt := ctoharness.GradedTest{ID: id, Outcome: "missing"}
		if found {
			gt.Outcome = string(o)
			gt.OK = o == testresults.Pass || o == testresults.XFail || o == testresults.Skip
		}
		if !gt.OK {
			broken = append(broken, id)
		}
		b.PassToPass = append(b.PassToPass, gt)
	}
	if len(broken) > 0 {
		v.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepVerify,
			Message: fmt.Sprintf("pass-to-pass tests do not pass on the baseline: %s; the task holds the change to tests that were already broken (see %s)", strings.Join(broken, ", "), evidence.BaselineLog)})
	}
}

// baselineTests makes the baseline's checkout, lays the hidden tests, runs
// the verification there and reads its test report.
func (v *Verifier) baselineTests(ctx context.Context, own Own, tr task.TestResults) (TestsDone, error) {
	return v.TestsOn(ctx, own, TestsRun{Dir: "baseline", Commit: v.Report.Commits.BaselineCommit, Command: v.in.Spec.Verification.Command,
		Results: tr, Log: evidence.BaselineLog, What: "the baseline run", Net: true})
}

// TestsRun is one extra test run on a fresh checkout of a commit of the
// store: the verification on the baseline, or the adversary's tests on the
// baseline and the result.
type TestsRun struct {
	Dir     string           // its directory in the run's workspace
	Commit  string           // the store's commit to check out
	Lay     []Tests          // laid over the checkout after the hidden tests
	Command string           // run in the checkout's root
	Results task.TestResults // the report it writes
	Log     string           // its log in the run directory
	What    string           // names it in errors
	Net     bool             // the command has the verification's network
}

// TestsDone is what an extra test run gave: the report's tests, its log
// (once it was opened) and how long its command ran.
type TestsDone struct {
	Tests     []testresults.Result
	Log       string
	CommandMs int64
}

// WrapExtra launches cmd of an extra test run in pol: with cmd's network
// through the run's forwarder when net is set and cmd has an allowlist,
// and with none (no forwarder session, no socket watch) otherwise.
func (v *Verifier) WrapExtra(cmd egress.Command, pol sandbox.Policy, net bool) Wrap {
	if net && v.in.Hooks.HasAllowlist(cmd) {
		return v.in.Hooks.WrapIn(cmd, &pol)
	}
	return func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
		launch, attr, pf, err := sandbox.Command(v.in.SelfExe, pol, argv)
		return launch, attr, []*os.File{pf}, err
	}
}

// setupIn runs the task's setup command in an extra test run's checkout,
// as the verification's setup ran: its network, its timeout, no reruns.
// A setup that does not succeed there is the run's problem, named with
// its log.
func (v *Verifier) setupIn(ctx context.Context, t TestsRun, work, scratch string, pol sandbox.Policy) error {
	s := v.in.Spec.Setup
	if s == nil || !v.in.Profile.RunTests {
		return nil
	}
	log, err := v.Dir.OpenAppend(t.Log) // the run closes it
	if err != nil {
		return fmt.Errorf("%s could not be opened: %w", t.Log, err)
	}
	env, spol := v.Env(egress.CommandSetup, work, scratch)
	spol.Profile.FlakeReruns = 0
	timeout := time.Duration(s.TimeoutSeconds) * time.Second
	in := verify.Input{Command: s.Command, Fixture: work, Env: env, Timeout: timeout, Log: log, LogPath: t.Log, Tracer: v.Trace,
		Wrap: v.WrapExtra(egress.CommandSetup, pol, true)}
	out, err := verify.RunWithPolicy(ctx, in, spol, verify.NewBudget(timeout, 1))
	switch {
	case err != nil:
		return fmt.Errorf("the setup command %q could not run for %s: %w", s.Command, t.What, err)
	case out.Refusal != "" || out.Classification != ctoharness.TestPass:
		return fmt.Errorf("the setup command %q did not succeed for %s (%s%s)%s; see %s", s.Command, t.What, out.Classification,
			reasonSuffix(out.Reason), errorLines(out.StderrInline, out.StdoutInline), t.Log)
	}
	return nil
}

// layOver lays the task's hidden tests and t.Lay over an extra test run's
// checkout (after making its layout's directories there empty).
func (v *Verifier) layOver(ctx context.Context, t TestsRun, work string) error {
	if lay := v.in.Spec.Layout; lay != nil {
		if _, err := v.in.Hooks.Hidden.MakeDirs(ctx, work, slices.Collect(maps.Values(lay.Links)), reportPath(&t.Results)); err != nil {
			return fmt.Errorf("the layout's directories could not be made in the checkout of %s: %w", t.What, err)
		}
	}
	lays := t.Lay
	if h := v.Report.HiddenTests; h != nil {
		set, err := v.in.Hooks.Hidden.Again(ctx, h)
		if err != nil {
			return fmt.Errorf("the hidden tests could not be read again for %s: %w", t.What, err)
		}
		lays = append([]Tests{set}, lays...)
	}
	for _, set := range lays {
		if _, err := set.Lay(ctx, work); err != nil {
			return fmt.Errorf("tests could not be laid over the checkout of %s: %w", t.What, err)
		}
	}
	return nil
}

// TestsOn makes the checkout of t.Commit, lays the task's hidden tests and
// t.Lay, runs the task's setup there as the verification's own setup runs
// (its network, its timeout), then t.Command in the verification's sandbox
// (with the verification's network when t.Net), and reads its test report.
func (v *Verifier) TestsOn(ctx context.Context, own Own, t TestsRun) (TestsDone, error) {
	if v.in.Unsandboxed {
		return TestsDone{}, fmt.Errorf("not run: --unsandboxed")
	}
	base := filepath.Join(v.Report.RuntimeWorkspaceRoot, t.Dir)
	defer func() { _ = v.in.Hooks.RemoveTree(base) }()
	work, scratch := filepath.Join(base, "checkout"), filepath.Join(base, "scratch")
	in := checkout.Input{SourceRoot: v.in.Repo.Root, SourceGitDir: v.in.Repo.GitDir, Dest: work, BaselineTime: own.BaselineAt, Tracer: v.Trace, Getenv: v.in.Getenv, History: own.History, Base: own.Base,
		Overlay: true, SourceProof: v.in.SourceProof}
	cb := checkout.Begin(ctx, in)
	defer func() { _ = cb.Stop() }()
	// The checkout's own commit need not be the store's: its tree is
	// what the checkout is held to.
	in.Store, in.Baseline, in.Result, in.ResultTime = own.Store, v.Report.Commits.BaselineCommit, t.Commit, own.BaselineAt
	if _, err := cb.Finish(ctx, in); err != nil {
		return TestsDone{}, fmt.Errorf("the checkout of %s could not be made: %w", t.What, err)
	}
	if err := v.layOver(ctx, t, work); err != nil {
		return TestsDone{}, err
	}
	dirs := backend.ScratchDirs(scratch)
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return TestsDone{}, fmt.Errorf("the scratch directory %s of %s could not be made: %w", d, t.What, err)
		}
	}
	view, err := v.in.Hooks.PlanView([]string{"/bin/sh"})
	if err != nil {
		return TestsDone{}, fmt.Errorf("the sandbox view of %s cannot be planned: %w", t.What, err)
	}
	view.Moved, view.Cwd, view.Expect = []sandbox.Bind{{Path: BaselineInView, Source: work}}, BaselineInView, ""
	pol := v.in.Hooks.Policy()
	pol.Writable = append([]string{work}, dirs...)
	pol.View = view
	if err := v.setupIn(ctx, t, work, scratch, pol); err != nil {
		return TestsDone{Log: t.Log}, err
	}
	f, err := v.Dir.OpenAppend(t.Log)
	if err != nil {
		return TestsDone{}, fmt.Errorf("%s could not be opened: %w", t.Log, err)
	}
	env, vpol := v.Env(egress.CommandVerify, work, scratch)
	if !t.Net {
		vpol.NetAllowed = nil
	}
	vpol.Profile.FlakeReruns = 0
	timeout := time.Duration(v.in.Spec.Verification.TimeoutSeconds) * time.Second
	if _, err := v.in.Hooks.Results.Clear(work, t.Results); err != nil {
		return TestsDone{Log: t.Log}, err
	}
	vin := verify.Input{Command: t.Command, Fixture: work, Env: env, Timeout: timeout, Log: f, LogPath: t.Log, Tracer: v.Trace,
		Wrap: v.WrapExtra(egress.CommandVerify, pol, t.Net)}
	out, err := verify.RunWithPolicy(ctx, vin, vpol, verify.NewBudget(timeout, 1))
	done := TestsDone{Log: t.Log, CommandMs: out.DurationMs}
	switch {
	case err != nil:
		return done, fmt.Errorf("%s could not run: %w", t.What, err)
	case out.Refusal != "" || out.ExitCode == nil:
		return done, fmt.Errorf("%s did not run (%s: %s)", t.What, out.Classification, out.Reason)
	}
	file, sum := v.in.Hooks.Results.Read(work, t.Results, v.RunID, false)
	v.Trace.Trace(ctoharness.TraceRead, filepath.Join(work, filepath.FromSlash(t.Results.Path)))
	if sum.Problem != "" {
		return done, fmt.Errorf("on %s: %s", t.What, sum.Problem)
	}
	done.Tests = file.Tests
	return done, nil
}
