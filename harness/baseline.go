package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
// tests to failing there: one that already passes before the change cannot
// tell a fix from no change, and the task is invalid (TASK_INVALID, not
// the agent's doing). It runs in the verification's sandbox without
// network and without the setup command, so only a pass on the baseline
// is held against the task; a failure there may be the environment's.
func (r *run) checkBaseline(ctx context.Context, own record, tr task.TestResults) {
	g := r.rep.Tests.Results.Grading
	b := &ctoharness.BaselineRun{FailToPass: []ctoharness.GradedTest{}}
	g.Baseline = b
	tests, log, err := r.baselineTests(ctx, own, tr)
	b.Log = log
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
		r.block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepVerify,
			Message: fmt.Sprintf("fail-to-pass tests already pass on the baseline: %s; the task cannot tell a fix from no change (see %s)", strings.Join(passing, ", "), evidence.BaselineLog)})
	}
}

// baselineTests makes the baseline's checkout, lays the hidden tests, runs
// the verification there and reads its test report.
func (r *run) baselineTests(ctx context.Context, own record, tr task.TestResults) ([]testresults.Result, string, error) {
	if r.o.Unsandboxed {
		return nil, "", fmt.Errorf("not run: --unsandboxed")
	}
	base := filepath.Join(r.rep.RuntimeWorkspaceRoot, "baseline")
	defer func() { _ = RemoveTree(base) }()
	work, scratch := filepath.Join(base, "checkout"), filepath.Join(base, "scratch")
	in := checkout.Input{SourceRoot: r.repo.Root, SourceGitDir: r.repo.GitDir, Dest: work, BaselineTime: own.baselineAt, Tracer: r.tr, Getenv: r.o.Getenv, History: r.history(), Base: r.otherBase(),
		Overlay: true, SourceManifest: r.before.Manifest}
	cb := checkout.Begin(ctx, in)
	defer func() { _ = cb.Stop() }()
	in.Store, in.Baseline, in.Result, in.ResultTime = own.store, r.rep.Commits.BaselineCommit, r.rep.Commits.BaselineCommit, own.baselineAt
	if _, err := cb.Finish(ctx, in); err != nil {
		return nil, "", fmt.Errorf("the baseline's checkout could not be made: %w", err)
	}
	if h := r.rep.HiddenTests; h != nil {
		set, err := hidden.Again(ctx, h)
		if err == nil {
			_, err = hidden.Lay(ctx, set, work)
		}
		if err != nil {
			return nil, "", fmt.Errorf("the hidden tests could not be laid over the baseline: %w", err)
		}
	}
	dirs := backend.ScratchDirs(scratch)
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, "", fmt.Errorf("the baseline run's scratch directory %s could not be made: %w", d, err)
		}
	}
	v, _, err := r.planView(true, []string{"/bin/sh"})
	if err != nil {
		return nil, "", fmt.Errorf("the baseline run's sandbox view cannot be planned: %w", err)
	}
	v.Moved, v.Cwd, v.Expect = []sandbox.Bind{{Path: baselineInView, Source: work}}, baselineInView, ""
	pol := r.policy(true)
	pol.Writable = append([]string{work}, dirs...)
	pol.View = v
	f, err := r.dir.OpenAppend(evidence.BaselineLog)
	if err != nil {
		return nil, "", fmt.Errorf("%s could not be opened: %w", evidence.BaselineLog, err)
	}
	env, vpol := r.verifyEnv(egress.CommandVerify, scratch)
	vpol.NetAllowed = nil
	vpol.Profile.FlakeReruns = 0
	timeout := time.Duration(r.spec.Verification.TimeoutSeconds) * time.Second
	if _, err := results.Clear(work, tr); err != nil {
		return nil, evidence.BaselineLog, err
	}
	vin := verify.Input{Command: r.spec.Verification.Command, Fixture: work, Env: env, Timeout: timeout, Log: f, LogPath: evidence.BaselineLog, Tracer: r.tr,
		Wrap: func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
			launch, attr, pf, err := sandbox.Command(r.o.SelfExe, pol, argv)
			return launch, attr, []*os.File{pf}, err
		}}
	out, err := verify.RunWithPolicy(ctx, vin, vpol, verify.NewBudget(timeout, 1))
	switch {
	case err != nil:
		return nil, evidence.BaselineLog, fmt.Errorf("the baseline run could not run: %w", err)
	case out.Refusal != "" || out.ExitCode == nil:
		return nil, evidence.BaselineLog, fmt.Errorf("the baseline run did not run (%s: %s)", out.Classification, out.Reason)
	}
	file, sum := results.Read(work, tr, r.runID, false)
	r.tr.Trace(ctoharness.TraceRead, filepath.Join(work, filepath.FromSlash(tr.Path)))
	if sum.Problem != "" {
		return nil, evidence.BaselineLog, fmt.Errorf("on the baseline: %s", sum.Problem)
	}
	return file.Tests, evidence.BaselineLog, nil
}
