package ctoharness

// Classes of an adversarial test (AdversarialTest.Class).
const (
	// AdversaryDiscriminating: failed on the baseline, so it tells the
	// change from no change; it counts, and must pass on the result.
	AdversaryDiscriminating = "discriminating"
	// AdversaryNotDiscriminating: passed (or was skipped) on the baseline;
	// it cannot tell the change from no change and does not count.
	AdversaryNotDiscriminating = "not_discriminating"
	// AdversaryFailedImport: errored on the baseline (it does not load or
	// compile); excluded.
	AdversaryFailedImport = "failed_import"
)

// AdversarialRecord is what the adversarial step did (report.adversarial):
// a second party, kept apart from Case, wrote tests against the task and
// the result; they ran on fresh checkouts of the baseline and the result,
// and only those that failed on the baseline count.
type AdversarialRecord struct {
	Command    []string `json:"command"`
	ExitCode   *int     `json:"exit_code"`
	DurationMs int64    `json:"duration_ms"`
	TimedOut   bool     `json:"timed_out"`
	Log        string   `json:"log"` // adversary.log
	// Problem says why the step could not finish ("" when it did).
	Problem string `json:"problem,omitempty"`
	// Archive is adversarial-tests.tar, the files the adversary wrote, as
	// digested (Digest); Files lists them.
	Archive string   `json:"archive"`
	Digest  string   `json:"digest"`
	Files   []string `json:"files"`
	// Excluded are files refused before any ran, with the reason (they
	// mock what a test must exercise, or reach outside the checkout).
	Excluded []AdversarialExcluded `json:"excluded"`
	// Tests are the adversary's tests as its test command reported them,
	// each with its outcome on the baseline and on the result.
	Tests          []AdversarialTest `json:"tests"`
	Discriminating int               `json:"discriminating"`
	Failed         int               `json:"failed"`
	BaselineLog    string            `json:"baseline_log"`
	ResultLog      string            `json:"result_log"`
	// ClaimsArtifact is claims.json, Case's claims as the adversary got
	// them ("" when Case gave none that could be used: ClaimsProblem says
	// why; that is recorded, never a blocker); Claims counts them.
	ClaimsArtifact string `json:"claims_artifact,omitempty"`
	Claims         int    `json:"claims"`
	ClaimsProblem  string `json:"claims_problem,omitempty"`
	// Confirmed says who let the adversary's tests run: "auto_confirm"
	// (--auto-confirm or the config), "terminal" (a person said yes) or
	// "declined" (a person said no: ADVERSARY_NOT_CONFIRMED); "" when no
	// test was left to run.
	Confirmed string `json:"confirmed,omitempty"`
	// StepMs is the whole step; TestsMs the test command's part of it (on
	// the baseline and the result). What the harness itself spends is
	// StepMs less DurationMs (the adversary's own run) and TestsMs.
	StepMs  int64 `json:"step_ms,omitempty"`
	TestsMs int64 `json:"tests_ms,omitempty"`
	// Agent is the coding agent that was the adversary, when one was
	// (nil for a command of the user's own).
	Agent *AdversaryAgent `json:"agent,omitempty"`
}

// AdversaryAgent is the coding agent that ran as the adversary: which,
// the model and endpoint it was given, and what the harness's meter
// counted. SameAsCase is set, with Warning, when it is Case's agent and
// model too.
type AdversaryAgent struct {
	Name       string      `json:"name"`
	Version    string      `json:"version"`
	Model      string      `json:"model"`
	Endpoint   string      `json:"endpoint"`
	Usage      *ModelUsage `json:"usage"`
	SameAsCase bool        `json:"same_as_case"`
	Warning    string      `json:"warning,omitempty"`
	// Requests is backend/adversary-requests.jsonl, every model request
	// the meter relayed.
	Requests string `json:"requests"`
}

// Who let an adversary's tests run (AdversarialRecord.Confirmed).
const (
	ConfirmedAuto     = "auto_confirm"
	ConfirmedTerminal = "terminal"
	ConfirmedDeclined = "declined"
)

// AdversarialExcluded is one file of the adversary's the harness did not
// run.
type AdversarialExcluded struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// AdversarialTest is one test the adversary wrote.
type AdversarialTest struct {
	ID       string `json:"id"`
	Baseline string `json:"baseline"` // its outcome on the baseline
	Result   string `json:"result"`   // on the result ("" when it was not run there)
	Class    string `json:"class"`
	// OK: a discriminating test that passed on the result (true for the
	// others, which do not count).
	OK bool `json:"ok"`
}

// Claims are what Case says its change does (claims.json): the task
// contract names where Case may write them when the task has an
// adversary, which gets them. They are evidence of what Case asserted,
// never of what it did.
type Claims struct {
	Claims []Claim `json:"claims"`
}

// Claim is one behavioural claim: what now holds, and the paths it is
// about.
type Claim struct {
	Claim string   `json:"claim"`
	Paths []string `json:"paths,omitempty"`
}
