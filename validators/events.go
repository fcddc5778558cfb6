package validators

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// Checks on the event log: hash chain, order, freshness.

func checkEventChain(v *runView, c collector) {
	if v.eventsErr != "" {
		c.fail("event_chain", evidence.EventsFile, "%s", v.eventsErr)
		return
	}
	prev := evidence.GenesisHash(v.report.RunID, v.report.Freshness.Nonce)
	for i, e := range v.events {
		if e.Seq != i+1 {
			c.fail("event_chain", evidence.EventsFile, "line %d has seq %d", i+1, e.Seq)
			return
		}
		if e.Prev != prev {
			c.fail("event_chain", evidence.EventsFile, "line %d breaks the hash chain (prev %s, expected %s)", i+1, e.Prev, prev)
			return
		}
		prev = evidence.LineHash(e.line)
	}
	if prev != v.report.Freshness.FinalEventHash {
		c.fail("event_chain", evidence.EventsFile, "chain head %s does not match report freshness.final_event_hash %s", prev, v.report.Freshness.FinalEventHash)
	}
	if v.log.n != v.report.Freshness.Events {
		c.fail("event_chain", evidence.EventsFile, "%d events, report says %d", v.log.n, v.report.Freshness.Events)
	}
}

// harnessOrder is the order harness events must keep relative to each other.
var harnessOrder = []ctoharness.EventType{
	ctoharness.EvRunStarted, ctoharness.EvGateChecked, ctoharness.EvSourceClassified, ctoharness.EvSourceProofBefore,
	ctoharness.EvFixtureCopied, ctoharness.EvBaselineCommitted, ctoharness.EvFixtureCleanStart, ctoharness.EvTaskContractWritten,
	ctoharness.EvFakeChangeApplied, ctoharness.EvCaseProcessStarted, ctoharness.EvCaseProcessExited, ctoharness.EvChangesCollected,
	ctoharness.EvCheckoutMade, ctoharness.EvSetupDone, ctoharness.EvVerificationDone, ctoharness.EvFixtureCleanEnd, ctoharness.EvSourceProofAfter, ctoharness.EvSourceNonMutation,
	ctoharness.EvRunFinished,
}

// ExpectedEvents is the full harness event sequence of a passing run at stage n.
func ExpectedEvents(stage int) []ctoharness.EventType {
	var out []ctoharness.EventType
	for _, t := range harnessOrder {
		switch {
		case stage == 1 && (t == ctoharness.EvCaseProcessStarted || t == ctoharness.EvCaseProcessExited):
		case stage != 1 && t == ctoharness.EvFakeChangeApplied:
		case t == ctoharness.EvSetupDone: // only when the task has a setup command
		default:
			out = append(out, t)
		}
	}
	return out
}

// withSetup is a pass run's event sequence with setup_finished in its place.
func withSetup(events []ctoharness.EventType) []ctoharness.EventType {
	var out []ctoharness.EventType
	for _, t := range events {
		if t == ctoharness.EvVerificationDone {
			out = append(out, ctoharness.EvSetupDone)
		}
		out = append(out, t)
	}
	return out
}

func checkEventOrder(v *runView, c collector) {
	if v.log.n == 0 {
		c.fail("event_order", evidence.EventsFile, "no events")
		return
	}
	const chk = "event_order"
	if v.log.first.Type != ctoharness.EvRunStarted {
		c.fail(chk, evidence.EventsFile, "first event is %s, want run_started", v.log.first.Type)
	}
	last := *v.log.last
	if last.Type != ctoharness.EvRunFinished {
		c.fail(chk, evidence.EventsFile, "last event is %s, want run_finished", last.Type)
	} else {
		var d struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(last.Data, &d)
		if d.Status != string(v.report.Status) {
			c.fail(chk, evidence.EventsFile, "run_finished says status %q, report says %q", d.Status, v.report.Status)
		}
	}
	rank := map[ctoharness.EventType]int{}
	for i, t := range harnessOrder {
		rank[t] = i
	}
	var harness []ctoharness.EventType
	inCase := false
	caseEvents := map[ctoharness.EventType]bool{}
	lastRank := -1
	seen := map[ctoharness.EventType]int{}
	for _, e := range v.events {
		switch {
		case strings.HasPrefix(string(e.Type), "case."):
			if !inCase {
				c.fail(chk, evidence.EventsFile, "Case event %s (seq %d) outside the Case process's lifetime", e.Type, e.Seq)
			}
			caseEvents[e.Type] = true
			continue
		case e.Type == ctoharness.EvRunBlocked:
			continue
		case e.Type == ctoharness.EvCommandRefused:
			// The exec watch refuses commands while Case's processes live.
			if !inCase {
				c.fail(chk, evidence.EventsFile, "event %s (seq %d) outside the Case process's lifetime", e.Type, e.Seq)
			}
			continue
		}
		seen[e.Type]++
		if seen[e.Type] > 1 {
			c.fail(chk, evidence.EventsFile, "event %s appears more than once", e.Type)
		}
		if rank[e.Type] < lastRank {
			c.fail(chk, evidence.EventsFile, "event %s (seq %d) is out of order", e.Type, e.Seq)
		}
		lastRank = rank[e.Type]
		harness = append(harness, e.Type)
		inCase = e.Type == ctoharness.EvCaseProcessStarted
	}
	started := seen[ctoharness.EvCaseProcessStarted] > 0
	if started != v.report.CaseProcessStarted {
		c.fail(chk, evidence.EventsFile, "case_process_started event present=%v but report says %v", started, v.report.CaseProcessStarted)
	}
	if started && v.report.Stage == 1 {
		c.fail(chk, evidence.EventsFile, "stage 1 must not start a Case process")
	}
	for _, b := range v.report.Blockers {
		if b.Step == ctoharness.StepGate && started {
			c.fail(chk, evidence.EventsFile, "the gate blocked (%s) but a Case process was started", b.Code)
		}
	}
	if (seen[ctoharness.EvSetupDone] > 0) != (v.report.Setup != nil) {
		c.fail(chk, evidence.EventsFile, "setup_finished present=%v but report.json has a setup record=%v", seen[ctoharness.EvSetupDone] > 0, v.report.Setup != nil)
	}
	if v.report.Status == ctoharness.StatusPass {
		want := ExpectedEvents(v.report.Stage)
		if v.report.Setup != nil {
			want = withSetup(want)
		}
		if !reflect.DeepEqual(harness, want) {
			c.fail(chk, evidence.EventsFile, "a passing stage %d run must have events %v, got %v", v.report.Stage, want, harness)
		}
		if started {
			for _, t := range ctoharness.RequiredCaseEvents() {
				if !caseEvents[t] {
					c.fail(chk, evidence.EventsFile, "required Case event %s is missing", t)
				}
			}
		}
	}
}

func checkFreshness(v *runView, c collector) {
	const chk = "freshness"
	r := v.report
	f := r.Freshness
	if f.RunID != r.RunID {
		c.fail(chk, evidence.ReportJSON, "freshness.run_id %s != run_id %s", f.RunID, r.RunID)
	}
	if filepath.Base(v.dir) != r.RunID {
		c.fail(chk, evidence.ReportJSON, "run directory %s is not named after run_id %s", filepath.Base(v.dir), r.RunID)
	}
	if f.HarnessVersion != ctoharness.Version {
		c.fail(chk, evidence.ReportJSON, "made by harness %s, this is %s", f.HarnessVersion, ctoharness.Version)
	}
	if f.FinishedAt.Before(f.StartedAt) {
		c.fail(chk, evidence.ReportJSON, "finished_at is before started_at")
	}
	inWindow := func(t time.Time) bool { return !t.Before(f.StartedAt) && !t.After(f.FinishedAt) }
	var prev time.Time
	for _, e := range v.events {
		if e.RunID != r.RunID {
			c.fail(chk, evidence.EventsFile, "event %d has run_id %s", e.Seq, e.RunID)
			break
		}
		if !inWindow(e.Time) || e.Time.Before(prev) {
			c.fail(chk, evidence.EventsFile, "event %d time %s is outside the run window or goes backwards", e.Seq, e.Time.Format(time.RFC3339Nano))
			break
		}
		prev = e.Time
		if e.Type == ctoharness.EvRunStarted {
			var d struct {
				Nonce string                   `json:"nonce"`
				Trial *ctoharness.TrialBinding `json:"trial"`
			}
			_ = json.Unmarshal(e.Data, &d)
			if d.Nonce != f.Nonce {
				c.fail(chk, evidence.EventsFile, "run_started nonce %q does not match the report's %q", d.Nonce, f.Nonce)
			}
			if !sameTrial(d.Trial, r.Trial) {
				c.fail(chk, evidence.EventsFile, "run_started binds the run to trial %s, report.json to trial %s", describeTrial(d.Trial), describeTrial(r.Trial))
			}
		}
	}
	for _, t := range v.trace {
		if t.RunID != r.RunID {
			c.fail(chk, evidence.TraceFile, "entry %d has run_id %s", t.Seq, t.RunID)
			break
		}
	}
	for _, name := range []string{evidence.TaskFile, evidence.SourceBefore, evidence.SourceAfter, evidence.NonMutation, evidence.CleanStart, evidence.CleanEnd} {
		if !v.files[name] {
			continue
		}
		var d struct {
			RunID   string     `json:"run_id"`
			TakenAt *time.Time `json:"taken_at"`
		}
		data, _ := os.ReadFile(v.path(name))
		if json.Unmarshal(data, &d) != nil {
			continue // reported by artifact_schemas
		}
		if d.RunID != r.RunID {
			c.fail(chk, name, "run_id %q is not this run's %q (stale or copied evidence)", d.RunID, r.RunID)
		}
		if d.TakenAt != nil && !inWindow(*d.TakenAt) {
			c.fail(chk, name, "taken_at %s is outside the run window", d.TakenAt.Format(time.RFC3339Nano))
		}
	}
}
