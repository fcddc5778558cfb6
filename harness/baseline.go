package harness

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
	"github.com/cto-harness/cto-harness/harness/step/hidden"
	"github.com/cto-harness/cto-harness/harness/step/results"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// baselineInView is where the baseline's checkout appears in the sandbox
// of its verification run.
const baselineInView = "/cto-harness/baseline"

// checkBaseline runs the verification once more, on a fresh checkout of
// the baseline with the hidden tests laid, and holds the fail-to-pass
// tests to failing there and the pass-to-pass tests to passing: a
// fail-to-pass test that already passes before the change cannot tell a
// fix from no change, and a pass-to-pass test that fails there was broken
// before it; either way the task is invalid (TASK_INVALID, not the agent's
// doing). It runs in the verification's own environment: its sandbox, the
// task's setup first, the verification's network.
func (r *run) checkBaseline(ctx context.Context, own record, tr task.TestResults) {
	g := r.Report.Tests.Results.Grading
	b := &ctoharness.BaselineRun{FailToPass: []ctoharness.GradedTest{}}
	g.Baseline = b
	start := r.o.Clock()
	done, err := r.baselineTests(ctx, own, tr)
	b.Log, b.CommandMs, b.DurationMs = done.log, done.commandMs, r.o.Clock().Sub(start).Milliseconds()
	tests := done.tests
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
	for _, id := range r.spec.FailToPass {
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
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepVerify,
			Message: fmt.Sprintf("fail-to-pass tests already pass on the baseline: %s; the task cannot tell a fix from no change (see %s)", strings.Join(passing, ", "), evidence.BaselineLog)})
	}
	if len(r.spec.PassToPass) == 0 {
		return
	}
	var broken []string
	for _, id := range r.spec.PassToPass {
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
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepVerify,
			Message: fmt.Sprintf("pass-to-pass tests do not pass on the baseline: %s; the task holds the change to tests that were already broken (see %s)", strings.Join(broken, ", "), evidence.BaselineLog)})
	}
}

// baselineTests makes the baseline's checkout, lays the hidden tests, runs
// the verification there and reads its test report.
func (r *run) baselineTests(ctx context.Context, own record, tr task.TestResults) (testsDone, error) {
	return r.testsOn(ctx, own, testsRun{dir: "baseline", commit: r.Report.Commits.BaselineCommit, command: r.spec.Verification.Command,
		results: tr, log: evidence.BaselineLog, what: "the baseline run", net: true})
}

// testsRun is one extra test run on a fresh checkout of a commit of the
// store: the verification on the baseline, or the adversary's tests on the
// baseline and the result.
type testsRun struct {
	dir     string           // its directory in the run's workspace
	commit  string           // the store's commit to check out
	lay     []hidden.Set     // laid over the checkout after the hidden tests
	command string           // run in the checkout's root
	results task.TestResults // the report it writes
	log     string           // its log in the run directory
	what    string           // names it in errors
	net     bool             // the command has the verification's network
}

// testsDone is what an extra test run gave: the report's tests, its log
// (once it was opened) and how long its command ran.
type testsDone struct {
	tests     []testresults.Result
	log       string
	commandMs int64
}

// wrapExtra launches cmd of an extra test run in pol: with cmd's network
// through the run's forwarder when net is set and cmd has an allowlist,
// and with none (no forwarder session, no socket watch) otherwise.
func (r *run) wrapExtra(cmd egress.Command, pol sandbox.Policy, net bool) func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
	if net && r.launcher.HasAllowlist(cmd) {
		return r.launcher.WrapIn(cmd, &pol)
	}
	return func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
		launch, attr, pf, err := sandbox.Command(r.o.SelfExe, pol, argv)
		return launch, attr, []*os.File{pf}, err
	}
}

// setupIn runs the task's setup command in an extra test run's checkout,
// as the verification's setup ran: its network, its timeout, no reruns.
// A setup that does not succeed there is the run's problem, named with
// its log.
func (r *run) setupIn(ctx context.Context, t testsRun, work, scratch string, pol sandbox.Policy) error {
	s := r.spec.Setup
	if s == nil || !r.profile.RunTests {
		return nil
	}
	log, err := r.Dir.OpenAppend(t.log) // the run closes it
	if err != nil {
		return fmt.Errorf("%s could not be opened: %w", t.log, err)
	}
	env, spol := r.verifyEnv(egress.CommandSetup, work, scratch)
	spol.Profile.FlakeReruns = 0
	timeout := time.Duration(s.TimeoutSeconds) * time.Second
	in := verify.Input{Command: s.Command, Fixture: work, Env: env, Timeout: timeout, Log: log, LogPath: t.log, Tracer: r.Trace,
		Wrap: r.wrapExtra(egress.CommandSetup, pol, true)}
	out, err := verify.RunWithPolicy(ctx, in, spol, verify.NewBudget(timeout, 1))
	switch {
	case err != nil:
		return fmt.Errorf("the setup command %q could not run for %s: %w", s.Command, t.what, err)
	case out.Refusal != "" || out.Classification != ctoharness.TestPass:
		return fmt.Errorf("the setup command %q did not succeed for %s (%s%s)%s; see %s", s.Command, t.what, out.Classification,
			reasonSuffix(out.Reason), errorLines(out.StderrInline, out.StdoutInline), t.log)
	}
	return nil
}

// layOver empties the task's layout directories in an extra test run's
// checkout, then lays the task's hidden tests and t.lay over it.
func (r *run) layOver(ctx context.Context, t testsRun, work string) error {
	if lay := r.spec.Layout; lay != nil {
		if _, err := hidden.MakeDirs(ctx, work, slices.Collect(maps.Values(lay.Links)), reportPath(&t.results)); err != nil {
			return fmt.Errorf("the layout's directories could not be made in the checkout of %s: %w", t.what, err)
		}
	}
	lays := t.lay
	if h := r.Report.HiddenTests; h != nil {
		set, err := hidden.Again(ctx, h)
		if err != nil {
			return fmt.Errorf("the hidden tests could not be read again for %s: %w", t.what, err)
		}
		lays = append([]hidden.Set{set}, lays...)
	}
	for _, set := range lays {
		if _, err := hidden.Lay(ctx, set, work); err != nil {
			return fmt.Errorf("tests could not be laid over the checkout of %s: %w", t.what, err)
		}
	}
	return nil
}

// testsOn makes the checkout of t.commit, lays the task's hidden tests and
// t.lay, runs the task's setup there as the verification's own setup runs
// (its network, its timeout), then t.command in the verification's sandbox
// (with the verification's network when t.net), and reads its test report.
func (r *run) testsOn(ctx context.Context, own record, t testsRun) (testsDone, error) {
	if r.o.Unsandboxed {
		return testsDone{}, fmt.Errorf("not run: --unsandboxed")
	}
	base := filepath.Join(r.Report.RuntimeWorkspaceRoot, t.dir)
	defer func() { _ = RemoveTree(base) }()
	work, scratch := filepath.Join(base, "checkout"), filepath.Join(base, "scratch")
	in := checkout.Input{SourceRoot: r.repo.Root, SourceGitDir: r.repo.GitDir, Dest: work, BaselineTime: own.baselineAt, Tracer: r.Trace, Getenv: r.o.Getenv, History: r.history(), Base: r.otherBase(),
		Overlay: true, SourceManifest: r.before.Manifest}
	cb := checkout.Begin(ctx, in)
	defer func() { _ = cb.Stop() }()
	// The checkout's own commit need not be the store's: its tree is
	// what the checkout is held to.
	in.Store, in.Baseline, in.Result, in.ResultTime = own.store, r.Report.Commits.BaselineCommit, t.commit, own.baselineAt
	if _, err := cb.Finish(ctx, in); err != nil {
		return testsDone{}, fmt.Errorf("the checkout of %s could not be made: %w", t.what, err)
	}
	if err := r.layOver(ctx, t, work); err != nil {
		return testsDone{}, err
	}
	dirs := backend.ScratchDirs(scratch)
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return testsDone{}, fmt.Errorf("the scratch directory %s of %s could not be made: %w", d, t.what, err)
		}
	}
	v, _, err := r.planView(true, []string{"/bin/sh"})
	if err != nil {
		return testsDone{}, fmt.Errorf("the sandbox view of %s cannot be planned: %w", t.what, err)
	}
	v.Moved, v.Cwd, v.Expect = []sandbox.Bind{{Path: baselineInView, Source: work}}, baselineInView, ""
	pol := r.policy(true)
	pol.Writable = append([]string{work}, dirs...)
	pol.View = v
	if err := r.setupIn(ctx, t, work, scratch, pol); err != nil {
		return testsDone{log: t.log}, err
	}
	f, err := r.Dir.OpenAppend(t.log)
	if err != nil {
		return testsDone{}, fmt.Errorf("%s could not be opened: %w", t.log, err)
	}
	env, vpol := r.verifyEnv(egress.CommandVerify, work, scratch)
	if !t.net {
		vpol.NetAllowed = nil
	}
	vpol.Profile.FlakeReruns = 0
	timeout := time.Duration(r.spec.Verification.TimeoutSeconds) * time.Second
	if _, err := results.Clear(work, t.results); err != nil {
		return testsDone{log: t.log}, err
	}
	vin := verify.Input{Command: t.command, Fixture: work, Env: env, Timeout: timeout, Log: f, LogPath: t.log, Tracer: r.Trace,
		Wrap: r.wrapExtra(egress.CommandVerify, pol, t.net)}
	out, err := verify.RunWithPolicy(ctx, vin, vpol, verify.NewBudget(timeout, 1))
	done := testsDone{log: t.log, commandMs: out.DurationMs}
	switch {
	case err != nil:
		return done, fmt.Errorf("%s could not run: %w", t.what, err)
	case out.Refusal != "" || out.ExitCode == nil:
		return done, fmt.Errorf("%s did not run (%s: %s)", t.what, out.Classification, out.Reason)
	}
	file, sum := results.Read(work, t.results, r.RunID, false)
	r.Trace.Trace(ctoharness.TraceRead, filepath.Join(work, filepath.FromSlash(t.results.Path)))
	if sum.Problem != "" {
		return done, fmt.Errorf("on %s: %s", t.what, sum.Problem)
	}
	done.tests = file.Tests
	return done, nil
}
