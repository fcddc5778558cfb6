package attest

import (
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// RunPredicate is the predicate of a run attestation: what the run was and
// how it ended, so that the signature covers the verdict and not only the
// bytes. Schema: schemas/run-predicate.schema.json.
type RunPredicate struct {
	RunID          string             `json:"run_id"`
	Stage          int                `json:"stage"`
	Status         ctoharness.Status  `json:"status"`
	Blockers       []string           `json:"blockers"`
	Nonce          string             `json:"nonce"`
	Commits        ctoharness.Commits `json:"commits"`
	Gate           GateValues         `json:"gate"`
	Sandbox        SandboxStrength    `json:"sandbox"`
	Qualifies      bool               `json:"qualifies_as_stage_evidence"`
	Harness        HarnessIdentity    `json:"harness"`
	FinalEventHash string             `json:"final_event_hash"`
	StartedAt      time.Time          `json:"started_at"`
	FinishedAt     time.Time          `json:"finished_at"`
	SignedAt       time.Time          `json:"signed_at"`
	// Trial repeats report.json's trial binding, so that the signature says
	// which request the run answers.
	Trial *ctoharness.TrialBinding `json:"trial,omitempty"`
	// Task repeats report.json's task_criteria: the signature says what the
	// verdict was judged by.
	Task *ctoharness.TaskCriteria `json:"task,omitempty"`
}

// GateValues are the gate inputs the run saw.
type GateValues struct {
	AllowCase      string         `json:"allow_case"`
	CaseStage      string         `json:"case_stage"`
	PreviousRecord *PreviousStage `json:"previous_stage_record"`
}

// PreviousStage names the previous stage's record the gate read, and
// whether the gate verified its signature (and by which key): a record
// accepted unsigned, under an explicit opt-out, is visible in the signed
// predicate.
type PreviousStage struct {
	Stage             int    `json:"stage"`
	RunID             string `json:"run_id"`
	RecordDigest      string `json:"record_digest"`
	SignatureVerified bool   `json:"signature_verified"`
	KeyID             string `json:"key_id"`
}

// SandboxStrength summarizes the confinement in force.
type SandboxStrength struct {
	Enforced    bool     `json:"enforced"`
	Mechanisms  []string `json:"mechanisms"`
	LandlockABI int      `json:"landlock_abi"`
	Unsandboxed bool     `json:"unsandboxed_opt_out"`
}

// HarnessIdentity is the software that produced the evidence. The binary is
// named by its Go build ID, whose last part is a hash of the linked
// executable's content: 'go tool buildid FILE' prints it. A full sha256 of a
// 20 MB binary costs about 15 ms of CPU per run, more than the whole
// signing budget on a small repository.
type HarnessIdentity struct {
	Version       string `json:"version"`
	SchemaVersion string `json:"schema_version"`
	BinaryBuildID string `json:"binary_build_id"`
}

// StageRecordPredicate is the predicate of a signed stage validation record.
// Schema: schemas/stage-record-predicate.schema.json.
type StageRecordPredicate struct {
	Stage          int       `json:"stage"`
	RunID          string    `json:"run_id"`
	ReportSHA256   string    `json:"report_sha256"`
	RecordDigest   string    `json:"record_digest"`
	ValidatedAt    time.Time `json:"validated_at"`
	HarnessVersion string    `json:"harness_version"`
}
