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
)

// finish closes the run: status, run_finished, the trace, then the report,
// which records the run clock's wall-clock jumps. Evidence problems found
// here still end as ARTIFACT_WRITE_FAILED blockers in whatever can be
// written; the returned error says the evidence is incomplete.
func (r *run) finish(ctx context.Context, jumps func() []ctoharness.ClockJump) (*ctoharness.Report, error) {
	r.step(ctoharness.StepReport)
	r.stopEgress()
	r.agent.closeMeter()
	r.adv.Close()
	r.freeSpace()
	r.o.Progress.Close()
	if r.rep.Tests.Classification == "" {
		r.skipVerify("the run did not reach verification")
	}
	if r.dir.Fault() != "" && r.ok() {
		// An injected write fault that never fired still must not let the run pass.
		r.blockWrite(fmt.Errorf("%w: fault injected at %s", evidence.ErrWrite, r.dir.Fault()), ctoharness.StepReport)
	}
	r.ensureFile(ctx, evidence.PatchFile, nil)
	r.ensureFile(ctx, evidence.TestLog, []byte("verification not run: "+r.rep.Tests.Reason+"\n"))
	r.sweepSecrets()
	r.rep.Status = ctoharness.StatusFor(r.rep.Blockers)
	r.rep.Outcome = ctoharness.OutcomeFor(r.rep.Blockers)
	r.appendCost()
	r.rep.Status = ctoharness.StatusFor(r.rep.Blockers)
	r.rep.Outcome = ctoharness.OutcomeFor(r.rep.Blockers)
	r.rep.Qualifies = r.rep.Status == ctoharness.StatusPass && r.o.Scenario == "pass" && r.o.Fault == "" &&
		r.o.AllowedCheck == nil && r.o.Sync == nil && !r.o.Unsandboxed && r.rep.Sandbox.Enforced && r.profile.Qualifies && !r.o.AllowDangerous
	codes := []string{}
	for _, b := range r.rep.Blockers {
		codes = append(codes, string(b.Code))
	}
	r.emit(ctx, ctoharness.EvRunFinished, map[string]any{"status": string(r.rep.Status), "outcome": string(r.rep.Outcome), "blockers": codes})
	var errs []error
	if r.ev != nil {
		if err := r.ev.Close(); err != nil {
			errs = append(errs, err)
		}
		r.rep.Freshness.FinalEventHash = r.ev.Head()
		r.rep.Freshness.Events = r.ev.Count()
	}
	r.rep.Freshness.FinishedAt = r.o.Clock().UTC()
	r.rep.Freshness.ClockJumps = jumps()
	for _, name := range evidence.FinalArtifacts() {
		r.tr.Trace(ctoharness.TraceWrite, r.dir.Path(name))
	}
	r.prepareSigning()
	if err := r.tr.Flush(r.dir); err != nil {
		r.noteNoSpace(err, ctoharness.StepReport)
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		r.blockWrite(errors.Join(errs...), ctoharness.StepReport)
		r.rep.Status = ctoharness.StatusFor(r.rep.Blockers)
		r.rep.Outcome = ctoharness.OutcomeFor(r.rep.Blockers)
		r.rep.Qualifies = false
	}
	r.sweepSecrets(evidence.TraceFile)
	r.redactReport()
	page := r.page() // first: a page that cannot be rendered changes the status
	err := r.dir.WriteReport(ctx, r.rep, reportmd.Markdown(r.rep), page)
	if noSpace(err) && !r.freed {
		// Nothing failed for space until the report itself: free it and retry.
		r.noteNoSpace(err, ctoharness.StepReport)
		r.freeSpace()
		r.rep.Status = ctoharness.StatusFor(r.rep.Blockers)
		r.rep.Outcome = ctoharness.OutcomeFor(r.rep.Blockers)
		r.rep.Qualifies = false
		page = r.page()
		err = r.dir.WriteReport(ctx, r.rep, reportmd.Markdown(r.rep), page)
	}
	if err != nil {
		errs = append(errs, err)
	} else if err := r.sign(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return r.rep, fmt.Errorf("run %s: evidence is incomplete: %w", r.rep.RunArtifactDir, errors.Join(errs...))
	}
	return r.rep, nil
}

// ensureFile writes an artifact that every run carries if a step did not.
func (r *run) ensureFile(ctx context.Context, name string, data []byte) {
	if fileExists(r.dir.Path(name)) {
		return
	}
	if err := r.dir.WriteFile(ctx, name, data); err != nil {
		r.blockWrite(err, ctoharness.StepReport)
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
	if err := ledger.Append(r.o.RunsDir, ledger.FromReport(r.rep, r.o.Clock())); err != nil {
		r.blockWrite(fmt.Errorf("the run's line could not be appended to the cost ledger: %w; check that %s is writable", err, ledger.Path(r.o.RunsDir)), ctoharness.StepReport)
	}
}
