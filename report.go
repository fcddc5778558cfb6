package ctoharness

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Backend is who makes the change: the harness itself (stage 1) or a Case process.
type Backend string

// Backends.
const (
	BackendFake Backend = "fake"
	BackendCase Backend = "case"
)

// Lane selects which Case process the case backend starts.
type Lane string

// Lanes. LaneNone is recorded when no Case process is involved (stage 1).
const (
	LaneFake Lane = "fake"
	LaneReal Lane = "real"
	LaneNone Lane = "none"
)

// Report is report.json: the single summary a validator and CI read.
type Report struct {
	SchemaVersion           string         `json:"schema_version"`
	RunID                   string         `json:"run_id"`
	Stage                   int            `json:"stage"`
	StageName               string         `json:"stage_name"`
	Status                  Status         `json:"status"`
	Outcome                 Outcome        `json:"outcome"`
	Backend                 Backend        `json:"backend"`
	CaseLane                Lane           `json:"case_lane"`
	CaseProcessStarted      bool           `json:"case_process_started"`
	SourceRepositoryMutated bool           `json:"source_repository_mutated"`
	SourceNonMutation       NonMutationRef `json:"source_non_mutation"`
	SourcePath              string         `json:"source_path"`
	// SourceGitDir is the source's git directory when it is kept outside
	// the worktree (a gitfile names it): proven, hidden and never written
	// like the source itself.
	SourceGitDir         string            `json:"source_git_dir,omitempty"`
	Policy               Policy            `json:"policy"`
	RuntimeWorkspaceRoot string            `json:"runtime_workspace_root"`
	RunArtifactDir       string            `json:"run_artifact_dir"`
	FixturePath          string            `json:"fixture_path"`
	Commits              Commits           `json:"commits"`
	AllowedPaths         []string          `json:"allowed_paths"`
	ChangedFiles         []ChangedFile     `json:"changed_files"` // all of them; the pages show MaxFilesShown
	Blockers             []Blocker         `json:"blockers"`
	Case                 CaseRecord        `json:"case"`
	Tests                TestsRecord       `json:"tests"`
	Setup                *SetupRecord      `json:"setup,omitempty"`
	Sandbox              SandboxRecord     `json:"sandbox"`
	Network              *NetworkSummary   `json:"network,omitempty"`
	Profile              string            `json:"profile"`
	Qualifies            bool              `json:"qualifies_as_stage_evidence"`
	FaultInjection       string            `json:"fault_injection,omitempty"`
	ArtifactDigests      map[string]string `json:"artifact_digests"`
	Freshness            Freshness         `json:"freshness"`
	// Signed says attestation.dsse.json follows the report (a signing key was
	// configured); false means the evidence is unsigned and only tamper-evident.
	Signed       bool   `json:"signed"`
	SigningKeyID string `json:"signing_key_id"` // "" when unsigned; always present so signed and unsigned reports have one shape
	// UnsignedReason says why an unsigned run is unsigned (signing disabled
	// in the config, --unsandboxed, a view that showed the key).
	UnsignedReason string       `json:"unsigned_reason,omitempty"`
	Agent          *AgentRecord `json:"agent,omitempty"`
	// Criteria are what the verdict is judged by, fixed before Case
	// started (absent when the run was refused before its task was read).
	Criteria *TaskCriteria `json:"task_criteria,omitempty"`
	// HiddenTests are the task's verification files Case never saw (absent
	// when the task has none).
	HiddenTests *HiddenTests `json:"hidden_tests,omitempty"`
	// SampleTask says the built-in sample task ran on the user's own
	// repository (--sample-task, chosen on purpose): the verdict covers
	// that task only, not the repository's tests.
	SampleTask bool `json:"sample_task,omitempty"`
	// Trial binds the run to the batch trial attempt that asked for it;
	// absent for a run made outside a batch.
	Trial *TrialBinding `json:"trial,omitempty"`
	// FixtureObjects proves what of the source's object store reached
	// Case: the base's history as the task asked, nothing else (absent
	// when no fixture was made).
	FixtureObjects *FixtureObjects `json:"fixture_objects,omitempty"`
	// TaskCheck is the task check the run required (absent when it
	// required none).
	TaskCheck *TaskCheckRef `json:"task_check,omitempty"`
	// Adversarial is the adversarial step (absent when the task has no
	// adversary, or the run ended before it).
	Adversarial *AdversarialRecord `json:"adversarial,omitempty"`
}

// FixtureObjects is the fixture's object store as the copy left it, before
// the harness added the baseline commit: exactly the closure of the base
// commit under the task's history.
type FixtureObjects struct {
	BaseCommit string `json:"base_commit"`
	// History is "full" (the base and every ancestor), "none" (the base
	// tree alone, under a root baseline commit) or a depth.
	History string `json:"history"`
	// Commits of the source's history in the store (0 for "none").
	Commits int `json:"commits"`
	// Objects is how many objects the store held; Digest is the sha256 of
	// their hex ids, sorted, one per line.
	Objects int    `json:"objects"`
	Digest  string `json:"digest"`
	// Shallow are the commits whose parents were left out (a depth, or a
	// shallow source), sorted.
	Shallow []string `json:"shallow"`
	// LeftOut is how many objects of the source were left out: other
	// branches, tags, stashes, reflogs, unreachable objects, older history.
	LeftOut int `json:"left_out"`
}

// TestResultsSummary is what the verification's own test report said,
// test by test in tests.json and summed here.
type TestResultsSummary struct {
	Format   string `json:"format"`
	Path     string `json:"path"`
	Artifact string `json:"artifact"` // tests.json; "" when the report could not be read
	Total    int    `json:"total"`
	Pass     int    `json:"pass"`
	Fail     int    `json:"fail"`
	Error    int    `json:"error"`
	Skip     int    `json:"skip"`
	XFail    int    `json:"xfail"`
	// Failing are the first 20 failed or errored tests' ids.
	Failing []string `json:"failing"`
	// Flaky are the tests that failed in one run of the verification and
	// passed in a later one (flake reruns).
	Flaky []string `json:"flaky,omitempty"`
	// Problem says why no result could be read ("" when they were).
	Problem string `json:"problem,omitempty"`
	// Grading is the verdict of the task's fail_to_pass and pass_to_pass
	// lists on these results (absent without lists).
	Grading *Grading `json:"grading,omitempty"`
	// Planted says a file was at the report's path before the verification
	// ran (Case's result held it): it was removed, never read.
	Planted bool `json:"planted,omitempty"`
}

// Grading holds each listed test to its rule: a fail-to-pass test must
// pass (or be an expected failure); a pass-to-pass test must pass, be an
// expected failure, or be skipped; a listed test absent from the results
// counts as failed. Passed is true only when every listed test holds.
type Grading struct {
	Passed     bool         `json:"passed"`
	FailToPass []GradedTest `json:"fail_to_pass"`
	PassToPass []GradedTest `json:"pass_to_pass"`
	// Baseline is the verification run on the baseline, held against the
	// fail-to-pass tests (absent when the result's grading failed).
	Baseline *BaselineRun `json:"baseline,omitempty"`
}

// BaselineRun is the verification once more on a fresh checkout of the
// baseline: each fail-to-pass test must not pass there (OK: it did not).
type BaselineRun struct {
	Ran        bool         `json:"ran"`
	Problem    string       `json:"problem,omitempty"` // why it could not run or be read
	Log        string       `json:"log,omitempty"`     // baseline.log
	FailToPass []GradedTest `json:"fail_to_pass"`
	// PassToPass are the pass-to-pass tests held to passing there (OK: it
	// passed, was an expected failure or was skipped).
	PassToPass []GradedTest `json:"pass_to_pass,omitempty"`
	// PassToPassNote says why they were not held, in reports of runs whose
	// baseline did not run the setup; none is written now.
	PassToPassNote string `json:"pass_to_pass_note,omitempty"`
	// DurationMs is the whole baseline step (checkout, hidden tests, setup,
	// verification, reading its report); CommandMs the verification
	// command's part: what the baseline costs besides the tests themselves
	// is their difference.
	DurationMs int64 `json:"duration_ms,omitempty"`
	CommandMs  int64 `json:"command_ms,omitempty"`
}

// GradedTest is one listed test and what the result's report said of it.
type GradedTest struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"` // the report's outcome, or "missing"
	OK      bool   `json:"ok"`
}

// TaskCriteria are what a run's verdict is judged by, fixed in the
// source_classified event before Case starts and repeated in the signed
// predicate: the task spec's digest (sha256 of its JSON as the harness read
// it, a batch trial's task_digest), the hidden tests' digest, the test
// report and the graded lists.
type TaskCriteria struct {
	SpecDigest        string   `json:"spec_digest"`
	HiddenTestsDigest string   `json:"hidden_tests_digest,omitempty"`
	TestResults       string   `json:"test_results,omitempty"` // "format:path"
	FailToPass        []string `json:"fail_to_pass"`
	PassToPass        []string `json:"pass_to_pass"`
	SampleTask        bool     `json:"sample_task,omitempty"`
}

// HiddenTests records a task's hidden tests: read and digested before Case
// started, checked against that digest and laid over the verification
// checkout after it ended, archived in the run directory.
type HiddenTests struct {
	Dir    string `json:"dir"`
	Digest string `json:"digest"` // sha256 over each file's path, mode and content sha256, in path order
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
	// Overridden are the paths of Case's result the hidden files replaced.
	Overridden []string `json:"overridden"`
	// Archive is the run directory's tar of the files laid ("" until laid).
	Archive string `json:"archive,omitempty"`
}

// Policy is the classification policy the run was held to, recorded so a
// validator can check the trace against the Target Repository roots.
type Policy struct {
	OwnedSources  []string `json:"owned_sources"`
	TargetRoots   []string `json:"target_repository_roots"`
	ExternalRoots []string `json:"external_roots"`
}

// NonMutationRef says whether the before/after comparison ran and where its proof is.
type NonMutationRef struct {
	Checked   bool   `json:"checked"`
	ProofPath string `json:"proof_path"`
}

// Commits records the copy-faithfulness proof (tree hashes) and the fixture commits.
type Commits struct {
	SourceHead string `json:"source_head"`
	SourceTree string `json:"source_tree"`
	// BaseCommit and BaseTree are the commit the fixture was made from:
	// the source's HEAD, or the task's base (run --rev, "base").
	BaseCommit     string `json:"base_commit,omitempty"`
	BaseTree       string `json:"base_tree,omitempty"`
	BaselineCommit string `json:"baseline_commit"`
	BaselineTree   string `json:"baseline_tree"`
	ResultCommit   string `json:"result_commit"`
	ResultTree     string `json:"result_tree"`
}

// ChangeKind is how a file differs between baseline and result.
type ChangeKind string

// Change kinds.
const (
	ChangeAdded    ChangeKind = "added"
	ChangeModified ChangeKind = "modified"
	ChangeDeleted  ChangeKind = "deleted"
)

// ChangedFile is one path Case changed, with the allowed-path verdict.
//
// A file name is bytes, and JSON strings are UTF-8: encoding/json would turn
// every invalid byte into U+FFFD, so "x\xff" and "x\xfe" would read the same.
// Path is therefore the name when it is UTF-8, and otherwise a display form
// with each invalid byte written as git writes it (\377); PathB64 then holds
// the exact bytes. Name gives the name back either way.
type ChangedFile struct {
	Path    string     `json:"path"`
	PathB64 string     `json:"path_b64,omitempty"`
	Change  ChangeKind `json:"change"`
	Allowed bool       `json:"allowed"`
	Reason  string     `json:"reason,omitempty"`
}

// NewChangedFile records the file named name (raw bytes), filling Path and,
// for a name that is not UTF-8, PathB64.
func NewChangedFile(name string, kind ChangeKind, allowed bool, reason string) ChangedFile {
	path, b64 := PathForms(name)
	return ChangedFile{Path: path, PathB64: b64, Change: kind, Allowed: allowed, Reason: reason}
}

// Name is the file's exact name: PathB64 decoded when it is set, else Path.
// A PathB64 that is not base64 names no file: Name returns "" and ok false.
func (c ChangedFile) Name() (name string, ok bool) {
	if c.PathB64 == "" {
		return c.Path, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(c.PathB64)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// PathForms is how a name is stored: its display form (the name itself when
// it is UTF-8, else the name with each invalid byte as a backslash and three
// octal digits) and, only for a name that is not UTF-8, its bytes in base64.
func PathForms(name string) (path, b64 string) {
	if utf8.ValidString(name) {
		return name, ""
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\%03o`, name[i])
		} else {
			b.WriteString(name[i : i+n])
		}
		i += n
	}
	return b.String(), base64.StdEncoding.EncodeToString([]byte(name))
}

// CaseRecord is what happened to the Case process (or the in-harness change for stage 1).
type CaseRecord struct {
	Argv           []string    `json:"argv"`
	EnvKeys        []string    `json:"env_keys"`
	ExitCode       *int        `json:"exit_code"`
	DurationMs     int64       `json:"duration_ms"`
	TimedOut       bool        `json:"timed_out"`
	TimeoutSeconds int         `json:"timeout_seconds"`
	Events         int         `json:"events"`
	StdoutInline   string      `json:"stdout_inline"`
	StderrInline   string      `json:"stderr_inline"`
	OutputTrunc    bool        `json:"output_truncated"`
	EventLimits    EventLimits `json:"event_limits"`
	// Commands is Case's use of the profile's command budget; absent when no
	// Case process was started.
	Commands *CommandsRecord `json:"commands,omitempty"`
}

// CommandsRecord is what Case ran, counted against the execution profile.
// In a sandbox the harness sees every execve/execveat of Case's processes
// (the exec watch) and counts commands itself: Observed is true and a
// command over the budget was refused, not run. Unsandboxed nothing can be
// observed: Observed is false and the counts are Case's own claims.
type CommandsRecord struct {
	Observed bool `json:"observed"`
	Budget   int  `json:"budget"`
	Used     int  `json:"used"`
	Commands int  `json:"commands"`
	Heavy    int  `json:"heavy"`
	Tests    int  `json:"tests"`
	Refused  int  `json:"refused"`
	// Execs is every exec the watch saw: the agent's own, the commands and
	// what they started; Inside is the part that ran inside commands.
	Execs  int `json:"execs"`
	Inside int `json:"inside"`
	// RefusalEvents is how many refusals have a command_refused event (at
	// most MaxCommandRefusalEvents).
	RefusalEvents int `json:"refusal_events"`
	// Claimed is what Case's case.command events said, kept beside the
	// count; it is never counted against the budget when Observed.
	Claimed CommandClaims `json:"claimed"`
	// RefusedCommands are the refused commands in order, at most
	// MaxRefusedListed, with the rule that refused each.
	RefusedCommands []RefusedCommand `json:"refused_commands"`
}

// RefusedCommand is one command the profile refused.
type RefusedCommand struct {
	Command string `json:"command"`
	Reason  string `json:"reason"`
}

// MaxCommandRefusalEvents bounds the command_refused events of one run.
const MaxCommandRefusalEvents = 10_000

// MaxRefusedListed bounds CommandsRecord.RefusedCommands.
const MaxRefusedListed = 200

// MaxRefusedCommandBytes bounds the text of one refused command, in the
// report and in its command_refused event (and the event's argv, all
// arguments together): Case chooses how long its commands are, and each
// refusal is recorded. A longer command keeps its start and its end (a
// wrapper's own command comes last) around a note of how many bytes were
// left out and the SHA-256 of the whole.
const MaxRefusedCommandBytes = 2048

// CommandClaims classifies the commands Case's events claim it ran.
type CommandClaims struct {
	Commands int `json:"commands"`
	Tests    int `json:"tests"`
	Heavy    int `json:"heavy"`
	Installs int `json:"installs"`
}

// EventLimits are the caps on Case's event stream for one run (from the
// execution profile) and what the stream used. Past a cap Case is stopped
// (CASE_EVENT_LIMIT), so the harness's memory and the event logs stay bounded.
type EventLimits struct {
	MaxEvents int   `json:"max_events"`
	MaxBytes  int64 `json:"max_bytes"`
	Bytes     int64 `json:"bytes"`   // bytes of the event lines accepted
	Dropped   int   `json:"dropped"` // well-formed events refused after a cap was reached
}

// TestClass classifies the verification outcome.
type TestClass string

// Verification classes.
const (
	TestPass    TestClass = "TEST_PASS"
	TestFailure TestClass = "TEST_FAILURE"
	TestFlake   TestClass = "TEST_FLAKE"
	TestTimeout TestClass = "TEST_TIMEOUT"
	TestNotRun  TestClass = "TEST_NOT_RUN"
	TestGovUnav TestClass = "GOVERNANCE_UNAVAILABLE"
)

// AllTestClasses lists every class; the schema enum is checked against it.
func AllTestClasses() []TestClass {
	return []TestClass{TestPass, TestFailure, TestFlake, TestTimeout, TestNotRun, TestGovUnav}
}

// TestsRecord is the verification command's outcome.
type TestsRecord struct {
	Command string `json:"command"`
	// Results are the per-test results of the task's test_results report
	// (absent when the task names none).
	Results          *TestResultsSummary `json:"results,omitempty"`
	ExitCode         *int                `json:"exit_code"`
	Classification   TestClass           `json:"classification"`
	Reason           string              `json:"reason,omitempty"`
	Counts           *TestCounts         `json:"counts"`
	DurationMs       int64               `json:"duration_ms"`
	TimeoutSeconds   int                 `json:"timeout_seconds"`
	TimedOut         bool                `json:"timed_out"`
	Truncated        bool                `json:"truncated"`
	LogPath          string              `json:"log_path"`
	Target           string              `json:"target"`
	Profile          string              `json:"profile"`
	Refusal          string              `json:"refusal,omitempty"`
	ScopeReason      string              `json:"scope_reason,omitempty"`
	CountsFormat     string              `json:"counts_format,omitempty"`
	Reruns           int                 `json:"reruns"`
	StdoutInline     string              `json:"stdout_inline"`
	StderrInline     string              `json:"stderr_inline"`
	Findings         []ScanFinding       `json:"findings"`
	Scripts          []string            `json:"scripts"`
	DangerousAllowed bool                `json:"dangerous_allowed"`
	// VerifiedCommit and VerifiedTree name the fresh checkout the command
	// ran on; the tree must be the result tree.
	VerifiedCommit string `json:"verified_commit,omitempty"`
	VerifiedTree   string `json:"verified_tree,omitempty"`
}

// SetupRecord is the task's setup command, run in the verification
// checkout before the verification command (setup.log holds its output).
type SetupRecord struct {
	Command        string    `json:"command"`
	ExitCode       *int      `json:"exit_code"`
	Classification TestClass `json:"classification"`
	Reason         string    `json:"reason,omitempty"`
	DurationMs     int64     `json:"duration_ms"`
	TimeoutSeconds int       `json:"timeout_seconds"`
	TimedOut       bool      `json:"timed_out"`
	LogPath        string    `json:"log_path"`
}

// ScanFinding is one dangerous pattern the script-safety scanner found.
type ScanFinding struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Pattern  string `json:"pattern"`
	Command  string `json:"command"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

// TestCounts are parsed from the verification output when its format is known.
type TestCounts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// SandboxRecord says what confinement was actually in force for Case and the
// verification command. Only enforced mechanisms are listed.
type SandboxRecord struct {
	Enforced          bool     `json:"enforced"`
	Mechanisms        []string `json:"mechanisms"`
	LandlockABI       int      `json:"landlock_abi"`
	WritableRoots     []string `json:"writable_roots"`
	ReadOnlyRoots     []string `json:"read_only_roots"`
	Rlimits           Limits   `json:"rlimits"`
	EnvAllowlist      []string `json:"env_allowlist"`
	ProcessGroupKill  bool     `json:"process_group_kill"`
	Unsandboxed       bool     `json:"unsandboxed_opt_out"`
	NotEnforcedReason string   `json:"not_enforced_reason,omitempty"`
	// View and VerificationView are the filesystem views Case and the
	// verification command ran in (absent when none was built).
	View             *ViewRecord `json:"view,omitempty"`
	VerificationView *ViewRecord `json:"verification_view,omitempty"`
	// KeptBuildCache is the Go build cache kept for the source's baseline
	// (caches.go): the layer the verification read, and the warm-up.
	KeptBuildCache *KeptCacheRecord `json:"kept_build_cache,omitempty"`
}

// KeptCacheRecord says which kept build cache layer the verification read
// and whether this run's warm-up made it. Layer and ID are empty when
// none was read; Note then says why (a failed warm-up is not the run's
// failure).
type KeptCacheRecord struct {
	Key            string `json:"key"`
	CheckoutPath   string `json:"checkout_path"`
	Layer          string `json:"layer,omitempty"`
	ID             string `json:"id,omitempty"`
	Files          int    `json:"files,omitempty"`
	Bytes          int64  `json:"bytes,omitempty"`
	WarmedUp       bool   `json:"warmed_up"`
	WarmUpExitCode *int   `json:"warm_up_exit_code,omitempty"`
	WarmUpMs       int64  `json:"warm_up_ms,omitempty"`
	WarmUpLog      string `json:"warm_up_log,omitempty"`
	Note           string `json:"note,omitempty"`
}

// Limits are the resource limits (rlimits) of Case and the verification
// command. Zero means the harness default.
type Limits struct {
	CPUSeconds        uint64 `json:"cpu_seconds"`
	FileSizeBytes     uint64 `json:"file_size_bytes"`
	OpenFiles         uint64 `json:"open_files"`
	Processes         uint64 `json:"processes"`
	AddressSpaceBytes uint64 `json:"address_space_bytes"`
}

// Freshness ties every artifact to this one run.
type Freshness struct {
	RunID          string    `json:"run_id"`
	Nonce          string    `json:"nonce"`
	StartedAt      time.Time `json:"started_at"`
	FinishedAt     time.Time `json:"finished_at"`
	HarnessVersion string    `json:"harness_version"`
	FinalEventHash string    `json:"final_event_hash"`
	Events         int       `json:"events"`
	// ClockJumps are the times the wall clock moved away from the run's
	// monotonic timeline (package runclock): recorded, never acted on.
	ClockJumps []ClockJump `json:"clock_jumps,omitempty"`
}

// ClockJump is one wall-clock jump during a run: at the run's time At the
// wall clock read Wall, OffsetMs from the run's timeline (negative: it was
// stepped back).
type ClockJump struct {
	At       time.Time `json:"at"`
	Wall     time.Time `json:"wall"`
	OffsetMs int64     `json:"offset_ms"`
}

// AgentRecord is the coding agent that ran as Case, when one did (--agent):
// what it was, what it talked to, and what its own stream said it used.
// SecretEnv names the variables whose values were passed to it; the values
// themselves never appear in the evidence.
type AgentRecord struct {
	Name             string   `json:"name"`
	Version          string   `json:"version"`
	Model            string   `json:"model"`
	Endpoint         string   `json:"endpoint"`
	EgressAllowed    []string `json:"egress_allowed"`
	Executable       []string `json:"executable"`
	StreamPath       string   `json:"stream_path"`
	NativeLines      int      `json:"native_lines"`
	UnknownLines     int      `json:"unknown_native_lines"`
	Finished         bool     `json:"finished"`
	ResultError      string   `json:"result_error,omitempty"`
	Turns            int      `json:"turns"`
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	CachedTokens     int64    `json:"cached_tokens"`
	APITimeMs        int64    `json:"api_time_ms"`
	ReportedCostUSD  float64  `json:"reported_cost_usd"`
	Commands         int      `json:"commands"`
	FileWrites       int      `json:"file_writes"`
	AttemptedEscapes []string `json:"attempted_escapes"`
	SecretEnv        []string `json:"secret_env"`
	Notes            []string `json:"notes"`
	// Usage is the model spend as the harness measured it, request by
	// request, on every run however it ended (null: the agent never started).
	// Turns, InputTokens, OutputTokens, CachedTokens and ReportedCostUSD above
	// are the agent's own closing account, in its own convention, and are
	// zero when it was stopped before giving one.
	Usage *ModelUsage `json:"usage"`
}

// ModelUsage is an agent run's model spend, in one shape for every agent.
// The prompt of each request is split into InputUncached (billed at the
// full input rate), CacheRead (read from the provider's prompt cache) and
// CacheWrite (written to it); their sum is the whole prompt, whichever
// convention the provider reports in.
type ModelUsage struct {
	Requests      int   `json:"requests"`   // model requests made: the run's turns
	Failed        int   `json:"failed"`     // of them, answered with an error or not at all
	Unreported    int   `json:"unreported"` // of them, answered without a usage count
	InputUncached int64 `json:"input_uncached_tokens"`
	CacheRead     int64 `json:"cache_read_tokens"`
	CacheWrite    int64 `json:"cache_write_tokens"`
	Output        int64 `json:"output_tokens"`
	// CostUSD is null when no cost is known: never 0 for "unknown".
	CostUSD *float64 `json:"cost_usd"`
	// CostSource is "reported" (the agent said), "estimated" (from the
	// config's price table for the model) or "not_reported".
	CostSource CostSource `json:"cost_source"`
	// PerRequest lists the requests in order, at most MaxModelRequestsShown;
	// backend/model-requests.jsonl has every one.
	PerRequest []ModelRequest `json:"per_request"`
}

// MaxModelRequestsShown bounds ModelUsage.PerRequest.
const MaxModelRequestsShown = 500

// ModelRequest is one model request as the harness's model meter saw it.
type ModelRequest struct {
	Seq           int       `json:"seq"`
	At            time.Time `json:"at"`
	API           string    `json:"api"`
	Status        int       `json:"status"` // 0: no answer
	Error         string    `json:"error,omitempty"`
	LatencyMs     int64     `json:"latency_ms"`
	InputUncached int64     `json:"input_uncached_tokens"`
	CacheRead     int64     `json:"cache_read_tokens"`
	CacheWrite    int64     `json:"cache_write_tokens"`
	Output        int64     `json:"output_tokens"`
}

// CostSource says where ModelUsage.CostUSD comes from.
type CostSource string

// Cost sources.
const (
	CostReported    CostSource = "reported"
	CostEstimated   CostSource = "estimated"
	CostNotReported CostSource = "not_reported"
)

// MaxFilesShown is how many changed files report.md and report.html list,
// so that a page's size does not follow what Case wrote; they summarise the
// rest, which report.json and patch.diff hold.
const MaxFilesShown = 1000

// FilesNotShown counts the changed files past MaxFilesShown, and how many of
// them lie outside the allowed paths.
func FilesNotShown(changed []ChangedFile) (more, outside int) {
	if len(changed) <= MaxFilesShown {
		return 0, 0
	}
	for _, c := range changed[MaxFilesShown:] {
		if !c.Allowed {
			outside++
		}
	}
	return len(changed) - MaxFilesShown, outside
}
