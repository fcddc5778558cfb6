// Package report is the last step of a run: the verdict, the cost
// ledger's line, run_finished, the trace, then report.json, report.md and
// report.html, and the signed attestation over every file. Evidence
// problems found here still end as ARTIFACT_WRITE_FAILED blockers in
// whatever can be written; the returned error says the evidence is
// incomplete.
package report

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/ledger"
	"github.com/cto-harness/cto-harness/harness/reportmd"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/schemas"
)

// Input is what the report step reads besides the sink.
type Input struct {
	// Qualifiable is false when the run can never count as stage evidence
	// whatever its verdict: a scenario other than pass, a fault, a planted
	// policy, an injected fsync, no sandbox, a profile that does not
	// qualify, or a dangerous verification allowed.
	Qualifiable bool
	Unsandboxed bool
	RunsDir     string // the cost ledger's
	Signing     attest.Keys
	Schemas     *schemas.Set
	Getenv      func(string) string
	Clock       func() time.Time
	SelfExe     string        // named by its build id in the predicate
	Previous    *gates.Record // the previous stage's record the gate accepted
	// Jumps are the run clock's wall-clock jumps.
	Jumps func() []ctoharness.ClockJump
	// Redact sweeps the run's secrets from the written artifacts (and the
	// named ones); RedactReport from the report itself.
	Redact       func(names ...string)
	RedactReport func(*ctoharness.Report)
}

// Finish closes the run: status, run_finished, the trace, then the report.
func Finish(ctx context.Context, s *runsink.Sink, in Input) (*ctoharness.Report, error) {
	s.SetStep(ctoharness.StepReport)
	if s.Dir.Fault() != "" && s.OK() {
		// An injected write fault that never fired still must not let the run pass.
		s.BlockWrite(fmt.Errorf("%w: fault injected at %s", evidence.ErrWrite, s.Dir.Fault()), ctoharness.StepReport)
	}
	ensureFile(ctx, s, evidence.PatchFile, nil)
	ensureFile(ctx, s, evidence.TestLog, []byte("verification not run: "+s.Report.Tests.Reason+"\n"))
	in.Redact()
	verdict(s.Report)
	appendCost(s, in)
	verdict(s.Report)
	rep := s.Report
	rep.Qualifies = rep.Status == ctoharness.StatusPass && in.Qualifiable && rep.Sandbox.Enforced
	s.Emit(ctx, ctoharness.EvRunFinished, map[string]any{"status": string(rep.Status), "outcome": string(rep.Outcome), "blockers": codes(rep)})
	errs := closeEvidence(s, in)
	if len(errs) > 0 {
		s.BlockWrite(errors.Join(errs...), ctoharness.StepReport)
		unqualified(rep)
	}
	in.Redact(evidence.TraceFile)
	in.RedactReport(rep)
	if err := write(ctx, s); err != nil {
		errs = append(errs, err)
	} else if err := sign(ctx, s, in); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("run %s: evidence is incomplete: %w", rep.RunArtifactDir, errors.Join(errs...))
	}
	return rep, nil
}

// closeEvidence closes the event log and flushes the trace, with the
// report's freshness filled in and the signing prepared between.
func closeEvidence(s *runsink.Sink, in Input) []error {
	var errs []error
	rep := s.Report
	if s.Events != nil {
		if err := s.Events.Close(); err != nil {
			errs = append(errs, err)
		}
		rep.Freshness.FinalEventHash = s.Events.Head()
		rep.Freshness.Events = s.Events.Count()
	}
	rep.Freshness.FinishedAt = in.Clock().UTC()
	rep.Freshness.ClockJumps = in.Jumps()
	for _, name := range evidence.FinalArtifacts() {
		s.Trace.Trace(ctoharness.TraceWrite, s.Dir.Path(name))
	}
	prepareSigning(s, in)
	if err := s.Trace.Flush(s.Dir); err != nil {
		s.NoteNoSpace(err, ctoharness.StepReport)
		errs = append(errs, err)
	}
	return errs
}

// write writes report.json, report.md and report.html; a full disk that
// nothing failed for until now gives the run's bulk back and is retried.
func write(ctx context.Context, s *runsink.Sink) error {
	page := renderPage(s) // first: a page that cannot be rendered changes the status
	err := s.Dir.WriteReport(ctx, s.Report, reportmd.Markdown(s.Report), page)
	if runsink.NoSpace(err) && !s.Freed() {
		// Nothing failed for space until the report itself: free it and retry.
		s.NoteNoSpace(err, ctoharness.StepReport)
		s.FreeSpace()
		unqualified(s.Report)
		page = renderPage(s)
		err = s.Dir.WriteReport(ctx, s.Report, reportmd.Markdown(s.Report), page)
	}
	return err
}

// verdict sets the status and outcome the blockers say.
func verdict(rep *ctoharness.Report) {
	rep.Status = ctoharness.StatusFor(rep.Blockers)
	rep.Outcome = ctoharness.OutcomeFor(rep.Blockers)
}

// unqualified is the verdict after a late blocker: never stage evidence.
func unqualified(rep *ctoharness.Report) {
	verdict(rep)
	rep.Qualifies = false
}

func codes(rep *ctoharness.Report) []string {
	out := []string{}
	for _, b := range rep.Blockers {
		out = append(out, string(b.Code))
	}
	return out
}

// ensureFile writes an artifact that every run carries if a step did not.
func ensureFile(ctx context.Context, s *runsink.Sink, name string, data []byte) {
	if _, err := os.Lstat(s.Dir.Path(name)); err == nil {
		return
	}
	if err := s.Dir.WriteFile(ctx, name, data); err != nil {
		s.BlockWrite(err, ctoharness.StepReport)
	}
}

// appendCost appends the run's line to the runs directory's cost ledger
// (package ledger): who ran as Case and as adversary, what the model
// meter counted, and the verdict the report is written with. A line that
// cannot be appended blocks the run: a ledger that misses runs would
// understate what they cost.
func appendCost(s *runsink.Sink, in Input) {
	if err := ledger.Append(in.RunsDir, ledger.FromReport(s.Report, in.Clock())); err != nil {
		s.BlockWrite(fmt.Errorf("the run's line could not be appended to the cost ledger: %w; check that %s is writable", err, ledger.Path(in.RunsDir)), ctoharness.StepReport)
	}
}

// Start is what a run's report starts from.
type Start struct {
	RunID, Nonce      string
	Stage             int
	Profile           string
	Workspace, RunDir string
	StartedAt         time.Time
	Policy            ctoharness.Policy
	Fault             string
	Trial             *ctoharness.TrialBinding
}

// New is the report a run starts from: every list empty rather than
// null, and the verification not reached.
func New(st Start) *ctoharness.Report {
	return &ctoharness.Report{
		SchemaVersion:        ctoharness.SchemaVersion,
		RunID:                st.RunID,
		Stage:                st.Stage,
		CaseLane:             ctoharness.LaneNone,
		RuntimeWorkspaceRoot: st.Workspace,
		RunArtifactDir:       st.RunDir,
		Policy:               st.Policy,
		AllowedPaths:         []string{},
		ChangedFiles:         []ctoharness.ChangedFile{},
		Blockers:             []ctoharness.Blocker{},
		Case:                 ctoharness.CaseRecord{Argv: []string{}, EnvKeys: []string{}},
		Tests: ctoharness.TestsRecord{Classification: ctoharness.TestNotRun, Reason: "the run did not reach verification", LogPath: evidence.TestLog,
			Profile: st.Profile, Findings: []ctoharness.ScanFinding{}, Scripts: []string{}},
		Profile:        st.Profile,
		Sandbox:        ctoharness.SandboxRecord{Mechanisms: []string{}, WritableRoots: []string{}, ReadOnlyRoots: []string{}, EnvAllowlist: []string{}},
		Freshness:      ctoharness.Freshness{RunID: st.RunID, Nonce: st.Nonce, StartedAt: st.StartedAt, HarnessVersion: ctoharness.Version},
		FaultInjection: st.Fault,
		Trial:          st.Trial,
	}
}
