package ctoharness

import (
	"encoding/json"
	"time"
)

// EventType names a normalized event. Case's own events are namespaced "case.*".
type EventType string

// Harness events, in the order a full run emits them.
const (
	EvRunStarted          EventType = "run_started"
	EvGateChecked         EventType = "gate_checked"
	EvSourceClassified    EventType = "source_classified"
	EvSourceProofBefore   EventType = "source_proof_before"
	EvFixtureCopied       EventType = "fixture_copied"
	EvBaselineCommitted   EventType = "baseline_committed"
	EvFixtureCleanStart   EventType = "fixture_clean_start"
	EvTaskContractWritten EventType = "task_contract_written"
	EvFakeChangeApplied   EventType = "fake_change_applied"
	EvCaseProcessStarted  EventType = "case_process_started"
	EvCaseProcessExited   EventType = "case_process_exited"
	EvChangesCollected    EventType = "changes_collected"
	EvCheckoutMade        EventType = "checkout_made"
	EvSetupDone           EventType = "setup_finished"
	EvVerificationDone    EventType = "verification_finished"
	EvFixtureCleanEnd     EventType = "fixture_clean_end"
	EvSourceProofAfter    EventType = "source_proof_after"
	EvSourceNonMutation   EventType = "source_non_mutation_checked"
	EvRunBlocked          EventType = "run_blocked"
	// EvCommandRefused is a command of Case's that the exec watch refused
	// (over the profile's budget, or an install it does not allow); it may
	// repeat while the Case process lives.
	EvCommandRefused EventType = "command_refused"
	EvRunFinished    EventType = "run_finished"
)

// Case events: what a Case process writes as JSON lines on stdout.
const (
	EvCaseStarted     EventType = "case.started"
	EvCaseFileChanged EventType = "case.file_changed"
	EvCaseCommand     EventType = "case.command"
	EvCaseLog         EventType = "case.log"
	EvCaseFinished    EventType = "case.finished"
)

// RequiredCaseEvents must each appear at least once in a Case run.
func RequiredCaseEvents() []EventType { return []EventType{EvCaseStarted, EvCaseFinished} }

// AllEventTypes lists every event type; the schema enum is checked against it.
func AllEventTypes() []EventType {
	return []EventType{EvRunStarted, EvGateChecked, EvSourceClassified, EvSourceProofBefore,
		EvFixtureCopied, EvBaselineCommitted, EvFixtureCleanStart, EvTaskContractWritten,
		EvFakeChangeApplied, EvCaseProcessStarted, EvCaseProcessExited, EvChangesCollected,
		EvCheckoutMade, EvSetupDone, EvVerificationDone, EvFixtureCleanEnd, EvSourceProofAfter, EvSourceNonMutation,
		EvRunBlocked, EvRunFinished, EvCommandRefused,
		EvCaseStarted, EvCaseFileChanged, EvCaseCommand, EvCaseLog, EvCaseFinished}
}

// Event is one line of events.normalized.jsonl. Prev is the sha256 (hex) of
// the previous line's bytes; the first line's Prev is GenesisHash(run, nonce).
type Event struct {
	Seq   int             `json:"seq"`
	Time  time.Time       `json:"time"`
	RunID string          `json:"run_id"`
	Type  EventType       `json:"type"`
	Data  json.RawMessage `json:"data"`
	Prev  string          `json:"prev"`
}
