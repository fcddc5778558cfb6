package ctoharness

import "time"

// TaskCheck is a task's pre-flight record (task-check.json, written by
// cto-harness task check): the task's verification run, N times, on a
// fresh checkout of its base and of its reference solution, each through
// the whole pipeline, with what every listed test did there. A task is
// valid when every run passed (the reference passes its fail-to-pass and
// pass-to-pass tests, and no fail-to-pass test passes on the baseline) and
// every repeat gave the same outcomes.
type TaskCheck struct {
	SchemaVersion string    `json:"schema_version"`
	CheckedAt     time.Time `json:"checked_at"`
	Source        string    `json:"source"`
	BaseCommit    string    `json:"base_commit"`
	// TaskDigest and HiddenTestsDigest are the runs' task criteria: the
	// task spec as the harness read it, and its hidden tests.
	TaskDigest        string `json:"task_digest"`
	HiddenTestsDigest string `json:"hidden_tests_digest"`
	// Reference is the reference solution as given (a patch file or a
	// revision of the source); ReferenceDigest is the sha256 of the patch
	// that was applied.
	Reference       string         `json:"reference"`
	ReferenceDigest string         `json:"reference_digest"`
	Repeats         int            `json:"repeats"`
	Runs            []TaskCheckRun `json:"runs"`
	Valid           bool           `json:"valid"`
	Problems        []string       `json:"problems"`
}

// TaskCheckRun is one repeat of a task check: one whole run whose Case
// applied the reference.
type TaskCheckRun struct {
	RunID    string   `json:"run_id"`
	RunDir   string   `json:"run_dir"`
	Status   Status   `json:"status"`
	Blockers []string `json:"blockers"`
	// Why is the first blocker's message ("" for a pass).
	Why string `json:"why,omitempty"`
	// EvidenceProblem is what validate found wrong with the run's
	// evidence ("" when it validated).
	EvidenceProblem string `json:"evidence_problem,omitempty"`
	// Result and Baseline are the listed tests' outcomes on the reference
	// and on the base (fail-to-pass tests only, as the baseline run holds
	// them).
	Result   []GradedTest `json:"result"`
	Baseline []GradedTest `json:"baseline"`
}

// TaskCheckRef is what a run's report records of the task check it
// required (run --require-task-check): the record itself is in the run
// directory as task-check.json, byte for byte as given.
type TaskCheckRef struct {
	Artifact  string    `json:"artifact"`
	Digest    string    `json:"digest"` // sha256 of the record's bytes
	Valid     bool      `json:"valid"`
	Repeats   int       `json:"repeats"`
	CheckedAt time.Time `json:"checked_at"`
	// KeyID is the trusted key whose signature over the record verified;
	// "" when it was given unsigned.
	KeyID string `json:"key_id"`
}
