package verification

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/harness/verify"
	"github.com/cto-harness/cto-harness/schemas"
)

// Verify runs the verification command under the profile's policy: the
// script-safety scan, the test scope, the test budget and flake reruns, in
// the sandbox, on a fresh checkout of the result commit made from the
// harness's store, with a HOME, TMPDIR and caches of its own. Nothing of
// Case's fixture or scratch is visible to it. resultAt is when the result
// was committed; kept waits for the kept build cache's warm-up. It returns
// the tests record it left in the report.
func (v *Verifier) Verify(ctx context.Context, own Own, resultAt time.Time, kept func() *ctoharness.KeptCacheRecord) ctoharness.TestsRecord {
	v.verify(ctx, own, resultAt, kept)
	return v.Report.Tests
}

func (v *Verifier) verify(ctx context.Context, own Own, resultAt time.Time, kept func() *ctoharness.KeptCacheRecord) {
	v.SetStep(ctoharness.StepVerify)
	v.Interrupted() // an interrupt during collection still stops the run here
	if !v.OK() {
		v.skip("not run: the run was already blocked (" + string(v.Report.Blockers[0].Code) + ")")
		v.Emit(ctx, ctoharness.EvVerificationDone, map[string]any{"classification": string(ctoharness.TestNotRun)})
		return
	}
	work, scratch, co, ok := v.prepareVerify(ctx, own, resultAt, kept)
	if !ok {
		return
	}
	rec, err, judged, ok := v.runVerification(ctx, own, work, scratch, co)
	if !ok || judged {
		return
	}
	if b := v.in.Hooks.Judge(rec, err, v.unreachableSuffix(egress.CommandVerify)); b != nil {
		v.Block(*b)
	}
}

// prepareVerify makes the verification's checkout of the result, its
// scratch directories, its view, the hidden tests and the task's setup.
// The kept build cache must exist before the view, which shows it, is built.
func (v *Verifier) prepareVerify(ctx context.Context, own Own, resultAt time.Time, kept func() *ctoharness.KeptCacheRecord) (work, scratch string, co checkout.Result, ok bool) {
	work, scratch = v.in.Hooks.Roots()
	v.step("checkout")
	co, err := own.Checkout.Finish(ctx, checkout.Input{Dest: work, Store: own.Store,
		Baseline: v.Report.Commits.BaselineCommit, Result: v.Report.Commits.ResultCommit, ResultTime: resultAt, Tracer: v.Trace})
	v.Emit(ctx, ctoharness.EvCheckoutMade, map[string]any{"dir": work, "commit": co.Commit, "tree": co.Tree,
		"result_tree": v.Report.Commits.ResultTree, "ok": err == nil, "overlay": own.Checkout.Overlaid()})
	if err != nil {
		v.BlockErr(err, ctoharness.StepVerify)
		v.skip("the verification checkout of the result could not be made")
		return work, scratch, co, false
	}
	for _, d := range backend.ScratchDirs(scratch) {
		v.Trace.Trace(ctoharness.TraceMkdir, d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			v.BlockErr(ctoharness.Block(ctoharness.BlockTestNotRun, ctoharness.StepVerify, err, "cannot create the verification's scratch directory %s", d), ctoharness.StepVerify)
			v.skip("the scratch directories could not be created")
			return work, scratch, co, false
		}
	}
	v.Report.Sandbox.KeptBuildCache = kept()
	if v.Interrupted() {
		v.skip("the run was interrupted during the build cache warm-up")
		v.Emit(ctx, ctoharness.EvVerificationDone, map[string]any{"classification": string(ctoharness.TestNotRun), "interrupted": true})
		return work, scratch, co, false
	}
	if !v.in.Unsandboxed {
		if err := v.in.Hooks.View(ctx, []string{"/bin/sh"}); err != nil {
			v.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepVerify, Message: err.Error()})
			v.skip("the verification command's sandbox could not be built")
			return work, scratch, co, false
		}
	}
	if !v.layLayout(ctx, work) || !v.layHidden(ctx, work) || !v.setup(ctx, work, scratch) {
		v.Emit(ctx, ctoharness.EvVerificationDone, map[string]any{"classification": string(ctoharness.TestNotRun)})
		return work, scratch, co, false
	}
	return work, scratch, co, true
}

// runVerification runs the verification command on the checkout, reads
// its test report and grades it (with fail-to-pass tests, against the
// baseline too), and records verification_done. judged says the test
// report already blocked a command that exited 0; ok false that the step
// ended early (an unwritable log, an interrupt).
func (v *Verifier) runVerification(ctx context.Context, own Own, work, scratch string, co checkout.Result) (rec ctoharness.TestsRecord, err error, judged, ok bool) {
	f, err := v.Dir.OpenAppend(evidence.TestLog)
	if err != nil {
		v.BlockWrite(err, ctoharness.StepVerify)
		v.skip("test.log could not be opened")
		return rec, nil, false, false
	}
	env, pol := v.Env(egress.CommandVerify, work, scratch)
	in := verify.Input{Command: v.in.Spec.Verification.Command, Fixture: work, Env: env,
		Timeout: time.Duration(v.in.Spec.Verification.TimeoutSeconds) * time.Second, Log: f, LogPath: evidence.TestLog, Tracer: v.Trace}
	in.Wrap = v.in.Hooks.WrapFor(egress.CommandVerify) // the sandbox launcher, or the supervisor when unsandboxed
	v.step("verification")
	gitBefore := v.checkoutGit(ctx, work)
	reports, ok := v.collectReports(work, &in)
	if !ok {
		return rec, nil, false, false
	}
	out, err := verify.RunWithPolicy(ctx, in, pol, verify.NewBudget(v.in.Profile.TestBudget, v.in.Profile.MaxTestRuns))
	rec = out.TestsRecord()
	rec.VerifiedCommit, rec.VerifiedTree = co.Commit, co.Tree
	v.Report.Tests = rec
	if v.Interrupted() {
		v.Report.Tests.Reason = "the verification was stopped by an interrupt: " + rec.Reason
		v.Emit(ctx, ctoharness.EvVerificationDone, map[string]any{"classification": string(rec.Classification), "interrupted": true})
		return rec, err, false, false
	}
	if err != nil {
		v.BlockErr(ctoharness.Block(ctoharness.BlockTestNotRun, ctoharness.StepVerify, err, "the verification command could not run"), ctoharness.StepVerify)
	}
	if tr := v.in.Spec.TestResults; tr != nil && rec.ExitCode != nil && err == nil {
		if ok, judged = v.readResults(ctx, *tr, *reports); !ok {
			return rec, err, judged, false
		}
		if res := v.Report.Tests.Results; res != nil && res.Grading != nil && res.Grading.Passed && len(v.in.Spec.FailToPass) > 0 {
			v.step("baseline")
			v.checkBaseline(ctx, own, *tr)
		}
		rec = v.Report.Tests
	}
	v.verificationDone(ctx, rec, v.checkoutGitChanges(ctx, work, gitBefore))
	return rec, err, judged, true
}

// collectReports clears the task's test report path before the command
// runs, and reads each run's report as soon as it ends (and removes it, so
// that a rerun writes its own): a test that fails and then passes on a
// rerun is told apart from the others.
func (v *Verifier) collectReports(work string, in *verify.Input) (*[]report, bool) {
	reports := &[]report{}
	tr := v.in.Spec.TestResults
	if tr == nil {
		return reports, true
	}
	planted, err := v.in.Hooks.Results.Clear(work, *tr)
	if err != nil {
		v.BlockErr(ctoharness.Block(ctoharness.BlockTestNotRun, ctoharness.StepVerify, err, "the verification's test report path"), ctoharness.StepVerify)
		v.skip("a file at the test report's path could not be removed")
		return nil, false
	}
	in.AfterRun = func(int) {
		file, sum := v.in.Hooks.Results.Read(work, *tr, v.RunID, planted)
		v.Trace.Trace(ctoharness.TraceRead, filepath.Join(work, filepath.FromSlash(tr.Path)))
		*reports = append(*reports, report{file, sum})
		_, _ = v.in.Hooks.Results.Clear(work, *tr)
	}
	return reports, true
}

// verificationDone records the verification_done event.
func (v *Verifier) verificationDone(ctx context.Context, rec ctoharness.TestsRecord, gitChanges []string) {
	done := map[string]any{"classification": string(rec.Classification), "exit_code": rec.ExitCode,
		"duration_ms": rec.DurationMs, "log": evidence.TestLog, "profile": rec.Profile, "refusal": rec.Refusal,
		"reruns": rec.Reruns, "findings": len(rec.Findings), "checkout_git_changes": gitChanges}
	if k := v.Report.Sandbox.KeptBuildCache; k != nil {
		// The kept build cache layer read (its manifest's digest) and
		// whether this run warmed it up.
		done["kept_build_cache"] = map[string]any{"id": k.ID, "warmed_up": k.WarmedUp, "note": k.Note}
	}
	v.Emit(ctx, ctoharness.EvVerificationDone, done)
}

// readResults reads the verification's test report into tests.json and
// the report, and blocks a command that exited 0 on results that show no
// test passing, or a test failing. It returns ok false when the evidence
// could not be written, and blocked when the results blocked the run.
func (v *Verifier) readResults(ctx context.Context, tr task.TestResults, reports []report) (ok, blocked bool) {
	if len(reports) == 0 {
		return true, false
	}
	file, sum := reports[len(reports)-1].file, reports[len(reports)-1].sum
	var runs [][]testresults.Result
	for _, rp := range reports {
		runs = append(runs, rp.file.Tests)
	}
	sum.Flaky = v.in.Hooks.Results.Flaky(runs)
	if sum.Artifact != "" {
		if err := v.Dir.WriteJSON(ctx, evidence.TestsJSON, schemas.Tests, file); err != nil {
			v.BlockWrite(err, ctoharness.StepVerify)
			return false, false
		}
	}
	if sum.Problem == "" {
		sum.Grading = v.in.Hooks.Results.Grade(v.in.Spec.FailToPass, v.in.Spec.PassToPass, file.Tests)
	}
	v.Report.Tests.Results = &sum
	cls := v.Report.Tests.Classification
	if g := sum.Grading; g != nil && (cls == ctoharness.TestPass || cls == ctoharness.TestFailure || cls == ctoharness.TestFlake) {
		if fl := v.in.Hooks.Results.FlakyListed(sum.Flaky, g); len(fl) > 0 {
			msg := fmt.Sprintf("listed tests failed, then passed on a rerun: %s (flaky: the task, or the change, does not decide them)", strings.Join(fl, ", "))
			v.Block(ctoharness.Blocker{Code: ctoharness.BlockTestFlake, Step: ctoharness.StepVerify, Message: msg})
			v.Report.Tests.Classification, v.Report.Tests.Reason = ctoharness.TestFlake, msg
			return true, true
		}
		// With lists, the listed tests decide, not the exit code: a test
		// that fails on the baseline and the result alike does not fail
		// the change.
		if msg := v.in.Hooks.Results.GradingVerdict(g); msg != "" {
			v.Block(ctoharness.Blocker{Code: ctoharness.BlockTestsFailed, Step: ctoharness.StepVerify, Message: msg})
			v.Report.Tests.Classification, v.Report.Tests.Reason = ctoharness.TestFailure, msg
			return true, true
		}
		if cls != ctoharness.TestPass {
			v.Report.Tests.Classification = ctoharness.TestPass
			v.Report.Tests.Reason = "the command failed, and every listed test holds on the result: the lists decide (" + v.Report.Tests.Reason + ")"
		}
		return true, true
	}
	if cls != ctoharness.TestPass {
		return true, false // the exit code already failed it; the results say which tests
	}
	if code, msg := v.in.Hooks.Results.Verdict(sum); code != "" {
		v.Block(ctoharness.Blocker{Code: code, Step: ctoharness.StepVerify, Message: msg})
		if code == ctoharness.BlockTestNotRun {
			v.Report.Tests.Classification = ctoharness.TestNotRun
		} else {
			v.Report.Tests.Classification = ctoharness.TestFailure
		}
		v.Report.Tests.Reason = msg
		return true, true
	}
	return true, false
}

// report is one run's test report as read.
type report struct {
	file testresults.File
	sum  ctoharness.TestResultsSummary
}
