package ctoharness

import (
	"errors"
	"fmt"
)

// BlockerCode is a typed reason a run did not pass. Codes are stable: they are
// matched by validators, the failure matrix and CI.
type BlockerCode string

// Gate and stage-ladder blockers.
const (
	BlockStageUnknown      BlockerCode = "STAGE_UNKNOWN"
	BlockStageNotApproved  BlockerCode = "STAGE_NOT_APPROVED"
	BlockAllowCaseMissing  BlockerCode = "GATE_ALLOW_CASE_MISSING"
	BlockCaseStageMissing  BlockerCode = "GATE_CASE_STAGE_MISSING"
	BlockCaseStageMismatch BlockerCode = "GATE_CASE_STAGE_MISMATCH"
	BlockBackendNotAllowed BlockerCode = "GATE_BACKEND_NOT_ALLOWED"
	BlockPrevStageMissing  BlockerCode = "PREVIOUS_STAGE_EVIDENCE_MISSING"
	BlockPrevStageInvalid  BlockerCode = "PREVIOUS_STAGE_EVIDENCE_INVALID"
	BlockPrevStageStale    BlockerCode = "PREVIOUS_STAGE_EVIDENCE_STALE"
	BlockPrevStageTampered BlockerCode = "PREVIOUS_STAGE_EVIDENCE_TAMPERED"
	BlockPrevStageSchema   BlockerCode = "PREVIOUS_STAGE_SCHEMA_MISMATCH"
	BlockConfigInvalid     BlockerCode = "CONFIG_INVALID"
	BlockTaskInvalid       BlockerCode = "TASK_INVALID"
	// BlockTaskRequired: a run on the user's own repository was given no
	// task: the built-in sample task would grade none of its tests.
	BlockTaskRequired          BlockerCode = "TASK_REQUIRED"
	BlockCaseCommandMissing    BlockerCode = "CASE_COMMAND_MISSING"
	BlockSandboxUnavailable    BlockerCode = "SANDBOX_UNAVAILABLE"
	BlockGovernanceUnavailable BlockerCode = "GOVERNANCE_UNAVAILABLE"
)

// Source classification and source proof blockers.
const (
	BlockSourceNotLocal       BlockerCode = "SOURCE_NOT_LOCAL"
	BlockSourceNotFound       BlockerCode = "SOURCE_NOT_FOUND"
	BlockSourceSymlink        BlockerCode = "SOURCE_SYMLINK"
	BlockSourceNotGit         BlockerCode = "SOURCE_NOT_GIT"
	BlockSourceBare           BlockerCode = "SOURCE_BARE"
	BlockSourceLinkedWorktree BlockerCode = "SOURCE_LINKED_WORKTREE"
	BlockSourceAlternates     BlockerCode = "SOURCE_ALTERNATES"
	BlockSourceNotOwned       BlockerCode = "SOURCE_NOT_OWNED"
	BlockSourceIsTarget       BlockerCode = "SOURCE_IS_TARGET_REPOSITORY"
	BlockSourceExternal       BlockerCode = "SOURCE_EXTERNAL"
	BlockSourceUnreadable     BlockerCode = "SOURCE_UNREADABLE"
	BlockSourceDirty          BlockerCode = "SOURCE_DIRTY"
	BlockSourceMutated        BlockerCode = "SOURCE_MUTATED"
)

// Fixture, Case and verification blockers.
const (
	BlockCopyFailed           BlockerCode = "COPY_FAILED"
	BlockCopyUnfaithful       BlockerCode = "COPY_UNFAITHFUL"
	BlockFixtureDirtyStart    BlockerCode = "FIXTURE_DIRTY_START"
	BlockFixtureDirtyEnd      BlockerCode = "FIXTURE_DIRTY_END"
	BlockCaseStartFailed      BlockerCode = "CASE_START_FAILED"
	BlockCaseExitNonZero      BlockerCode = "CASE_EXIT_NONZERO"
	BlockCaseTimeout          BlockerCode = "TIMEOUT"
	BlockCaseEventMalformed   BlockerCode = "CASE_EVENT_MALFORMED"
	BlockCaseEventOrder       BlockerCode = "CASE_EVENT_ORDER"
	BlockMissingRequiredEvent BlockerCode = "MISSING_REQUIRED_EVENT"
	BlockDisallowedChange     BlockerCode = "DISALLOWED_CHANGE"
	BlockProtectedPathChange  BlockerCode = "PROTECTED_PATH_CHANGED"
	BlockCollectFailed        BlockerCode = "COLLECT_FAILED"
	BlockTestsFailed          BlockerCode = "TESTS_FAILED"
	BlockTestTimeout          BlockerCode = "TEST_TIMEOUT"
	BlockTestNotRun           BlockerCode = "TEST_NOT_RUN"
	BlockTestFlake            BlockerCode = "TEST_FLAKE"
	BlockDangerousScript      BlockerCode = "BLOCKED_DANGEROUS_SCRIPT"
	BlockTestScope            BlockerCode = "TEST_SCOPE_VIOLATION"
	// BlockAdversarialFailed: a test the task's adversary wrote failed on
	// the baseline (it tells the change from no change) and on the result.
	BlockAdversarialFailed BlockerCode = "ADVERSARIAL_TESTS_FAILED"
	// BlockAdversaryFailed: the task has an adversary and its step could
	// not be completed (it could not run, its tests could not be read or
	// run): the verdict is not given without it.
	BlockAdversaryFailed BlockerCode = "ADVERSARY_FAILED"
	// BlockAdversaryNotConfirmed: the adversary's generated tests run only
	// once a person confirms them, and nobody did: there was no terminal
	// to ask on and no --auto-confirm (refused before Case), or the person
	// declined.
	BlockAdversaryNotConfirmed BlockerCode = "ADVERSARY_NOT_CONFIRMED"
	BlockTestBudget            BlockerCode = "TEST_BUDGET_EXHAUSTED"
	BlockBudgetExceeded        BlockerCode = "BUDGET_EXCEEDED"
	BlockArtifactWriteFailed   BlockerCode = "ARTIFACT_WRITE_FAILED"
	BlockInternal              BlockerCode = "INTERNAL_ERROR"
	BlockStageRecordUntrusted  BlockerCode = "STAGE_RECORD_UNTRUSTED"
)

// Coding-agent blockers (--agent).
const (
	BlockAgentConfigInvalid BlockerCode = "AGENT_CONFIG_INVALID"
	BlockAgentNotInstalled  BlockerCode = "AGENT_NOT_INSTALLED"
	BlockAgentModelError    BlockerCode = "AGENT_MODEL_ERROR"
	BlockAgentNoChange      BlockerCode = "AGENT_NO_CHANGE"
	BlockSecretInEvidence   BlockerCode = "SECRET_IN_EVIDENCE"
)

// Source status blockers: a repository whose status the harness would
// have to run a program for, or whose format it does not read.
const (
	BlockSourceFilterConfigured    BlockerCode = "SOURCE_FILTER_CONFIGURED"
	BlockSourceFsmonitorConfigured BlockerCode = "SOURCE_FSMONITOR_CONFIGURED"
	BlockSourceCoreWorktree        BlockerCode = "SOURCE_CORE_WORKTREE"
	BlockSourceObjectFormat        BlockerCode = "SOURCE_OBJECT_FORMAT_UNSUPPORTED"
	BlockSourceRefStorage          BlockerCode = "SOURCE_REF_STORAGE_UNSUPPORTED"
	BlockSourceGitFeature          BlockerCode = "SOURCE_GIT_FEATURE_UNSUPPORTED"
	// BlockSourceBusy: a git process is working in the source (gc,
	// maintenance, or a lock file it holds), so the source may change
	// under the run.
	BlockSourceBusy BlockerCode = "SOURCE_BUSY"
	// BlockLFSObjectMissing: a Git LFS file's content is not in the
	// source's local LFS store (or does not match its pointer), so the
	// copy cannot write what git-lfs would check out.
	BlockLFSObjectMissing BlockerCode = "LFS_OBJECT_MISSING"
	// BlockSnapshotChanged: the harness's snapshot of the base (the
	// fixture overlay's lower layer) is not what its record lists, or the
	// record is not intact: something wrote it after it was made.
	BlockSnapshotChanged BlockerCode = "SNAPSHOT_CHANGED"
)

// BlockPrevStageUnproven: a previous stage's record is intact, but what it
// claims is not true of the run it names (missing, not passing, another
// stage, another runs directory, relocated).
const BlockPrevStageUnproven BlockerCode = "PREVIOUS_STAGE_EVIDENCE_UNPROVEN"

// Faults of the run itself: an interrupt, or Case exceeding its event limits.
const (
	BlockInterrupted    BlockerCode = "INTERRUPTED"
	BlockCaseEventLimit BlockerCode = "CASE_EVENT_LIMIT"
)

// The verification checkout: a fresh checkout of the result that could not
// be made, or that does not give the result tree.
const (
	BlockCheckoutFailed     BlockerCode = "CHECKOUT_FAILED"
	BlockCheckoutUnfaithful BlockerCode = "CHECKOUT_UNFAITHFUL"
	// BlockSetupFailed: the task's setup command failed, timed out or was
	// refused, so the verification did not run.
	BlockSetupFailed BlockerCode = "SETUP_FAILED"
)

// BlockUnsafeFileName: Case left a file whose name holds a control, format
// or bidi character (an escape sequence, a newline, U+202E). No honest change
// needs one, and such a name can repaint a terminal or reorder what a
// reviewer reads, so the run is refused however the name is displayed.
const BlockUnsafeFileName BlockerCode = "UNSAFE_FILE_NAME"

// Model provider failures (--agent): the endpoint could not be reached before
// Case started, or the agent's model requests kept failing or stalled while
// it ran. The harness stops Case on these rather than waiting out its timeout.
const (
	BlockModelEndpointUnreachable BlockerCode = "MODEL_ENDPOINT_UNREACHABLE"
	BlockModelAPIError            BlockerCode = "MODEL_API_ERROR"
	BlockModelRateLimited         BlockerCode = "MODEL_RATE_LIMITED"
	BlockModelStalled             BlockerCode = "MODEL_STALLED"
)

// failedCodes are outcomes of work that was allowed to run (the agent or its
// tests did not succeed). Every other code means a precondition or policy
// refused the run, which makes the status "blocked".
var failedCodes = map[BlockerCode]bool{
	BlockCaseExitNonZero:   true,
	BlockTestsFailed:       true,
	BlockAdversarialFailed: true,
	BlockTestTimeout:       true,
	BlockTestFlake:         true,
}

// AllBlockerCodes lists every code; the schema enum is checked against it.
func AllBlockerCodes() []BlockerCode {
	return []BlockerCode{
		BlockStageUnknown, BlockStageNotApproved, BlockAllowCaseMissing, BlockCaseStageMissing,
		BlockCaseStageMismatch, BlockBackendNotAllowed, BlockPrevStageMissing, BlockPrevStageInvalid,
		BlockPrevStageStale, BlockPrevStageTampered, BlockPrevStageSchema, BlockConfigInvalid,
		BlockTaskInvalid, BlockCaseCommandMissing, BlockSandboxUnavailable, BlockGovernanceUnavailable,
		BlockSourceNotLocal, BlockSourceNotFound, BlockSourceSymlink, BlockSourceNotGit, BlockSourceBare,
		BlockSourceLinkedWorktree, BlockSourceAlternates, BlockSourceNotOwned, BlockSourceIsTarget,
		BlockSourceExternal, BlockSourceUnreadable, BlockSourceDirty, BlockSourceMutated,
		BlockCopyFailed, BlockCopyUnfaithful, BlockFixtureDirtyStart, BlockFixtureDirtyEnd,
		BlockCaseStartFailed, BlockCaseExitNonZero, BlockCaseTimeout, BlockCaseEventMalformed,
		BlockMissingRequiredEvent, BlockDisallowedChange, BlockProtectedPathChange, BlockCollectFailed,
		BlockTestsFailed, BlockTestTimeout, BlockTestNotRun, BlockTestFlake, BlockDangerousScript, BlockTestScope, BlockAdversarialFailed, BlockAdversaryFailed, BlockAdversaryNotConfirmed,
		BlockTestBudget, BlockBudgetExceeded, BlockArtifactWriteFailed, BlockInternal,
		BlockPrevStageUnproven, BlockCaseEventOrder, BlockStageRecordUntrusted,
		BlockAgentConfigInvalid, BlockAgentNotInstalled, BlockAgentModelError, BlockAgentNoChange,
		BlockSecretInEvidence,
		BlockSourceFilterConfigured, BlockSourceFsmonitorConfigured, BlockSourceCoreWorktree,
		BlockSourceObjectFormat, BlockSourceRefStorage, BlockSourceGitFeature,
		BlockInterrupted, BlockCaseEventLimit,
		BlockCheckoutFailed, BlockCheckoutUnfaithful, BlockSetupFailed,
		BlockUnsafeFileName, BlockSourceBusy, BlockLFSObjectMissing, BlockSnapshotChanged,
		BlockModelEndpointUnreachable, BlockModelAPIError, BlockModelRateLimited, BlockModelStalled,
		BlockTaskRequired,
	}
}

// Step names the pipeline step a blocker was raised in.
type Step string

// Pipeline steps, in order.
const (
	StepGate        Step = "gate"
	StepClassify    Step = "classify"
	StepSourceProof Step = "source_proof_before"
	StepCopy        Step = "copy"
	StepBaseline    Step = "baseline"
	StepCleanStart  Step = "clean_start"
	StepContract    Step = "task_contract"
	StepCase        Step = "case"
	StepCollect     Step = "collect"
	StepVerify      Step = "verify"
	StepCleanEnd    Step = "clean_end"
	StepSourceAfter Step = "source_proof_after"
	StepNonMutation Step = "non_mutation"
	StepReport      Step = "report"
)

// AllSteps lists the steps in pipeline order.
func AllSteps() []Step {
	return []Step{StepGate, StepClassify, StepSourceProof, StepCopy, StepBaseline, StepCleanStart,
		StepContract, StepCase, StepCollect, StepVerify, StepCleanEnd, StepSourceAfter, StepNonMutation, StepReport}
}

// Blocker is one typed reason a run did not pass.
type Blocker struct {
	Code    BlockerCode `json:"code"`
	Message string      `json:"message"`
	Step    Step        `json:"step"`
}

// BlockerError carries a Blocker through ordinary Go error returns so that
// packages can refuse with a typed code and callers can recover it with errors.As.
type BlockerError struct {
	Blocker Blocker
	Err     error
}

func (e *BlockerError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Blocker.Code, e.Blocker.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Blocker.Code, e.Blocker.Message)
}

func (e *BlockerError) Unwrap() error { return e.Err }

// Block builds a BlockerError.
func Block(code BlockerCode, step Step, err error, format string, args ...any) *BlockerError {
	return &BlockerError{Blocker: Blocker{Code: code, Step: step, Message: fmt.Sprintf(format, args...)}, Err: err}
}

// AsBlocker extracts the Blocker from err, or wraps an untyped error as an
// internal blocker at step so that no failure is ever silently dropped.
func AsBlocker(err error, step Step) Blocker {
	var be *BlockerError
	if errors.As(err, &be) {
		b := be.Blocker
		if be.Err != nil {
			b.Message = fmt.Sprintf("%s: %v", b.Message, be.Err)
		}
		if b.Step == "" {
			b.Step = step
		}
		return b
	}
	return Blocker{Code: BlockInternal, Step: step, Message: err.Error()}
}

// Status is the outcome of a run.
type Status string

// Run statuses.
const (
	StatusPass    Status = "pass"
	StatusBlocked Status = "blocked"
	StatusFailed  Status = "failed"
)

// StatusFor derives the run status from its blockers: pass iff none; failed
// iff every blocker is an outcome of work allowed to run; blocked otherwise.
func StatusFor(blockers []Blocker) Status {
	if len(blockers) == 0 {
		return StatusPass
	}
	for _, b := range blockers {
		if !failedCodes[b.Code] {
			return StatusBlocked
		}
	}
	return StatusFailed
}
