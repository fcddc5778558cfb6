package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/evidence"
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
	err := r.dir.WriteReport(ctx, r.rep, Markdown(r.rep), page)
	if noSpace(err) && !r.freed {
		// Nothing failed for space until the report itself: free it and retry.
		r.noteNoSpace(err, ctoharness.StepReport)
		r.freeSpace()
		r.rep.Status = ctoharness.StatusFor(r.rep.Blockers)
		r.rep.Outcome = ctoharness.OutcomeFor(r.rep.Blockers)
		r.rep.Qualifies = false
		page = r.page()
		err = r.dir.WriteReport(ctx, r.rep, Markdown(r.rep), page)
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

// Markdown renders the report for a person.
func Markdown(rep *ctoharness.Report) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# cto-harness run %s\n\n", mdText(rep.RunID))
	fmt.Fprintf(&b, "- status: **%s** (outcome %s)\n- stage: %d (%s)\n- backend: %s, lane: %s\n", mdText(string(rep.Status)), mdText(string(rep.Outcome)),
		rep.Stage, mdText(rep.StageName), mdText(string(rep.Backend)), mdText(string(rep.CaseLane)))
	fmt.Fprintf(&b, "- Case process started: %v\n- source repository mutated: %v\n", rep.CaseProcessStarted, rep.SourceRepositoryMutated)
	fmt.Fprintf(&b, "- source: %s\n- fixture: %s\n- run artifact dir: %s\n- runtime workspace root: %s\n",
		mdPath(rep.SourcePath), mdPath(rep.FixturePath), mdPath(rep.RunArtifactDir), mdPath(rep.RuntimeWorkspaceRoot))
	fmt.Fprintf(&b, "- started: %s, finished: %s\n\n", rep.Freshness.StartedAt.Format("2006-01-02T15:04:05.000Z07:00"), rep.Freshness.FinishedAt.Format("2006-01-02T15:04:05.000Z07:00"))
	if rep.SampleTask {
		b.WriteString("**The built-in sample task ran (--sample-task):** the verdict covers that task only, none of the repository's tests.\n\n")
	}
	b.WriteString("## Blockers\n\n")
	if len(rep.Blockers) == 0 {
		b.WriteString("none\n")
	}
	for _, bl := range rep.Blockers {
		fmt.Fprintf(&b, "- %s at %s: %s\n", display.MarkdownCode(string(bl.Code)), mdText(string(bl.Step)), mdText(bl.Message))
	}
	b.WriteString("\n## Changed files\n\n")
	if len(rep.ChangedFiles) == 0 {
		b.WriteString("none\n")
	}
	for _, c := range rep.ChangedFiles[:min(len(rep.ChangedFiles), ctoharness.MaxFilesShown)] {
		verdict := "allowed"
		if !c.Allowed {
			verdict = "NOT allowed: " + mdText(c.Reason)
		}
		fmt.Fprintf(&b, "- %s (%s, %s)\n", mdText(c.Path), mdText(string(c.Change)), verdict)
	}
	if more, outside := ctoharness.FilesNotShown(rep.ChangedFiles); more > 0 {
		fmt.Fprintf(&b, "- and %d more (%d of them NOT allowed); report.json's changed_files and patch.diff list them all\n", more, outside)
	}
	fmt.Fprintf(&b, "\n## Verification\n\n- command: %s\n- classification: %s\n", display.MarkdownCode(rep.Tests.Command), mdText(string(rep.Tests.Classification)))
	if rep.Tests.ExitCode != nil {
		fmt.Fprintf(&b, "- exit code: %d\n", *rep.Tests.ExitCode)
	}
	if rep.Tests.VerifiedCommit != "" {
		fmt.Fprintf(&b, "- ran on a fresh checkout of the result: commit %s (tree %s)\n", mdText(rep.Tests.VerifiedCommit), mdText(rep.Tests.VerifiedTree))
	}
	if rep.Tests.Reason != "" {
		fmt.Fprintf(&b, "- reason: %s\n", mdText(rep.Tests.Reason))
	}
	if t := rep.Tests.Results; t != nil {
		fmt.Fprintf(&b, "- test report %s (%s): %d tests, %d passed, %d failed, %d errored, %d skipped, %d expected failures\n",
			mdText(t.Path), mdText(t.Format), t.Total, t.Pass, t.Fail, t.Error, t.Skip, t.XFail)
		if len(t.Failing) > 0 {
			fmt.Fprintf(&b, "- failing: %s\n", mdText(strings.Join(t.Failing, ", ")))
		}
		if t.Problem != "" {
			fmt.Fprintf(&b, "- test report problem: %s\n", mdText(t.Problem))
		}
	}
	if a := rep.Adversarial; a != nil {
		fmt.Fprintf(&b, "\n## Adversarial tests\n\n- adversary: %s\n- discriminating tests (failed on the baseline): %d, failed on the result: %d; tests that tell nothing: %d; excluded files: %d\n",
			mdText(strings.Join(a.Command, " ")), a.Discriminating, a.Failed, countClass(a.Tests, ctoharness.AdversaryNotDiscriminating), len(a.Excluded))
		if ag := a.Agent; ag != nil {
			requests := 0
			if ag.Usage != nil {
				requests = ag.Usage.Requests
			}
			fmt.Fprintf(&b, "- the adversary is the agent %s %s, model %s: %d model requests, cost %s\n", mdText(ag.Name), mdText(ag.Version), mdText(ag.Model),
				requests, mdText(CostText(ag.Usage)))
			if ag.Warning != "" {
				fmt.Fprintf(&b, "- **warning:** %s\n", mdText(ag.Warning))
			}
		}
		if a.Problem != "" {
			fmt.Fprintf(&b, "- the step could not finish: %s\n", mdText(a.Problem))
		}
	}
	fmt.Fprintf(&b, "\n## Commits\n\n- source HEAD %s (tree %s)\n", mdText(orNone(rep.Commits.SourceHead)), mdText(orNone(rep.Commits.SourceTree)))
	if c := rep.Commits; c.BaseCommit != "" && c.BaseCommit != c.SourceHead {
		fmt.Fprintf(&b, "- base %s (tree %s): the task starts from this commit, not HEAD\n", mdText(c.BaseCommit), mdText(c.BaseTree))
	}
	if fo := rep.FixtureObjects; fo != nil && (fo.History != "full" || fo.LeftOut > 0) {
		fmt.Fprintf(&b, "- Case's .git: history %s (commits: %d, objects: %d); objects of the source left out: %d\n", mdText(fo.History), fo.Commits, fo.Objects, fo.LeftOut)
	}
	fmt.Fprintf(&b, "- baseline %s (tree %s)\n- result %s (tree %s)\n",
		mdText(orNone(rep.Commits.BaselineCommit)),
		mdText(orNone(rep.Commits.BaselineTree)), mdText(orNone(rep.Commits.ResultCommit)), mdText(orNone(rep.Commits.ResultTree)))
	agentMarkdown(&b, rep.Agent)
	fmt.Fprintf(&b, "\n## Sandbox\n\n- enforced: %v (%s)\n- writable: %s\n", rep.Sandbox.Enforced, mdText(strings.Join(rep.Sandbox.Mechanisms, ", ")),
		mdText(strings.Join(rep.Sandbox.WritableRoots, ", ")))
	if rep.Sandbox.NotEnforcedReason != "" {
		fmt.Fprintf(&b, "- %s\n", mdText(rep.Sandbox.NotEnforcedReason))
	}
	networkMarkdown(&b, rep.Network)
	fmt.Fprintf(&b, "\n## Freshness\n\n- nonce %s\n- events %d, final hash %s\n- harness %s\n",
		mdText(rep.Freshness.Nonce), rep.Freshness.Events, mdText(rep.Freshness.FinalEventHash), mdText(rep.Freshness.HarnessVersion))
	if rep.Signed {
		fmt.Fprintf(&b, "\n## Signature\n\n- signed by key %s: attestation.dsse.json follows this report and covers every other file\n", mdText(rep.SigningKeyID))
	} else {
		fmt.Fprintf(&b, "\n## Signature\n\n- unsigned (%s): the digests show the evidence is intact, not who made it\n", mdText(rep.UnsignedReason))
	}
	return []byte(b.String())
}

// mdText is report.md's form of any text the report holds: whatever a field
// says (a blocker message quoting Case's file names, a reason), it cannot
// start a line, a heading or a tag.
func mdText(s string) string { return display.MarkdownText(s) }

// mdPath shows a path as a code span, or (none).
func mdPath(p string) string {
	if p == "" {
		return "(none)"
	}
	return display.MarkdownCode(p)
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// countClass counts the adversarial tests of class.
func countClass(tests []ctoharness.AdversarialTest, class string) int {
	n := 0
	for _, t := range tests {
		if t.Class == class {
			n++
		}
	}
	return n
}
