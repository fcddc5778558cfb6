// Package task holds the task a user asks Case to do (the spec, written by a
// person) and the contract derived from it (task.json, given to Case). The
// contract carries only what Case needs: never the source path.
package task

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/schemas"
)

// Default limits used when a spec leaves them out.
const (
	DefaultCaseTimeoutSeconds   = 300
	DefaultVerifyTimeoutSeconds = 300
)

// Values of Spec.FixtureGit.
const (
	FixtureGitBlock = "block"
	FixtureGitAllow = "allow"
)

// AllowsGitChanges reports whether Case may change any part of its
// fixture's .git without blocking the run.
func (s Spec) AllowsGitChanges() bool { return s.FixtureGit == FixtureGitAllow }

// Verification is the command run in the fixture after Case to check its work.
type Verification struct {
	Command        string `json:"command"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// TestResults is where the verification writes its test report.
type TestResults struct {
	Format testresults.Format `json:"format"`
	Path   string             `json:"path"` // relative to the checkout root
}

// Spec is what a user writes (--task FILE).
type Spec struct {
	Task             string       `json:"task"`
	AllowedPaths     []string     `json:"allowed_paths"`
	ForbiddenActions []string     `json:"forbidden_actions,omitempty"`
	Verification     Verification `json:"verification"`
	// Setup prepares the verification checkout (installs dependencies)
	// before the verification command runs; Case never sees it.
	Setup              *Verification `json:"setup,omitempty"`
	CaseTimeoutSeconds int           `json:"case_timeout_seconds,omitempty"`
	// TestResults names the machine-readable test report the verification
	// writes (format and path in the checkout): the per-test results are
	// read from it, never from the command's free text.
	TestResults *TestResults `json:"test_results,omitempty"`
	// FailToPass and PassToPass are the tests (ids as test_results gives
	// them) the change must make pass and must keep passing: with either
	// list, these tests decide the verdict, not the command's exit code.
	FailToPass []string `json:"fail_to_pass,omitempty"`
	PassToPass []string `json:"pass_to_pass,omitempty"`
	// HiddenTests is a directory of verification files Case never sees
	// (relative paths are relative to the spec file): they are laid over
	// the fresh checkout of the result before setup and verification.
	HiddenTests string `json:"hidden_tests,omitempty"`
	// Base is the commit of the source the task starts from (a hash,
	// branch, tag or HEAD~N), read from the source's object store; empty
	// is the source's HEAD.
	Base string `json:"base,omitempty"`
	// History is how much of the base commit's history Case's .git holds:
	// "full" (the default), "none" or a depth ("3": the base and its two
	// nearest generations of ancestors).
	History string `json:"history,omitempty"`
	// Layout shows the repository at the absolute path the task's
	// instruction and tests name (a container task's /app), and gives the
	// verification more such paths into its checkout (/tests,
	// /logs/verifier). See docs/tasks.md.
	Layout *Layout `json:"layout,omitempty"`
	// Adversary is a second party that writes tests against the task and
	// Case's result, kept apart from Case (see docs/adversarial.md).
	Adversary *SpecAdversary `json:"adversary,omitempty"`
	// FixtureGit says what Case may change in its fixture's .git: "block"
	// (the default) blocks a change outside the parts git writes in
	// everyday use (config, hooks, attributes, replace refs …); "allow"
	// lists such changes without blocking, for agents that configure git.
	// The harness never reads that .git after Case either way.
	FixtureGit string `json:"fixture_git,omitempty"`
	// Limits override the sandbox's default rlimits; zero fields keep the default.
	Limits *SpecLimits `json:"limits,omitempty"`
	// Network lists the endpoints the task needs; the config or the run's
	// flags must cover each one.
	Network *NetworkAllow `json:"network,omitempty"`
	// Agent names the coding agent the task is meant for (run's flags win).
	Agent *SpecAgent `json:"agent,omitempty"`
	// Sandbox narrows the filesystem view the config allows; it can never
	// widen it (see docs/sandbox.md).
	Sandbox *SpecSandbox `json:"sandbox,omitempty"`
}

// Layout is where a task's paths are in the sandbox's view: Workdir is
// a link to Case's fixture (in Case's view) and to the checkout (in the
// verification's); Links map more absolute paths of the verification's
// view to directories of its checkout ("/tests": ".cto-harness/tests").
// They are links, never moved directories: what Landlock allows, what
// the evidence records and what is collected stay the directories' own.
type Layout struct {
	Workdir string            `json:"workdir"`
	Links   map[string]string `json:"links,omitempty"`
}

// Aliases are the layout's paths as the verification's scanner reads
// them: each with the host directory it reaches when the command's work
// directory is work.
func (l Layout) Aliases(work string) map[string]string {
	al := map[string]string{l.Workdir: work}
	for at, rel := range l.Links {
		al[at] = filepath.Join(work, filepath.FromSlash(rel))
	}
	return al
}

// reservedRoots are the view's own paths a layout may not take.
var reservedRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/etc", "/proc", "/dev", "/sys", "/run", "/tmp", "/var", "/cto-harness", "/root", "/home"}

// Check says what makes the layout unusable: a path that is not absolute
// and clean, one the view needs for itself, two paths one inside the
// other, or a link into the checkout that leaves it or names .git.
func (l Layout) Check() error {
	paths := []string{l.Workdir}
	for at := range l.Links {
		paths = append(paths, at)
	}
	for i, p := range paths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("layout path %q must be absolute and clean, and not /", p)
		}
		for _, r := range reservedRoots {
			if p == r || strings.HasPrefix(p, r+"/") || strings.HasPrefix(r, p+"/") {
				return fmt.Errorf("layout path %s would take %s, which the sandbox's view needs for itself", p, r)
			}
		}
		for _, q := range paths[:i] {
			if p == q || strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
				return fmt.Errorf("layout paths %s and %s overlap", q, p)
			}
		}
	}
	for at, rel := range l.Links {
		c := filepath.ToSlash(filepath.Clean(rel))
		if rel == "" || filepath.IsAbs(rel) || c == ".." || strings.HasPrefix(c, "../") || c == ".git" || strings.HasPrefix(c, ".git/") || strings.Contains(c, "/.git/") || strings.HasSuffix(c, "/.git") {
			return fmt.Errorf("layout link %s -> %q must name a directory inside the checkout (relative, no .., not .git)", at, rel)
		}
	}
	return nil
}

// SpecAdversary is a task's adversary: Command (the user's own test
// generator, run in a sandbox of its own after Case, see
// docs/adversarial.md) writes tests into its directory; TestCommand runs
// them in a checkout of the baseline and of the result, writing
// TestResults.
//
// Agent, instead of Command, is one of the four coding agents with the
// harness's own prompt, its model requests through the harness's meter
// (every field is needed: a task's adversary has no flags to fall back on).
type SpecAdversary struct {
	Command []string        `json:"command,omitempty"`
	Agent   *AdversaryAgent `json:"agent,omitempty"`
	// ShowDiff shows the adversary Case's diff (patch.diff) as well as the
	// result; by default it sees the result only, as a test designer that
	// never sees the implementation writes more accurate tests.
	ShowDiff       bool        `json:"show_diff,omitempty"`
	TimeoutSeconds int         `json:"timeout_seconds,omitempty"`
	TestCommand    string      `json:"test_command"`
	TestResults    TestResults `json:"test_results"`
}

// AdversaryAgent is the coding agent a task's adversary is: which, the
// model it asks for, the endpoint and the harness variable with its key.
type AdversaryAgent struct {
	Name      string `json:"name"`
	Model     string `json:"model"`
	BaseURL   string `json:"base_url"`
	APIKeyEnv string `json:"api_key_env"`
}

// SpecSandbox narrows the view for Case and, with Verification, for the
// verification command (which otherwise gets Case's lists).
type SpecSandbox struct {
	ViewPaths
	Verification *ViewPaths `json:"verification,omitempty"`
}

// ViewPaths: ReadPaths, when given, replaces the config's read paths and
// must lie inside what the config and the defaults allow; HidePaths are
// hidden in addition.
type ViewPaths struct {
	ReadPaths []string `json:"read_paths,omitempty"`
	HidePaths []string `json:"hide_paths,omitempty"`
}

// HistoryText is the spec's history, "full" when it gives none.
func (s Spec) HistoryText() string {
	if s.History == "" {
		return "full"
	}
	return s.History
}

// ViewLists returns the task's lists for Case or the verification command.
func (s Spec) ViewLists(verification bool) ViewPaths {
	if s.Sandbox == nil {
		return ViewPaths{}
	}
	if verification && s.Sandbox.Verification != nil {
		return *s.Sandbox.Verification
	}
	return s.Sandbox.ViewPaths
}

// SpecAgent is a task's coding agent: never an executable, only which
// supported agent, model and endpoint, and where the key is.
type SpecAgent struct {
	Name      string `json:"name"`
	Model     string `json:"model,omitempty"`
	BaseURL   string `json:"base_url,omitempty"`
	APIKeyEnv string `json:"api_key_env,omitempty"`
}

// NetworkAllow are the egress allowlists, HOST:PORT each (see docs/sandbox.md).
type NetworkAllow struct {
	CaseAllow   []string `json:"case_allow,omitempty"`
	VerifyAllow []string `json:"verify_allow,omitempty"`
	SetupAllow  []string `json:"setup_allow,omitempty"`
}

// SpecLimits are the rlimits a spec may set; each is optional.
type SpecLimits struct {
	CPUSeconds        uint64 `json:"cpu_seconds,omitempty"`
	FileSizeBytes     uint64 `json:"file_size_bytes,omitempty"`
	OpenFiles         uint64 `json:"open_files,omitempty"`
	Processes         uint64 `json:"processes,omitempty"`
	AddressSpaceBytes uint64 `json:"address_space_bytes,omitempty"`
}

// EvidenceExpectations tells Case how its work is observed.
type EvidenceExpectations struct {
	EventStream                string                 `json:"event_stream"`
	RequiredEvents             []ctoharness.EventType `json:"required_events"`
	AllowedEventTypes          []ctoharness.EventType `json:"allowed_event_types"`
	ChangesOutsideAllowedPaths string                 `json:"changes_outside_allowed_paths"`
}

// Contract is task.json: everything Case receives, and nothing else.
type Contract struct {
	SchemaVersion      string       `json:"schema_version"`
	RunID              string       `json:"run_id"`
	FixturePath        string       `json:"fixture_path"`
	Task               string       `json:"task"`
	AllowedPaths       []string     `json:"allowed_paths"`
	ForbiddenActions   []string     `json:"forbidden_actions"`
	Verification       Verification `json:"verification"`
	CaseTimeoutSeconds int          `json:"case_timeout_seconds"`
	// FixtureGit is the spec's fixture_git, "block" when it gave none.
	FixtureGit string `json:"fixture_git,omitempty"`
	// HiddenTests says that the verification also runs tests Case is not
	// shown (not where they are or what they hold).
	HiddenTests bool `json:"hidden_tests,omitempty"`
	// ClaimsFile is where Case may write its behavioural claims (JSON:
	// {"claims": [{"claim": "...", "paths": ["..."]}]}, at most 64 KiB)
	// when the task has an adversary, which reads them; absent otherwise.
	ClaimsFile string               `json:"claims_file,omitempty"`
	Limits     ctoharness.Limits    `json:"limits"`
	Evidence   EvidenceExpectations `json:"evidence_expectations"`
}

// forbidGitChange is the base action a task with fixture_git: allow drops.
const forbidGitChange = "modify .git inside the fixture"

// BaseForbiddenActions are refused for every task, whatever the spec says.
func BaseForbiddenActions() []string {
	return []string{
		"write outside the fixture and the scratch root",
		forbidGitChange,
		"push, merge, deploy or open pull requests",
		"network access",
	}
}

// Load reads and validates a spec file. validate checks the bytes against
// the task-spec schema (passed in so this package need not know the schema set).
func Load(ctx context.Context, path string, validate func([]byte) error) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("read task spec %s: %w", path, err)
	}
	s, err := Parse(data, path, validate)
	if err == nil && s.HiddenTests != "" && !filepath.IsAbs(s.HiddenTests) {
		abs, aerr := filepath.Abs(filepath.Join(filepath.Dir(path), s.HiddenTests))
		if aerr != nil {
			return Spec{}, fmt.Errorf("task spec %s: hidden_tests %q: %w", path, s.HiddenTests, aerr)
		}
		s.HiddenTests = abs
	}
	return s, err
}

// Parse decodes and validates spec bytes; origin names them in errors.
func Parse(data []byte, origin string, validate func([]byte) error) (Spec, error) {
	if err := validate(data); err != nil {
		var syn *schemas.SyntaxError
		if errors.As(err, &syn) {
			return Spec{}, fmt.Errorf("task spec %s; fix the JSON there", syn.In(origin))
		}
		return Spec{}, fmt.Errorf("task spec %s does not match its schema: %w", origin, err)
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("task spec %s: %w", origin, err)
	}
	if tr := s.TestResults; tr != nil {
		if p := filepath.ToSlash(filepath.Clean(tr.Path)); filepath.IsAbs(tr.Path) || p == "." || p == ".." || strings.HasPrefix(p, "../") {
			return Spec{}, fmt.Errorf("task spec %s: test_results.path %q must be a path inside the checkout (relative, no ..)", origin, tr.Path)
		}
	}
	if (len(s.FailToPass) > 0 || len(s.PassToPass) > 0) && s.TestResults == nil {
		return Spec{}, fmt.Errorf("task spec %s: fail_to_pass and pass_to_pass name tests of a test report: give test_results (format and path) too", origin)
	}
	if s.Layout != nil {
		if err := s.Layout.Check(); err != nil {
			return Spec{}, fmt.Errorf("task spec %s: %w", origin, err)
		}
	}
	for _, p := range s.AllowedPaths {
		if err := CheckPattern(p); err != nil {
			return Spec{}, fmt.Errorf("task spec %s: allowed path %q: %w", origin, p, err)
		}
	}
	if s.CaseTimeoutSeconds == 0 {
		s.CaseTimeoutSeconds = DefaultCaseTimeoutSeconds
	}
	if s.Verification.TimeoutSeconds == 0 {
		s.Verification.TimeoutSeconds = DefaultVerifyTimeoutSeconds
	}
	return s, nil
}

// NewContract derives the contract Case receives from a spec.
func NewContract(s Spec, runID, fixturePath string) Contract {
	var forbidden []string
	for _, a := range BaseForbiddenActions() {
		if a == forbidGitChange && s.AllowsGitChanges() {
			continue
		}
		forbidden = append(forbidden, a)
	}
	forbidden = append(forbidden, s.ForbiddenActions...)
	fixtureGit := FixtureGitBlock
	if s.AllowsGitChanges() {
		fixtureGit = FixtureGitAllow
	}
	return Contract{
		SchemaVersion:      ctoharness.SchemaVersion,
		RunID:              runID,
		FixturePath:        fixturePath,
		Task:               s.Task,
		AllowedPaths:       append([]string(nil), s.AllowedPaths...),
		ForbiddenActions:   forbidden,
		Verification:       s.Verification,
		CaseTimeoutSeconds: s.CaseTimeoutSeconds,
		FixtureGit:         fixtureGit,
		HiddenTests:        s.HiddenTests != "",
		Limits:             limits(s.Limits),
		Evidence: EvidenceExpectations{
			EventStream:    "stdout, one JSON object per line",
			RequiredEvents: ctoharness.RequiredCaseEvents(),
			AllowedEventTypes: []ctoharness.EventType{ctoharness.EvCaseStarted, ctoharness.EvCaseFileChanged,
				ctoharness.EvCaseCommand, ctoharness.EvCaseLog, ctoharness.EvCaseFinished},
			ChangesOutsideAllowedPaths: "block the run (DISALLOWED_CHANGE)",
		},
	}
}

// limits are the spec's limits with the sandbox defaults filled in, so the
// contract states exactly what will be enforced.
func limits(l *SpecLimits) ctoharness.Limits {
	d := DefaultLimits()
	if l == nil {
		return d
	}
	for _, f := range []struct{ v, def *uint64 }{{&l.CPUSeconds, &d.CPUSeconds}, {&l.FileSizeBytes, &d.FileSizeBytes},
		{&l.OpenFiles, &d.OpenFiles}, {&l.Processes, &d.Processes}, {&l.AddressSpaceBytes, &d.AddressSpaceBytes}} {
		if *f.v != 0 {
			*f.def = *f.v
		}
	}
	return d
}

// DefaultLimits are the rlimits used when a spec sets none: generous enough
// for a compiler or a test suite, small enough to stop a runaway. The
// address-space limit is 1 TiB because V8 reserves about 10 GiB of address
// space per WebAssembly memory (vitest and many Node test runners start
// several), and a reservation is not memory in use.
func DefaultLimits() ctoharness.Limits {
	return ctoharness.Limits{CPUSeconds: 3600, FileSizeBytes: 4 << 30, OpenFiles: 4096, Processes: 2048, AddressSpaceBytes: 1 << 40}
}
