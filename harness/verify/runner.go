package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/proc"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Refusal says why a verification was not executed. Codes are stable.
type Refusal string

// Refusals.
const (
	RefusedGovernance Refusal = "GOVERNANCE_UNAVAILABLE" // a limit cannot be enforced
	RefusedProfile    Refusal = "PROFILE_SKIPS_TESTS"    // the profile does not run tests (smoke)
	RefusedDangerous  Refusal = "DANGEROUS_SCRIPT"       // a high or critical scan finding, without --allow-dangerous
	RefusedScope      Refusal = "TEST_SCOPE_VIOLATION"   // a test target is out of scope (see ScopeReason)
	RefusedBudget     Refusal = "TEST_BUDGET_EXHAUSTED"  // nothing left of the test budget before the first run
	RefusedDryRun     Refusal = "DRY_RUN"                // checked only, by request
)

// Attempt is one execution of the verification command.
type Attempt struct {
	ExitCode       *int                 `json:"exit_code"`
	Signal         string               `json:"signal,omitempty"`
	Classification ctoharness.TestClass `json:"classification"`
	DurationMs     int64                `json:"duration_ms"`
	TimeoutMs      int64                `json:"timeout_ms"` // the timeout this run actually had (budget-capped)
	TimedOut       bool                 `json:"timed_out"`
}

// Record is the full outcome of a governed verification.
type Record struct {
	Target           string                 `json:"target"` // the test targets, space separated
	Command          string                 `json:"command"`
	ExitCode         *int                   `json:"exit_code"` // of the last run
	Classification   ctoharness.TestClass   `json:"classification"`
	Reason           string                 `json:"reason,omitempty"`
	Refusal          Refusal                `json:"refusal,omitempty"`
	ScopeReason      string                 `json:"scope_reason,omitempty"`
	Counts           *ctoharness.TestCounts `json:"counts"` // of the last run; nil when the format is unknown
	CountsFormat     string                 `json:"counts_format,omitempty"`
	DurationMs       int64                  `json:"duration_ms"` // all runs
	TimeoutSeconds   int                    `json:"timeout_seconds"`
	TimedOut         bool                   `json:"timed_out"`
	Truncated        bool                   `json:"truncated"` // test.log hit its cap
	Reruns           int                    `json:"reruns"`
	Attempts         []Attempt              `json:"attempts"`
	StdoutInline     string                 `json:"stdout_inline"` // of the last run, at most InlineCap bytes
	StderrInline     string                 `json:"stderr_inline"`
	StdoutTruncated  bool                   `json:"stdout_truncated"`
	StderrTruncated  bool                   `json:"stderr_truncated"`
	LogPath          string                 `json:"log_path"`
	Profile          profile.Name           `json:"profile,omitempty"`
	Findings         []scan.Finding         `json:"findings"`
	Scripts          []string               `json:"scripts"` // fixture-relative scripts the scan read
	DangerousAllowed bool                   `json:"dangerous_allowed"`
	Budget           BudgetUsage            `json:"budget"`
}

// TestsRecord is the part of the record the current report schema holds.
func (r Record) TestsRecord() ctoharness.TestsRecord {
	findings := make([]ctoharness.ScanFinding, 0, len(r.Findings))
	for _, f := range r.Findings {
		findings = append(findings, ctoharness.ScanFinding{File: f.File, Line: f.Line, Pattern: f.Pattern, Command: f.Command,
			Severity: string(f.Severity), Message: f.Message})
	}
	return ctoharness.TestsRecord{Command: r.Command, ExitCode: r.ExitCode, Classification: r.Classification,
		Reason: r.Reason, Counts: r.Counts, DurationMs: r.DurationMs, TimeoutSeconds: r.TimeoutSeconds,
		TimedOut: r.TimedOut, Truncated: r.Truncated, LogPath: r.LogPath,
		Target: r.Target, Profile: string(r.Profile), Refusal: string(r.Refusal), ScopeReason: r.ScopeReason,
		CountsFormat: r.CountsFormat, Reruns: r.Reruns, StdoutInline: r.StdoutInline, StderrInline: r.StderrInline,
		Findings: findings, Scripts: append([]string{}, r.Scripts...), DangerousAllowed: r.DangerousAllowed}
}

func newRecord(in Input) Record {
	return Record{Command: in.Command, TimeoutSeconds: int(in.Timeout / time.Second), LogPath: in.LogPath,
		Attempts: []Attempt{}, Findings: []scan.Finding{}, Scripts: []string{}}
}

// refuse finishes a record that was not executed, noting why in test.log.
func refuse(rec Record, in Input, class ctoharness.TestClass, refusal Refusal, reason string) (Record, error) {
	rec.Classification, rec.Refusal, rec.Reason = class, refusal, reason
	if in.Log == nil {
		return rec, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "$ %s\n[cto-harness: verification not run: %s: %s]\n", in.Command, refusal, reason)
	for _, f := range rec.Findings {
		fmt.Fprintf(&b, "[cto-harness: %s %s at %s:%d: %s: %s]\n", f.Severity, f.Pattern, f.File, f.Line, f.Command, f.Message)
	}
	_, werr := io.WriteString(in.Log, b.String())
	serr := in.Log.Sync()
	cerr := in.Log.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return rec, fmt.Errorf("write %s: %w", in.LogPath, err)
	}
	return rec, nil
}

// governance returns why the limits of a run cannot be enforced, or "".
func governance(in Input, budget *Budget, reruns int) string {
	switch {
	case in.Log == nil:
		return "there is no log to keep the output in"
	case in.Tracer == nil:
		return "there is no tracer to record the process in"
	case in.Timeout <= 0:
		return fmt.Sprintf("the per-run timeout must be positive, got %s", in.Timeout)
	case in.Grace < 0:
		return fmt.Sprintf("the kill grace period cannot be negative, got %s", in.Grace)
	case reruns < 0:
		return fmt.Sprintf("the flake rerun count cannot be negative, got %d", reruns)
	case budget == nil:
		return "there is no test budget to track"
	case budget.total <= 0 || budget.maxRuns <= 0:
		return fmt.Sprintf("the test budget (%s over %d runs) cannot be enforced", budget.total, budget.maxRuns)
	}
	fi, err := os.Stat(in.Fixture)
	if in.Fixture == "" || err != nil || !fi.IsDir() {
		return fmt.Sprintf("the fixture %q cannot be resolved as the working directory", in.Fixture)
	}
	return ""
}

// Execute runs the command under the budget: each run is checked against the
// budget before it starts and gets at most what is left of it; a failed run
// is rerun up to reruns times; failed-then-passed is TEST_FLAKE. stdout and
// stderr both go to test.log (capped at in.LogCap), and each is also kept
// inline (InlineCap) and parsed for test counts. Execute closes in.Log.
//
// A limit that cannot be enforced (no log, no tracer, a non-positive
// timeout, no or an invalid budget, negative reruns, no fixture) gives
// GOVERNANCE_UNAVAILABLE without running anything. The error is non-nil only
// when the command could not be started or test.log could not be written.
func Execute(ctx context.Context, in Input, budget *Budget, reruns int) (Record, error) {
	rec := newRecord(in)
	if reason := governance(in, budget, reruns); reason != "" {
		return refuse(rec, in, ctoharness.TestGovUnav, RefusedGovernance, reason)
	}
	if strings.TrimSpace(in.Command) == "" {
		return refuse(rec, in, ctoharness.TestGovUnav, RefusedGovernance, "the verification command is empty")
	}
	if in.LogCap == 0 {
		in.LogCap = proc.DefaultLogCap
	}
	log := proc.NewCappedFile(in.Log, in.LogCap)
	argv := []string{"/bin/sh", "-c", in.Command}
	var runErr error
	var total time.Duration
	for attempt := 0; attempt <= reruns; attempt++ {
		timeout, err := budget.Reserve(in.Timeout)
		if err != nil {
			if attempt == 0 {
				fmt.Fprintf(log, "$ %s\n[cto-harness: verification not run: %v]\n", in.Command, err)
				rec.Classification, rec.Reason = ctoharness.TestNotRun, err.Error()
				rec.Refusal = RefusedBudget
				if errors.Is(err, ErrGovernance) {
					rec.Classification, rec.Refusal = ctoharness.TestGovUnav, RefusedGovernance
				}
			} else {
				fmt.Fprintf(log, "[cto-harness: no rerun: %v]\n", err)
				rec.Reason += "; not rerun: " + err.Error()
			}
			break
		}
		if attempt > 0 {
			fmt.Fprintf(log, "[cto-harness: rerun %d of %d after a failure]\n", attempt, reruns)
		}
		fmt.Fprintf(log, "$ %s\n", in.Command)
		stdout, stderr := NewCapture("stdout", InlineCap), NewCapture("stderr", InlineCap)
		outCounts, errCounts := newCountParser(), newCountParser()
		in.Tracer.TraceExec(argv, in.Fixture)
		launch, attr := argv, (*syscall.SysProcAttr)(nil)
		var extra []*os.File
		var res proc.Result
		err = nil
		if in.Wrap != nil {
			launch, attr, extra, err = in.Wrap(argv)
		}
		if err == nil {
			res, err = proc.Run(ctx, proc.Spec{Argv: launch, SysProcAttr: attr, ExtraFiles: extra, Dir: in.Fixture, Env: in.Env, Timeout: timeout, Grace: in.Grace,
				Stdout: io.MultiWriter(log, stdout, outCounts), Stderr: io.MultiWriter(log, stderr, errCounts)})
		}
		budget.Charge(res.Duration)
		total += res.Duration
		a := Attempt{ExitCode: res.ExitCode, Signal: res.Signal, DurationMs: res.Duration.Milliseconds(),
			TimeoutMs: timeout.Milliseconds(), TimedOut: res.TimedOut}
		budgetCut := timeout < in.Timeout
		switch {
		case err != nil:
			fmt.Fprintf(log, "[cto-harness: not started: %v]\n", err)
		case res.TimedOut && budgetCut:
			fmt.Fprintf(log, "[cto-harness: killed when the test budget ran out, after %s]\n", timeout)
		case res.TimedOut:
			fmt.Fprintf(log, "[cto-harness: killed after the %s timeout]\n", in.Timeout)
		case res.ExitCode != nil:
			fmt.Fprintf(log, "[cto-harness: exit status %d after %s]\n", *res.ExitCode, res.Duration.Round(time.Millisecond))
		case res.Signal != "":
			fmt.Fprintf(log, "[cto-harness: killed by %s]\n", res.Signal)
		}
		rec.ExitCode, rec.TimedOut = res.ExitCode, res.TimedOut
		rec.StdoutInline, rec.StdoutTruncated = stdout.Text()
		rec.StderrInline, rec.StderrTruncated = stderr.Text()
		rec.Counts, rec.CountsFormat = mergeCounts(outCounts, errCounts)
		switch {
		case err != nil:
			a.Classification = ctoharness.TestNotRun
			rec.Classification, rec.Reason = ctoharness.TestNotRun, err.Error()
			runErr = err
		case ctx.Err() != nil && !res.TimedOut:
			a.Classification = ctoharness.TestNotRun
			rec.Classification, rec.Reason = ctoharness.TestNotRun, "interrupted: "+ctx.Err().Error()
			runErr = ctx.Err()
		case res.TimedOut:
			a.Classification = ctoharness.TestTimeout
			rec.Classification = ctoharness.TestTimeout
			rec.Reason = fmt.Sprintf("killed after the %s timeout", in.Timeout)
			if budgetCut {
				rec.Reason = fmt.Sprintf("killed when the test budget ran out, after %s (the per-run timeout is %s)", timeout, in.Timeout)
			}
			// A runner that reported its results and then hung (a handle
			// left open) did run the tests: say what it reported.
			if c := rec.Counts; c != nil && c.Passed+c.Failed+c.Skipped > 0 {
				rec.Reason += fmt.Sprintf("; the output had reported %d failed, %d passed and %d skipped tests (%s)", c.Failed, c.Passed, c.Skipped, rec.CountsFormat)
			}
		case res.ExitCode != nil && missingProgram(*res.ExitCode, rec.StderrInline) != "":
			// The shell's answer to a program it cannot find, or make's
			// for a recipe that ran one: the tests did not run, and a
			// rerun would not find it either.
			a.Classification = ctoharness.TestNotRun
			rec.Classification, rec.Reason = ctoharness.TestNotRun, missingProgram(*res.ExitCode, rec.StderrInline)
		case res.ExitCode != nil && *res.ExitCode != 0 && offlineReason(rec.StdoutInline, rec.StderrInline) != "":
			// A dependency could not be resolved without the network: no
			// test ran, and a rerun would not find it either.
			a.Classification = ctoharness.TestNotRun
			rec.Classification, rec.Reason = ctoharness.TestNotRun, offlineReason(rec.StdoutInline, rec.StderrInline)
		case res.ExitCode != nil && *res.ExitCode == 0:
			a.Classification = ctoharness.TestPass
			rec.Classification, rec.Reason = ctoharness.TestPass, ""
			if attempt > 0 {
				rec.Classification = ctoharness.TestFlake
				rec.Reason = fmt.Sprintf("failed, then passed on rerun %d of %d", attempt, reruns)
			}
		default:
			a.Classification = ctoharness.TestFailure
			rec.Classification = ctoharness.TestFailure
			if res.ExitCode != nil {
				rec.Reason = fmt.Sprintf("exit status %d", *res.ExitCode)
			} else {
				rec.Reason = "killed by " + res.Signal
			}
			if attempt > 0 {
				rec.Reason += fmt.Sprintf(" (on every one of %d runs)", attempt+1)
			}
		}
		rec.Attempts = append(rec.Attempts, a)
		if in.AfterRun != nil && err == nil {
			in.AfterRun(attempt)
		}
		if a.Classification != ctoharness.TestFailure {
			break
		}
	}
	rec.Reruns = max(len(rec.Attempts)-1, 0)
	rec.DurationMs = total.Milliseconds()
	rec.Budget = budget.Usage()
	cerr := log.Close()
	rec.Truncated = log.Truncated()
	if runErr != nil {
		return rec, runErr
	}
	if cerr != nil {
		return rec, fmt.Errorf("write %s: %w", in.LogPath, cerr)
	}
	return rec, nil
}

// mergeCounts prefers stdout's counts and adds stderr's (a runner may report
// on either stream, never the same tests on both).
func mergeCounts(out, err *countParser) (*ctoharness.TestCounts, string) {
	oc, of := out.result()
	ec, ef := err.result()
	switch {
	case oc == nil:
		return ec, ef
	case ec == nil:
		return oc, of
	}
	return &ctoharness.TestCounts{Passed: oc.Passed + ec.Passed, Failed: oc.Failed + ec.Failed, Skipped: oc.Skipped + ec.Skipped}, of + "+" + ef
}

// Policy is what a governed verification is held to.
type Policy struct {
	Profile          profile.Policy
	AllowDangerous   bool     // run despite high/critical scan findings (--allow-dangerous); recorded
	DryRun           bool     // check only (--dry-run)
	Roots            []string // writable roots besides the fixture (the run's scratch root)
	AllowedTestPaths []string // fixture-relative globs test targets must stay in; empty: the whole fixture
	Protected        []string // added to task.ProtectedPatterns()
	// NetAllowed names the hosts an enforced egress allowlist lets the
	// command reach (nil: none); the scanner does not flag them.
	NetAllowed scan.HostAllowed
	// Aliases are the absolute paths the command's view links into the
	// fixture (a task's layout), each with the host directory it reaches.
	Aliases map[string]string
}

// unalias maps targets under a linked path (a layout's /tests) to the host
// directory the link reaches, as the scanner reads them, so they are held
// to the fixture's scope like any other.
func unalias(targets []string, aliases map[string]string) []string {
	al, err := scan.Aliases(aliases)
	if len(al) == 0 || err != nil {
		return targets // an alias that is not absolute fails the scan first
	}
	out := make([]string, len(targets))
	for i, t := range targets {
		out[i] = t
		if c := filepath.Clean(t); strings.HasPrefix(t, "/") && scan.Unalias(al, c) != c {
			out[i] = scan.Unalias(al, c)
		}
	}
	return out
}

// Plan is what the checks before execution established.
type Plan struct {
	Command          string         `json:"command"`
	Profile          profile.Name   `json:"profile"`
	Targets          []string       `json:"targets"`
	Scripts          []string       `json:"scripts"` // fixture-relative scripts the command would run
	Findings         []scan.Finding `json:"findings"`
	DangerousAllowed bool           `json:"dangerous_allowed"`
	Refusal          Refusal        `json:"refusal,omitempty"`
	ScopeReason      string         `json:"scope_reason,omitempty"`
	Reason           string         `json:"reason,omitempty"`
	// Programs are what the command's make recipes start (scan.Result):
	// the dry run warns of those the sandbox would not find.
	Programs []scan.Program `json:"-"`
}

// Runnable reports whether the command may be executed.
func (p Plan) Runnable() bool { return p.Refusal == "" }

// Preflight runs every check that comes before execution, in this order of
// precedence for the refusal: limits enforceable (GOVERNANCE_UNAVAILABLE),
// profile runs tests, script safety, target scope, dry run. It never
// executes anything; the error is non-nil only for a cancelled context.
func Preflight(ctx context.Context, in Input, pol Policy) (Plan, error) {
	plan := Plan{Command: in.Command, Profile: pol.Profile.Name, Targets: []string{}, Scripts: []string{}, Findings: []scan.Finding{}}
	set := func(r Refusal, reason string) {
		if plan.Refusal == "" {
			plan.Refusal, plan.Reason = r, reason
		}
	}
	if pol.Profile.Name == "" {
		set(RefusedGovernance, "no execution profile is in force")
		return plan, nil
	}
	res, err := scan.ScanAliased(ctx, in.Command, in.Fixture, pol.Roots, pol.NetAllowed, pol.Aliases)
	if err != nil {
		if ctx.Err() != nil {
			return plan, ctx.Err()
		}
		set(RefusedGovernance, "the verification command cannot be checked: "+err.Error())
		return plan, nil
	}
	plan.Findings, plan.Scripts, plan.Programs = res.Findings, res.Files, res.Programs
	if in.Tracer != nil {
		for _, f := range res.Files {
			in.Tracer.Trace(ctoharness.TraceRead, filepath.Join(in.Fixture, filepath.FromSlash(f)))
		}
	}

	restricted := len(pol.AllowedTestPaths) > 0 || len(pol.Protected) > 0
	targets, terr := Targets(in.Command)
	var serr error
	switch {
	case terr != nil && restricted:
		set(RefusedGovernance, "the test targets cannot be determined: "+terr.Error())
	case terr == nil:
		plan.Targets = targets
		if in.Tracer != nil {
			for _, t := range targets {
				if !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "..") {
					in.Tracer.Trace(ctoharness.TraceStat, filepath.Join(in.Fixture, filepath.FromSlash(t)))
				}
			}
		}
		serr = CheckScope(in.Fixture, unalias(targets, pol.Aliases), pol.AllowedTestPaths, append(task.ProtectedPatterns(), pol.Protected...))
		var se *ScopeError
		if errors.As(serr, &se) && se.Reason == ScopeGovernance {
			set(RefusedGovernance, serr.Error())
			serr = nil
		}
	}

	if !pol.Profile.RunTests {
		set(RefusedProfile, fmt.Sprintf("the %s profile does not run tests", pol.Profile.Name))
	}
	if scan.Blocking(plan.Findings) {
		if pol.AllowDangerous {
			plan.DangerousAllowed = true
		} else {
			set(RefusedDangerous, fmt.Sprintf("%s; pass --allow-dangerous to run it anyway", blockingSummary(plan.Findings)))
		}
	}
	if serr != nil {
		var se *ScopeError
		if errors.As(serr, &se) && plan.Refusal == "" {
			plan.ScopeReason = se.Reason
		}
		set(RefusedScope, serr.Error())
	}
	if pol.DryRun {
		set(RefusedDryRun, "dry run: checked, not executed")
	}
	return plan, nil
}

// blockingSummary is the scan's own summary: how many findings, how many
// block, and the first few blocking ones with their file, line and text.
func blockingSummary(fs []scan.Finding) string { return scan.Summary(fs) }

// RunWithPolicy is Preflight, then Execute when the plan allows it. A refused
// verification is TEST_NOT_RUN (or GOVERNANCE_UNAVAILABLE) with the refusal
// and its reason in the record and in test.log. It closes in.Log.
func RunWithPolicy(ctx context.Context, in Input, pol Policy, budget *Budget) (Record, error) {
	plan, err := Preflight(ctx, in, pol)
	rec := newRecord(in)
	rec.Profile, rec.Findings, rec.Scripts, rec.DangerousAllowed = plan.Profile, plan.Findings, plan.Scripts, plan.DangerousAllowed
	rec.Target = strings.Join(plan.Targets, " ")
	rec.Budget = budget.Usage()
	if err != nil {
		rec.Classification, rec.Reason = ctoharness.TestNotRun, "interrupted: "+err.Error()
		if in.Log != nil {
			_ = in.Log.Close()
		}
		return rec, err
	}
	if !plan.Runnable() {
		class := ctoharness.TestNotRun
		if plan.Refusal == RefusedGovernance {
			class = ctoharness.TestGovUnav
		}
		rec.ScopeReason = plan.ScopeReason
		return refuse(rec, in, class, plan.Refusal, plan.Reason)
	}
	out, err := Execute(ctx, in, budget, pol.Profile.FlakeReruns)
	out.Profile, out.Findings, out.Scripts, out.DangerousAllowed, out.Target = rec.Profile, rec.Findings, rec.Scripts, rec.DangerousAllowed, rec.Target
	return out, err
}

// goOfflineLine is what go prints for a module it may not download: the
// warm caches set GOPROXY=off (package warmcache).
const goOfflineLine = "module lookup disabled by GOPROXY=off"

// npmOfflineLine is npm's error code for a package it may not download:
// the warm npm cache sets npm_config_offline (package warmcache).
const npmOfflineLine = "npm error code ENOTCACHED"

// cargoOfflineLine is cargo's reminder after a dependency it could not
// resolve offline.
const cargoOfflineLine = "you're using offline mode (--offline)"

// offlineReason reports, for a failed verification's output, that a
// dependency could not be resolved without the network, and says which
// and how to provide it ("" when the output shows no such failure).
// Whatever the output says, the run still blocks: this only changes which
// blocker says why.
func offlineReason(stdout, stderr string) string {
	out := stdout + "\n" + stderr
	switch {
	case strings.Contains(out, goOfflineLine):
		return "a Go module is not in the host's module cache and the warm caches run offline (" + goOfflineLine + ")" +
			listed(out, "go: downloading ", "") + "; no test ran: run `go mod download` (or the tests once) in the source on the host, then run again"
	case strings.Contains(out, npmOfflineLine):
		return "npm needed a package its cache does not have, and it runs offline on the host's npm cache (caches.npm, " + npmOfflineLine + ")" +
			listed(out, "npm error request to ", " failed: cache mode is 'only-if-cached' but no cached response is available.") +
			"; no test ran: run `npm ci` (or `npm install`) in the source on the host to fill the cache, or allow registry.npmjs.org:443 for this command, then run again"
	case strings.Contains(out, cargoOfflineLine) || strings.Contains(out, "Could not resolve host: index.crates.io"):
		return "cargo could not resolve a dependency without the network (crates.io is not reachable from the verification)" +
			listed(out, "error: no matching package named `", "` found") +
			"; no test ran: fetch the crates in the setup (\"setup\": {\"command\": \"cargo fetch\"}, with index.crates.io:443 and static.crates.io:443 in the config's network.setup_allow), then run again"
	}
	return ""
}

// listed is ": a, b" for the text between prefix and suffix on the lines of
// out that have them (at most five), or "".
func listed(out, prefix, suffix string) string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		n, ok := strings.CutPrefix(strings.TrimSpace(l), prefix)
		if !ok {
			continue
		}
		if suffix != "" {
			if n, ok = strings.CutSuffix(n, suffix); !ok {
				continue
			}
		}
		if !slices.Contains(names, n) && len(names) < 5 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return ": " + strings.Join(names, ", ")
}
