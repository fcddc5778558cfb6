// Package profile holds the execution profiles (strict, fast, smoke, yolo)
// as one table: how many commands Case may run, how many verification runs
// and flake reruns the harness allows, whether package installs are allowed,
// how much heavier expensive commands weigh, the cumulative test-time budget,
// and whether a run under the profile can qualify as stage evidence.
//
// Every consumer reads this table; no profile behaviour is hard-coded
// elsewhere. docs/execution-profiles.md is generated from it (see Markdown)
// and a test keeps the two in step.
package profile

import (
	"fmt"
	"github.com/cto-harness/cto-harness/harness/scan"
	"slices"
	"strings"
	"sync"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// Name names a profile.
type Name string

// Profiles.
const (
	Strict Name = "strict"
	Fast   Name = "fast"
	Smoke  Name = "smoke"
	Yolo   Name = "yolo"
	// Agent is the default of a run with a coding agent (--agent). An agent's
	// own start-up counts against the command budget (11-20 execs measured),
	// and an edit-then-test loop runs the tests many times; fast's 25
	// commands and 3 test runs stop honest sessions. See
	// docs/execution-profiles.md for the measurement.
	Agent Name = "agent"
)

// Default is the profile used when none is named.
const Default = Fast

// DefaultFor is the profile used when none is named: the agent profile for a
// run with a coding agent, fast otherwise.
func DefaultFor(withAgent bool) Name {
	if withAgent {
		return Agent
	}
	return Default
}

// Policy is one profile's limits.
type Policy struct {
	Name            Name
	MaxCaseCommands int           // command budget for Case; a heavy command costs HeavyWeight
	MaxHeavy        int           // heavy commands Case may run at all (0: none)
	MaxTestRuns     int           // test invocations: Case's own, and separately the harness's verification runs (reruns included)
	FlakeReruns     int           // reruns of a failed verification, to tell a flake from a failure
	AllowInstalls   bool          // package installs (pip, npm, go install, apt, ...) may run
	RunTests        bool          // the harness runs the verification command
	HeavyWeight     int           // budget units a heavy command costs (>= 1)
	TestBudget      time.Duration // cumulative verification time across all runs and reruns
	Qualifies       bool          // a passing run can count as stage evidence
	NetConns        int           // network egress: connections open at once (Case and verification together)
	NetBytes        int64         // network egress: bytes relayed over the whole run, both directions
	Description     string
	// MaxCaseEvents and MaxEventBytes cap Case's event stream in one run (the
	// event count, and the bytes of its event lines); past either, Case is
	// stopped with CASE_EVENT_LIMIT. They bound the event logs on disk and
	// the time spent on them.
	MaxCaseEvents int
	MaxEventBytes int64
}

// table is the single source of truth.
var table = []Policy{
	{
		Name: Strict, MaxCaseEvents: 100_000, MaxEventBytes: 128 << 20, MaxCaseCommands: 60, MaxHeavy: 4, MaxTestRuns: 6, FlakeReruns: 2, AllowInstalls: true,
		RunTests: true, HeavyWeight: 3, TestBudget: 20 * time.Minute, Qualifies: true,
		NetConns: 64, NetBytes: 2 << 30,
		Description: "Production-like: generous budgets, installs allowed, two flake reruns, the longest test budget.",
	},
	{
		Name: Fast, MaxCaseEvents: 50_000, MaxEventBytes: 64 << 20, MaxCaseCommands: 25, MaxHeavy: 2, MaxTestRuns: 3, FlakeReruns: 1, AllowInstalls: false,
		RunTests: true, HeavyWeight: 3, TestBudget: 10 * time.Minute, Qualifies: true,
		NetConns: 32, NetBytes: 1 << 30,
		Description: "The default: enough for a focused change and its tests; no package installs; one flake rerun.",
	},
	{
		Name: Smoke, MaxCaseEvents: 5_000, MaxEventBytes: 8 << 20, MaxCaseCommands: 6, MaxHeavy: 0, MaxTestRuns: 1, FlakeReruns: 0, AllowInstalls: false,
		RunTests: false, HeavyWeight: 6, TestBudget: 2 * time.Minute, Qualifies: false,
		NetConns: 8, NetBytes: 64 << 20,
		Description: "Checks that the pipeline works end to end: a handful of cheap commands, tests not run; never stage evidence.",
	},
	{
		Name: Yolo, MaxCaseEvents: 4_000_000, MaxEventBytes: 2 << 30, MaxCaseCommands: 40, MaxHeavy: 3, MaxTestRuns: 4, FlakeReruns: 1, AllowInstalls: true,
		RunTests: true, HeavyWeight: 2, TestBudget: 15 * time.Minute, Qualifies: false,
		NetConns: 64, NetBytes: 4 << 30,
		Description: "Exploration: installs allowed and loose budgets, for trying things out; never stage evidence.",
	},
	{
		Name: Agent, MaxCaseEvents: 100_000, MaxEventBytes: 128 << 20, MaxCaseCommands: 250, MaxHeavy: 4, MaxTestRuns: 15, FlakeReruns: 1, AllowInstalls: false,
		RunTests: true, HeavyWeight: 3, TestBudget: 10 * time.Minute, Qualifies: true,
		NetConns: 32, NetBytes: 1 << 30,
		Description: "The default with --agent: room for an agent's own start-up and a long edit-and-test session; installs only when a package registry is on the allowlist.",
	},
}

// All returns every profile, in table order.
func All() []Policy { return append([]Policy(nil), table...) }

// Names lists the valid profile names.
func Names() []string {
	out := make([]string, len(table))
	for i, p := range table {
		out[i] = string(p.Name)
	}
	return out
}

// Lookup returns the named profile; "" is the default (fast). A run with an
// agent resolves "" with DefaultFor first.
func Lookup(name string) (Policy, error) {
	if name == "" {
		name = string(Default)
	}
	for _, p := range table {
		if string(p.Name) == name {
			return p, nil
		}
	}
	return Policy{}, fmt.Errorf("unknown execution profile %q: valid profiles are %s", name, strings.Join(Names(), ", "))
}

// simple splits a shell command into its simple commands (as word lists),
// looking through &&, ||, ;, pipelines, subshells, wrappers like env/sudo,
// the strings of nested `sh -c` and `eval`. A command that does not parse
// is split on blanks: classification must not fail open because of odd
// quoting. The cost is bounded by MaxScript (see Classify): a nested
// string is part of its parent, and at most maxShellDepth of them nest.
func simple(command string) [][]string { return simpleDepth(command, 0) }

// maxShellDepth bounds how many nested `sh -c` and `eval` strings are looked into.
const maxShellDepth = 4

func simpleDepth(command string, depth int) [][]string {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return [][]string{strings.Fields(command)}
	}
	var out [][]string
	syntax.Walk(f, func(n syntax.Node) bool {
		c, ok := n.(*syntax.CallExpr)
		if !ok || len(c.Args) == 0 {
			return true
		}
		var words []string
		for _, w := range c.Args {
			words = append(words, wordText(w))
		}
		words = unwrap(words)
		if inner, ok := ShellString("", words); ok && depth < maxShellDepth {
			// `bash -lc 'go test ./...'` runs what its string says.
			out = append(out, simpleDepth(inner, depth+1)...)
			return true
		}
		if len(words) > 1 && words[0] == "eval" && depth < maxShellDepth {
			// claude-code runs every command as `eval 'go test ./...'`.
			out = append(out, simpleDepth(strings.Join(words[1:], " "), depth+1)...)
			return true
		}
		out = append(out, words)
		return true
	})
	return out
}

var wrappers = map[string]bool{"sudo": true, "doas": true, "env": true, "nohup": true, "time": true, "nice": true,
	"timeout": true, "exec": true, "command": true, "npx": true, "pnpx": true, "bunx": true, "uvx": true, "xargs": true, "stdbuf": true}

func unwrap(words []string) []string {
	for len(words) > 0 {
		name := base(words[0])
		if !wrappers[name] {
			break
		}
		words = words[1:]
		for len(words) > 0 && (strings.HasPrefix(words[0], "-") || strings.Contains(words[0], "=") && name == "env") {
			words = words[1:]
		}
		if name == "timeout" && len(words) > 0 {
			words = words[1:]
		}
	}
	return words
}

func base(s string) string {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// operands drops options.
func operands(words []string) []string {
	var out []string
	for _, w := range words {
		if !strings.HasPrefix(w, "-") {
			out = append(out, w)
		}
	}
	return out
}

func has(words []string, opts ...string) bool {
	for _, w := range words {
		for _, o := range opts {
			if w == o || strings.HasPrefix(w, o+"=") {
				return true
			}
		}
	}
	return false
}

// installs maps a tool to the subcommands that install packages.
var installs = map[string][]string{
	"pip": {"install", "download"}, "pip3": {"install", "download"}, "pipx": {"install", "inject", "run"},
	"uv": {"add", "sync", "pip install", "tool install"}, "poetry": {"add", "install"}, "pipenv": {"install"},
	"conda": {"install", "create"}, "mamba": {"install", "create"}, "micromamba": {"install", "create"},
	"npm": {"install", "i", "ci", "add", "update"}, "pnpm": {"add", "install", "i", "update"},
	"yarn": {"add", "install", ""}, "bun": {"add", "install", "i"}, "deno": {"install", "add"},
	"go": {"install", "get", "mod download"}, "cargo": {"install", "add", "fetch"},
	"gem": {"install"}, "bundle": {"install", "add"}, "brew": {"install", "reinstall", "upgrade"},
	"apt": {"install", "upgrade"}, "apt-get": {"install", "upgrade", "dist-upgrade"}, "apk": {"add"},
	"dnf": {"install"}, "yum": {"install"}, "zypper": {"install", "in"}, "pacman": {"-S", "-Sy", "-Syu"},
	"composer": {"install", "require", "update"}, "dotnet": {"add", "restore", "tool install"},
	"mvn": {"dependency:resolve", "install"}, "playwright": {"install"}, "flet": {"install"},
}

func sub(words []string) string {
	ops := operands(words[1:])
	switch {
	case len(ops) == 0:
		return ""
	case len(ops) >= 2:
		return ops[0] + " " + ops[1]
	}
	return ops[0]
}

func isInstallWords(words []string) bool {
	if len(words) == 0 {
		return false
	}
	name := base(words[0])
	if strings.HasPrefix(name, "pip3.") {
		name = "pip3"
	}
	// python -m pip install ...
	if (name == "python" || strings.HasPrefix(name, "python3")) && len(words) >= 3 && words[1] == "-m" {
		return isInstallWords(words[2:])
	}
	subs, ok := installs[name]
	if !ok {
		return false
	}
	if name == "pacman" {
		for _, w := range words[1:] {
			if strings.HasPrefix(w, "-S") {
				return true
			}
		}
		return false
	}
	s := sub(words)
	first, _, _ := strings.Cut(s, " ")
	for _, want := range subs {
		if want == "" && s == "" {
			return true // bare `yarn` installs
		}
		if want != "" && (s == want || first == want || strings.HasPrefix(s, want+" ")) {
			return true
		}
	}
	return false
}

// MaxScript bounds the command text the classifiers parse. Linux caps one
// exec argument at 128 KiB (MAX_ARG_STRLEN), so a shell's -c string always
// fits; codex's wrapper around every command is about 38 KiB. A longer
// command, or one the exec watch could not read whole, is not parsed: it
// is Unknown.
const MaxScript = 128 << 10

// Class is what a command counts as against a profile's budgets, read from
// every simple command in it.
type Class struct {
	Test    bool // runs a test suite
	Heavy   bool // expensive (see IsHeavy)
	Install bool // installs packages or tools (see IsInstall)
	// Unknown: the command was too long to parse or not read whole. It is
	// counted as the most expensive thing it might be for the budgets, a
	// heavy command and a test run. It is not refused as an install: the
	// network allowlist is what stops an install from reaching a registry.
	Unknown bool
}

// Unknown is the class of a command that cannot be read whole.
func Unknown() Class { return Class{Test: true, Heavy: true, Unknown: true} }

// Classify reads command once and says what it counts as.
func Classify(command string) Class {
	if len(command) > MaxScript {
		return Unknown()
	}
	return classOf(simple(command))
}

// classOf classifies a command split into its simple commands.
func classOf(simple [][]string) Class {
	var c Class
	for _, words := range simple {
		c.Test = c.Test || isTestWords(words)
		c.Heavy = c.Heavy || isHeavyWords(words)
		c.Install = c.Install || isInstallWords(words)
	}
	return c
}

// IsInstall reports whether command installs packages or tools
// (pip/uv/poetry, npm/pnpm/yarn/bun, go install/get, cargo, gem, brew,
// apt/apk/dnf, playwright install, ...), anywhere in a compound command.
func IsInstall(command string) bool { return Classify(command).Install }

func isHeavyWords(words []string) bool {
	if len(words) == 0 {
		return false
	}
	if isInstallWords(words) {
		return true
	}
	name := base(words[0])
	s := sub(words)
	switch {
	case name == "flet" && (s == "run" || strings.HasPrefix(s, "run ") || strings.HasPrefix(s, "build")):
		return true
	case (name == "pytest" || name == "py.test") && has(words, "--cov"):
		return true
	case (name == "python" || strings.HasPrefix(name, "python3")) && len(words) > 2 && words[1] == "-m" && words[2] == "pytest" && has(words, "--cov"):
		return true
	case name == "coverage" && strings.HasPrefix(s, "run"):
		return true
	case name == "go" && (strings.HasPrefix(s, "test") && (has(words, "-race") || has(words, "-cover", "-coverprofile")) || strings.HasPrefix(s, "build") && has(words, "-race")):
		return true
	case (name == "docker" || name == "podman" || name == "buildah") && (strings.HasPrefix(s, "build") || s == "compose build" || s == "compose up" || strings.HasPrefix(s, "buildx")):
		return true
	case (name == "npm" || name == "pnpm" || name == "yarn" || name == "bun") && (s == "run build" || s == "build" || strings.HasPrefix(s, "run build")):
		return true
	case name == "cargo" && strings.HasPrefix(s, "build") && has(words, "--release"):
		return true
	case name == "ruff" && has(words, "--fix"):
		return true
	case name == "playwright" || (name == "cypress" && strings.HasPrefix(s, "run")):
		return true
	}
	return false
}

// IsHeavy reports whether command is expensive: installs, browser or app
// runners, coverage runs, race-detector tests, image and production builds.
func IsHeavy(command string) bool { return Classify(command).Heavy }

// IsTest reports whether command runs a test suite.
func IsTest(command string) bool { return Classify(command).Test }

func isTestWords(words []string) bool {
	if len(words) == 0 {
		return false
	}
	name := base(words[0])
	s := sub(words)
	switch {
	case name == "pytest" || name == "py.test" || name == "tox" || name == "nox" || name == "jest" || name == "vitest" || name == "mocha" || name == "ctest":
		return true
	case (name == "python" || strings.HasPrefix(name, "python3")) && len(words) > 2 && words[1] == "-m" && (words[2] == "pytest" || words[2] == "unittest"):
		return true
	case (name == "go" || name == "cargo" || name == "dotnet" || name == "deno" || name == "bun") && strings.HasPrefix(s, "test"):
		return true
	case (name == "npm" || name == "pnpm" || name == "yarn") && (s == "test" || s == "t" || strings.HasPrefix(s, "run test") || strings.HasPrefix(s, "test ")):
		return true
	case name == "node" && has(words, "--test"):
		return true
	case name == "make" && (s == "test" || s == "check" || strings.HasPrefix(s, "test ")):
		return true
	}
	return false
}

// Weight is what command costs against p's command budget: HeavyWeight for
// heavy commands, 1 otherwise.
func Weight(p Policy, command string) int {
	if IsHeavy(command) {
		return max(p.HeavyWeight, 1)
	}
	return 1
}

// Counter tracks Case's commands live against a profile. It is safe for
// concurrent use (Case events are read on their own goroutine).
type Counter struct {
	mu       sync.Mutex
	p        Policy
	tests    [][][]string // commands that are test runs whatever IsTest says (the task's verification), as simple commands
	used     int
	commands int
	heavy    int
	testRuns int
	refused  int
}

// NewCounter starts an empty count for p. tests are commands that count as
// test runs besides what IsTest recognizes: the task's verification
// command, which Case may run itself.
func NewCounter(p Policy, tests ...string) *Counter {
	var t [][][]string
	for _, s := range tests {
		if s = strings.TrimSpace(s); s != "" {
			t = append(t, simple(s))
		}
	}
	return &Counter{p: p, tests: t}
}

// Classify is Classify, with the counter's own test commands found
// anywhere in cmd, as a run of its simple commands (so `sh
// scripts/check.sh` is found inside `bash -lc 'cd . && sh scripts/check.sh'`
// and at the end of codex's 38 KiB wrapper).
func (c *Counter) Classify(cmd string) Class {
	if len(cmd) > MaxScript {
		return Unknown()
	}
	words := simple(cmd)
	cl := classOf(words)
	if cl.Test {
		return cl
	}
	for _, t := range c.tests {
		if containsRun(words, t) {
			cl.Test = true
			break
		}
	}
	return cl
}

// containsRun reports whether run appears in list as consecutive elements.
func containsRun(list, run [][]string) bool {
	if len(run) == 0 {
		return false
	}
	for i := 0; i+len(run) <= len(list); i++ {
		if slices.EqualFunc(list[i:i+len(run)], run, slices.Equal[[]string]) {
			return true
		}
	}
	return false
}

// IsTest is Classify(cmd).Test.
func (c *Counter) IsTest(cmd string) bool { return c.Classify(cmd).Test }

// Refusal reasons, as prefixes of Command's reason.
const (
	ReasonInstall = "INSTALL_NOT_ALLOWED"
	ReasonHeavy   = "HEAVY_BUDGET_SPENT"
	ReasonTests   = "TEST_BUDGET_SPENT"
	ReasonBudget  = "COMMAND_BUDGET_SPENT"
)

// Command accounts for one command Case wants to run, classified by the
// counter. ok is false when the profile refuses it; reason then starts
// with one of the Reason codes and says why, in words fit for a tool
// result. Refused commands cost nothing.
func (c *Counter) Command(cmd string) (ok bool, reason string) {
	return c.Account(cmd, c.Classify(cmd))
}

// Account is Command for a command already classified as cl (Unknown()
// for one the caller could not read whole).
func (c *Counter) Account(cmd string, cl Class) (ok bool, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := 1
	if cl.Heavy {
		w = max(c.p.HeavyWeight, 1)
	}
	shown := cmd
	if len(shown) > maxShown {
		// A wrapper's own set-up comes first and the command last.
		shown = "…" + strings.ToValidUTF8(shown[len(shown)-maxShown:], "")
	}
	unknown := ""
	if cl.Unknown {
		unknown = " (a command that could not be read whole counts as a heavy test run)"
	}
	refuse := func(code, format string, args ...any) (bool, string) {
		c.refused++
		return false, code + ": " + fmt.Sprintf(format, args...) + unknown
	}
	switch {
	case !c.p.AllowInstalls && cl.Install:
		return refuse(ReasonInstall, "package installs are not allowed in the %s profile; skipped %q", c.p.Name, shown)
	case cl.Heavy && c.heavy >= c.p.MaxHeavy:
		return refuse(ReasonHeavy, "the %s profile allows %d heavy command(s) and %d ran; skipped %q", c.p.Name, c.p.MaxHeavy, c.heavy, shown)
	case cl.Test && c.testRuns >= c.p.MaxTestRuns:
		return refuse(ReasonTests, "the %s profile allows %d test run(s) and %d ran; skipped %q", c.p.Name, c.p.MaxTestRuns, c.testRuns, shown)
	case c.used+w > c.p.MaxCaseCommands:
		return refuse(ReasonBudget, "the %s profile's command budget is %d and %d is used; %q costs %d; skipped", c.p.Name, c.p.MaxCaseCommands, c.used, shown, w)
	}
	c.used += w
	c.commands++
	if cl.Heavy {
		c.heavy++
	}
	if cl.Test {
		c.testRuns++
	}
	return true, ""
}

// maxShown bounds the command quoted in a refusal (codex's wrapper alone is
// 38 KiB): its end is quoted; the command_refused event keeps more of it
// (ctoharness.MaxRefusedCommandBytes).
const maxShown = 512

// Usage is a snapshot of a Counter, for the report.
type Usage struct {
	Profile  Name `json:"profile"`
	Budget   int  `json:"budget"`
	Used     int  `json:"used"`
	Commands int  `json:"commands"`
	Heavy    int  `json:"heavy"`
	Tests    int  `json:"tests"`
	Refused  int  `json:"refused"`
}

// Usage returns what has been spent so far.
func (c *Counter) Usage() Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Usage{Profile: c.p.Name, Budget: c.p.MaxCaseCommands, Used: c.used, Commands: c.commands, Heavy: c.heavy,
		Tests: c.testRuns, Refused: c.refused}
}

// Markdown renders the profile table for docs/execution-profiles.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| profile | command budget | heavy commands | heavy weight | test runs | flake reruns | installs | runs tests | test budget | egress connections | egress bytes | Case events | event bytes | stage evidence |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	yes := func(v bool) string {
		if v {
			return "yes"
		}
		return "no"
	}
	for _, p := range table {
		name := "`" + string(p.Name) + "`"
		if p.Name == Default {
			name += " (default)"
		}
		if p.Name == Agent {
			name += " (default with `--agent`)"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s | %s | %s | %d | %d MiB | %d | %s | %s |\n", name, p.MaxCaseCommands, p.MaxHeavy,
			p.HeavyWeight, p.MaxTestRuns, p.FlakeReruns, yes(p.AllowInstalls), yes(p.RunTests), p.TestBudget, p.NetConns, p.NetBytes>>20,
			p.MaxCaseEvents, mib(p.MaxEventBytes), yes(p.Qualifies))
	}
	b.WriteString("\n")
	for _, p := range table {
		fmt.Fprintf(&b, "- `%s`: %s\n", p.Name, p.Description)
	}
	return b.String()
}

func mib(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// wordText is a word with its quoting resolved; expansions become "?".
func wordText(w *syntax.Word) string {
	s, _ := scan.Literal(w)
	return s
}

// registryHosts are package registries: an install needs one of them, so
// allowing one on the network allowlist is asking for installs.
var registryHosts = []string{"registry.npmjs.org", "registry.yarnpkg.com", "pypi.org", "files.pythonhosted.org",
	"proxy.golang.org", "crates.io", "static.crates.io", "index.crates.io", "rubygems.org", "repo.maven.apache.org"}

// ForEndpoints adjusts the agent profile to the run's network allowlist
// (HOST:PORT entries): installs are allowed when a package registry is on
// it, since the task or config then asked for them. Other profiles are
// returned as they are.
func ForEndpoints(p Policy, endpoints []string) Policy {
	if p.Name != Agent || p.AllowInstalls {
		return p
	}
	for _, e := range endpoints {
		host := e
		if i := strings.LastIndex(e, ":"); i >= 0 {
			host = e[:i]
		}
		host = strings.Trim(strings.ToLower(host), "[]")
		if slices.Contains(registryHosts, host) {
			p.AllowInstalls = true
			p.Description += " Installs are allowed: " + e + " is on the allowlist."
			return p
		}
	}
	return p
}
