package harness

import (
	"context"
	"errors"
	"fmt"
	"os"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/ledger"
	"github.com/cto-harness/cto-harness/harness/reportmd"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
)

// finish closes the run: status, run_finished, the trace, then the report,
// which records the run clock's wall-clock jumps. Evidence problems found
// here still end as ARTIFACT_WRITE_FAILED blockers in whatever can be
// written; the returned error says the evidence is incomplete.
func (r *run) finish(ctx context.Context, jumps func() []ctoharness.ClockJump) (*ctoharness.Report, error) {
	r.SetStep(ctoharness.StepReport)
	r.launcher.StopEgress()
	r.agent.Close()
	r.adv.Close()
	r.FreeSpace()
	r.o.Progress.Close()
	if r.Report.Tests.Classification == "" {
		r.skipVerify("the run did not reach verification")
	}
	if r.Dir.Fault() != "" && r.OK() {
		// An injected write fault that never fired still must not let the run pass.
		r.BlockWrite(fmt.Errorf("%w: fault injected at %s", evidence.ErrWrite, r.Dir.Fault()), ctoharness.StepReport)
	}
	r.ensureFile(ctx, evidence.PatchFile, nil)
	r.ensureFile(ctx, evidence.TestLog, []byte("verification not run: "+r.Report.Tests.Reason+"\n"))
	agentcase.Sweep(r.Sink, r.secrets())
	r.Report.Status = ctoharness.StatusFor(r.Report.Blockers)
	r.Report.Outcome = ctoharness.OutcomeFor(r.Report.Blockers)
	r.appendCost()
	r.Report.Status = ctoharness.StatusFor(r.Report.Blockers)
	r.Report.Outcome = ctoharness.OutcomeFor(r.Report.Blockers)
	r.Report.Qualifies = r.Report.Status == ctoharness.StatusPass && r.o.Scenario == "pass" && r.o.Fault == "" &&
		r.o.AllowedCheck == nil && r.o.Sync == nil && !r.o.Unsandboxed && r.Report.Sandbox.Enforced && r.profile.Qualifies && !r.o.AllowDangerous
	codes := []string{}
	for _, b := range r.Report.Blockers {
		codes = append(codes, string(b.Code))
	}
	r.Emit(ctx, ctoharness.EvRunFinished, map[string]any{"status": string(r.Report.Status), "outcome": string(r.Report.Outcome), "blockers": codes})
	var errs []error
	if r.Events != nil {
		if err := r.Events.Close(); err != nil {
			errs = append(errs, err)
		}
		r.Report.Freshness.FinalEventHash = r.Events.Head()
		r.Report.Freshness.Events = r.Events.Count()
	}
	r.Report.Freshness.FinishedAt = r.o.Clock().UTC()
	r.Report.Freshness.ClockJumps = jumps()
	for _, name := range evidence.FinalArtifacts() {
		r.Trace.Trace(ctoharness.TraceWrite, r.Dir.Path(name))
	}
	r.prepareSigning()
	if err := r.Trace.Flush(r.Dir); err != nil {
		r.NoteNoSpace(err, ctoharness.StepReport)
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		r.BlockWrite(errors.Join(errs...), ctoharness.StepReport)
		r.Report.Status = ctoharness.StatusFor(r.Report.Blockers)
		r.Report.Outcome = ctoharness.OutcomeFor(r.Report.Blockers)
		r.Report.Qualifies = false
	}
	agentcase.Sweep(r.Sink, r.secrets(), evidence.TraceFile)
	agentcase.RedactReport(r.Report, r.secrets())
	page := r.page() // first: a page that cannot be rendered changes the status
	err := r.Dir.WriteReport(ctx, r.Report, reportmd.Markdown(r.Report), page)
	if runsink.NoSpace(err) && !r.Freed() {
		// Nothing failed for space until the report itself: free it and retry.
		r.NoteNoSpace(err, ctoharness.StepReport)
		r.FreeSpace()
		r.Report.Status = ctoharness.StatusFor(r.Report.Blockers)
		r.Report.Outcome = ctoharness.OutcomeFor(r.Report.Blockers)
		r.Report.Qualifies = false
		page = r.page()
		err = r.Dir.WriteReport(ctx, r.Report, reportmd.Markdown(r.Report), page)
	}
	if err != nil {
		errs = append(errs, err)
	} else if err := r.sign(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return r.Report, fmt.Errorf("run %s: evidence is incomplete: %w", r.Report.RunArtifactDir, errors.Join(errs...))
	}
	return r.Report, nil
}

// ensureFile writes an artifact that every run carries if a step did not.
func (r *run) ensureFile(ctx context.Context, name string, data []byte) {
	if fileExists(r.Dir.Path(name)) {
		return
	}
	if err := r.Dir.WriteFile(ctx, name, data); err != nil {
		r.BlockWrite(err, ctoharness.StepReport)
	}
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// appendCost appends the run's line to the runs directory's cost ledger
// (package ledger): who ran as Case and as adversary, what the model
// meter counted, and the verdict the report is written with. A line that
// cannot be appended blocks the run: a ledger that misses runs would
// understate what they cost.
func (r *run) appendCost() {
	if err := ledger.Append(r.o.RunsDir, ledger.FromReport(r.Report, r.o.Clock())); err != nil {
		r.BlockWrite(fmt.Errorf("the run's line could not be appended to the cost ledger: %w; check that %s is writable", err, ledger.Path(r.o.RunsDir)), ctoharness.StepReport)
	}
}
