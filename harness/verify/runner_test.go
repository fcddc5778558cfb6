package verify

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/scan"
)

// recTracer records the processes the runner says it started.
type recTracer struct {
	execs [][]string
	paths []string
}

func (r *recTracer) Trace(op ctoharness.TraceOp, p string) {
	r.paths = append(r.paths, string(op)+" "+p)
}
func (r *recTracer) TraceExec(argv []string, dir string) { r.execs = append(r.execs, argv) }

type env struct {
	fixture string
	logPath string
	tracer  *recTracer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{fixture: t.TempDir(), logPath: filepath.Join(t.TempDir(), "test.log"), tracer: &recTracer{}}
}

func (e *env) input(t *testing.T, command string, timeout time.Duration) Input {
	t.Helper()
	f, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Command: command, Fixture: e.fixture, Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: timeout,
		Grace: 200 * time.Millisecond, Log: f, LogPath: "test.log", Tracer: e.tracer}
}

func (e *env) log(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(e.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func budget() *Budget { return NewBudget(time.Minute, 10) }

// alive reports whether pid still exists as a process that has not exited.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie has exited; it only waits to be reaped by its parent.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the child never wrote its pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s %d survived the timeout", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPassAndCountsPlumbing(t *testing.T) {
	e := newEnv(t)
	rec, err := Execute(context.Background(), e.input(t, "echo '3 passed, 1 skipped in 0.01s'; echo warn >&2", 10*time.Second), budget(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestPass || rec.ExitCode == nil || *rec.ExitCode != 0 || rec.Reruns != 0 || len(rec.Attempts) != 1 {
		t.Fatalf("got %+v", rec)
	}
	if rec.StdoutInline != "3 passed, 1 skipped in 0.01s\n" || rec.StderrInline != "warn\n" || rec.StdoutTruncated || rec.StderrTruncated {
		t.Fatalf("inline %q %q", rec.StdoutInline, rec.StderrInline)
	}
	if rec.Counts == nil || *rec.Counts != (ctoharness.TestCounts{Passed: 3, Skipped: 1}) || rec.CountsFormat != FormatPytest {
		t.Fatalf("counts %+v %q", rec.Counts, rec.CountsFormat)
	}
	if log := e.log(t); !strings.Contains(log, "3 passed") || !strings.Contains(log, "warn") || !strings.Contains(log, "exit status 0") {
		t.Fatalf("log %q", log)
	}
	if len(e.tracer.execs) != 1 || e.tracer.execs[0][0] != "/bin/sh" {
		t.Fatalf("traced %v", e.tracer.execs)
	}
	tr := rec.TestsRecord()
	if tr.Classification != ctoharness.TestPass || tr.Counts != rec.Counts || tr.LogPath != "test.log" || tr.TimeoutSeconds != 10 {
		t.Fatalf("tests record %+v", tr)
	}
}

// A child that ignores SIGTERM is killed with SIGKILL after the grace period.
func TestTimeoutChildIgnoresSIGTERM(t *testing.T) {
	e := newEnv(t)
	pidFile := filepath.Join(e.fixture, "child.pid")
	start := time.Now()
	rec, err := Execute(context.Background(), e.input(t, "trap '' TERM; echo $$ > "+pidFile+"; while :; do sleep 1; done", 400*time.Millisecond), budget(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestTimeout || !rec.TimedOut || rec.Reruns != 0 {
		t.Fatalf("got %+v (a timeout is never rerun)", rec)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	waitDead(t, readPid(t, pidFile), "the SIGTERM-ignoring child")
	if !strings.Contains(e.log(t), "killed after the 400ms timeout") {
		t.Fatalf("log %q", e.log(t))
	}
}

// A grandchild that would outlive its parent does not survive the timeout.
func TestTimeoutKillsGrandchild(t *testing.T) {
	e := newEnv(t)
	pidFile := filepath.Join(e.fixture, "grandchild.pid")
	script := "(trap '' TERM HUP; sleep 300 & echo $! > " + pidFile + "; wait) & sleep 300"
	rec, err := Execute(context.Background(), e.input(t, script, 500*time.Millisecond), budget(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestTimeout {
		t.Fatalf("got %+v", rec)
	}
	waitDead(t, readPid(t, pidFile), "the grandchild")
}

// Fails the first time (no marker file yet), passes the second.
const flaky = `if [ -f .flaky-marker ]; then echo "1 passed in 0.01s"; exit 0; fi; touch .flaky-marker; echo "1 failed in 0.01s"; exit 1`

func TestFlake(t *testing.T) {
	e := newEnv(t)
	rec, err := Execute(context.Background(), e.input(t, flaky, 10*time.Second), budget(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestFlake || rec.Reruns != 1 || len(rec.Attempts) != 2 {
		t.Fatalf("got %+v", rec)
	}
	if rec.Attempts[0].Classification != ctoharness.TestFailure || rec.Attempts[1].Classification != ctoharness.TestPass {
		t.Fatalf("attempts %+v", rec.Attempts)
	}
	if rec.Counts == nil || rec.Counts.Passed != 1 || rec.Counts.Failed != 0 {
		t.Fatalf("counts are the last run's: %+v", rec.Counts)
	}
	if log := e.log(t); strings.Count(log, "$ ") != 2 || !strings.Contains(log, "rerun 1 of 1") {
		t.Fatalf("log %q", log)
	}
}

func TestFailureWithoutReruns(t *testing.T) {
	e := newEnv(t)
	rec, err := Execute(context.Background(), e.input(t, flaky, 10*time.Second), budget(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestFailure || rec.Reruns != 0 || rec.Reason != "exit status 1" {
		t.Fatalf("got %+v", rec)
	}
}

func TestFailureOnEveryRerun(t *testing.T) {
	e := newEnv(t)
	rec, err := Execute(context.Background(), e.input(t, "exit 3", 10*time.Second), budget(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestFailure || rec.Reruns != 2 || len(rec.Attempts) != 3 || *rec.ExitCode != 3 {
		t.Fatalf("got %+v", rec)
	}
}

// The budget is checked before each run; a run never gets more than what is left.
func TestBudgetExhaustion(t *testing.T) {
	e := newEnv(t)
	b := NewBudget(500*time.Millisecond, 10)
	start := time.Now()
	rec, err := Execute(context.Background(), e.input(t, "sleep 30", 10*time.Second), b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestTimeout || !strings.Contains(rec.Reason, "test budget ran out") {
		t.Fatalf("first run: %+v", rec)
	}
	if time.Since(start) > 5*time.Second || rec.Attempts[0].TimeoutMs != 500 {
		t.Fatalf("the run was not capped by the budget: %+v", rec.Attempts)
	}
	marker := filepath.Join(e.fixture, "ran")
	rec, err = Execute(context.Background(), e.input(t, "touch "+marker, 10*time.Second), b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestNotRun || rec.Refusal != RefusedBudget || len(rec.Attempts) != 0 {
		t.Fatalf("second run: %+v", rec)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a run started with the budget spent")
	}
	if !strings.Contains(e.log(t), "test budget exhausted") {
		t.Fatalf("log %q", e.log(t))
	}
}

// The run cap stops reruns: the failure stays a failure.
func TestRunCapStopsReruns(t *testing.T) {
	e := newEnv(t)
	rec, err := Execute(context.Background(), e.input(t, flaky, 10*time.Second), NewBudget(time.Minute, 1), 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestFailure || len(rec.Attempts) != 1 || !strings.Contains(rec.Reason, "not rerun") {
		t.Fatalf("got %+v", rec)
	}
	if rec.Budget.Runs != 1 || rec.Budget.MaxRuns != 1 {
		t.Fatalf("budget %+v", rec.Budget)
	}
}

func TestGovernanceUnavailable(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Input)
		budget *Budget
		reruns int
	}{
		{"zero timeout", func(in *Input) { in.Timeout = 0 }, budget(), 0},
		{"negative timeout", func(in *Input) { in.Timeout = -time.Second }, budget(), 0},
		{"no budget", func(*Input) {}, nil, 0},
		{"zero budget", func(*Input) {}, NewBudget(0, 3), 0},
		{"negative budget", func(*Input) {}, NewBudget(-time.Second, 3), 0},
		{"no runs", func(*Input) {}, NewBudget(time.Minute, 0), 0},
		{"negative reruns", func(*Input) {}, budget(), -1},
		{"negative grace", func(in *Input) { in.Grace = -time.Second }, budget(), 0},
		{"no tracer", func(in *Input) { in.Tracer = nil }, budget(), 0},
		{"no log", func(in *Input) { _ = in.Log.Close(); in.Log = nil }, budget(), 0},
		{"missing fixture", func(in *Input) { in.Fixture = filepath.Join(in.Fixture, "gone") }, budget(), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			marker := filepath.Join(e.fixture, "ran")
			in := e.input(t, "touch "+marker, 5*time.Second)
			c.mutate(&in)
			rec, err := Execute(context.Background(), in, c.budget, c.reruns)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Classification != ctoharness.TestGovUnav || rec.Refusal != RefusedGovernance || rec.Reason == "" {
				t.Fatalf("got %+v", rec)
			}
			if _, err := os.Stat(marker); err == nil || len(e.tracer.execs) != 0 {
				t.Fatal("the command ran although a limit could not be enforced")
			}
		})
	}
}

// stdout and stderr are each capped inline, deterministically, with a marker.
func TestInlineCaps(t *testing.T) {
	run := func() Record {
		e := newEnv(t)
		cmd := "i=0; while [ $i -lt 1200 ]; do echo \"line $i: 0123456789012345678901234567890123456789\"; i=$((i+1)); done; echo small >&2"
		rec, err := Execute(context.Background(), e.input(t, cmd, 20*time.Second), budget(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if log := e.log(t); !strings.Contains(log, "line 1199:") || !strings.Contains(log, "small") {
			t.Fatal("test.log lost output")
		}
		return rec
	}
	a, b := run(), run()
	if !a.StdoutTruncated || len(a.StdoutInline) > InlineCap || !strings.Contains(a.StdoutInline, "[cto-harness: stdout truncated:") {
		t.Fatalf("stdout: truncated=%v len=%d", a.StdoutTruncated, len(a.StdoutInline))
	}
	if a.StderrTruncated || a.StderrInline != "small\n" {
		t.Fatalf("stderr %q", a.StderrInline)
	}
	if a.StdoutInline != b.StdoutInline {
		t.Fatal("inline output is not deterministic")
	}
	if !strings.HasPrefix(a.StdoutInline, "line 0: ") {
		t.Fatal("the inline text must be the beginning of the stream")
	}
}

func TestFixtureNotADirectory(t *testing.T) {
	e := newEnv(t)
	in := e.input(t, "true", time.Second)
	in.Fixture = filepath.Join(e.fixture, "file")
	if err := os.WriteFile(in.Fixture, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := Execute(context.Background(), in, budget(), 0)
	if err != nil || rec.Classification != ctoharness.TestGovUnav {
		t.Fatalf("a fixture that is not a directory: %+v %v", rec, err)
	}
}

func TestCancelledContext(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	rec, err := Execute(ctx, e.input(t, "sleep 30", 20*time.Second), budget(), 2)
	if !errors.Is(err, context.Canceled) || rec.Classification != ctoharness.TestNotRun || len(rec.Attempts) != 1 {
		t.Fatalf("got %+v %v", rec, err)
	}
}

func policy(t *testing.T, name string) Policy {
	t.Helper()
	p, err := profile.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return Policy{Profile: p}
}

func TestRunWithPolicy(t *testing.T) {
	t.Run("smoke skips tests", func(t *testing.T) {
		e := newEnv(t)
		rec, err := RunWithPolicy(context.Background(), e.input(t, "touch ran", 5*time.Second), policy(t, "smoke"), budget())
		if err != nil || rec.Classification != ctoharness.TestNotRun || rec.Refusal != RefusedProfile || rec.Profile != profile.Smoke {
			t.Fatalf("got %+v %v", rec, err)
		}
		if _, err := os.Stat(filepath.Join(e.fixture, "ran")); err == nil {
			t.Fatal("smoke ran the command")
		}
		if !strings.Contains(e.log(t), "PROFILE_SKIPS_TESTS") {
			t.Fatalf("log %q", e.log(t))
		}
	})
	t.Run("dangerous refused", func(t *testing.T) {
		e := newEnv(t)
		if err := os.WriteFile(filepath.Join(e.fixture, "check.sh"), []byte("touch ran\nsudo true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		rec, err := RunWithPolicy(context.Background(), e.input(t, "sh check.sh", 5*time.Second), policy(t, "fast"), budget())
		if err != nil || rec.Classification != ctoharness.TestNotRun || rec.Refusal != RefusedDangerous {
			t.Fatalf("got %+v %v", rec, err)
		}
		if len(rec.Findings) != 1 || rec.Findings[0].Pattern != scan.PatPrivilege || rec.Findings[0].File != "check.sh" {
			t.Fatalf("findings %+v", rec.Findings)
		}
		if _, err := os.Stat(filepath.Join(e.fixture, "ran")); err == nil {
			t.Fatal("a dangerous script ran")
		}
		if log := e.log(t); !strings.Contains(log, "DANGEROUS_SCRIPT") || !strings.Contains(log, "privilege-escalation at check.sh:2") {
			t.Fatalf("log %q", log)
		}
	})
	t.Run("allow dangerous", func(t *testing.T) {
		e := newEnv(t)
		pol := policy(t, "fast")
		pol.AllowDangerous = true
		rec, err := RunWithPolicy(context.Background(), e.input(t, "true || sudo true", 5*time.Second), pol, budget())
		if err != nil || rec.Classification != ctoharness.TestPass || !rec.DangerousAllowed || len(rec.Findings) != 1 {
			t.Fatalf("got %+v %v", rec, err)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		e := newEnv(t)
		pol := policy(t, "strict")
		pol.DryRun = true
		rec, err := RunWithPolicy(context.Background(), e.input(t, "touch ran", 5*time.Second), pol, budget())
		if err != nil || rec.Refusal != RefusedDryRun || rec.Classification != ctoharness.TestNotRun {
			t.Fatalf("got %+v %v", rec, err)
		}
		if _, err := os.Stat(filepath.Join(e.fixture, "ran")); err == nil {
			t.Fatal("a dry run ran the command")
		}
	})
	t.Run("scope refused", func(t *testing.T) {
		e := newEnv(t)
		pol := policy(t, "fast")
		pol.AllowedTestPaths = []string{"tests/**"}
		rec, err := RunWithPolicy(context.Background(), e.input(t, "go test ./src/...", 5*time.Second), pol, budget())
		if err != nil || rec.Refusal != RefusedScope || rec.ScopeReason != ScopeOutside || rec.Target != "src" {
			t.Fatalf("got %+v %v", rec, err)
		}
		rec, err = RunWithPolicy(context.Background(), e.input(t, "pytest ../elsewhere", 5*time.Second), policy(t, "fast"), budget())
		if err != nil || rec.Refusal != RefusedScope || rec.ScopeReason != ScopeTraversal {
			t.Fatalf("traversal without allowed paths: %+v %v", rec, err)
		}
	})
	t.Run("undeterminable target", func(t *testing.T) {
		e := newEnv(t)
		pol := policy(t, "fast")
		pol.AllowedTestPaths = []string{"tests"}
		rec, err := RunWithPolicy(context.Background(), e.input(t, `pytest "$WHERE"`, 5*time.Second), pol, budget())
		if err != nil || rec.Classification != ctoharness.TestGovUnav || rec.Refusal != RefusedGovernance {
			t.Fatalf("got %+v %v", rec, err)
		}
	})
	t.Run("no profile", func(t *testing.T) {
		e := newEnv(t)
		rec, err := RunWithPolicy(context.Background(), e.input(t, "true", 5*time.Second), Policy{}, budget())
		if err != nil || rec.Classification != ctoharness.TestGovUnav {
			t.Fatalf("got %+v %v", rec, err)
		}
	})
	t.Run("flake under fast", func(t *testing.T) {
		e := newEnv(t)
		pol := policy(t, "fast")
		rec, err := RunWithPolicy(context.Background(), e.input(t, flaky, 5*time.Second), pol, NewBudget(pol.Profile.TestBudget, pol.Profile.MaxTestRuns))
		if err != nil || rec.Classification != ctoharness.TestFlake || rec.Reruns != 1 || rec.Target != "." {
			t.Fatalf("got %+v %v", rec, err)
		}
	})
}

func TestPreflightListsScripts(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.fixture, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.fixture, "scripts", "check.sh"), []byte("go test ./...\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	in := e.input(t, "sh scripts/check.sh", time.Second)
	defer in.Log.Close()
	plan, err := Preflight(context.Background(), in, policy(t, "fast"))
	if err != nil || !plan.Runnable() || len(plan.Scripts) != 1 || plan.Scripts[0] != "scripts/check.sh" || plan.Targets[0] != "scripts/check.sh" {
		t.Fatalf("got %+v %v", plan, err)
	}
	script := filepath.Join(e.fixture, "scripts", "check.sh")
	if !slices.Contains(e.tracer.paths, "read "+script) || !slices.Contains(e.tracer.paths, "stat "+script) {
		t.Fatalf("the script read is not traced: %v", e.tracer.paths)
	}
	if len(e.tracer.execs) != 0 {
		t.Fatal("preflight started a process")
	}
}

// A Go module missing from the warm caches, which run offline: go test
// fails before any test runs. That is the environment (the host's cache),
// not the code, so it is TEST_NOT_RUN with what to do, and not rerun
// (stretchr/testify, whose objx the host had never downloaded, read as
// TESTS_FAILED and ran twice).
func TestGoModuleMissingOffline(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	e := newEnv(t)
	files := map[string]string{
		"go.mod":    "module example.com/m\n\ngo 1.21\n\nrequire example.com/absent v1.0.0\n",
		"m_test.go": "package m\n\nimport (\n\t\"testing\"\n\n\t_ \"example.com/absent\"\n)\n\nfunc TestX(t *testing.T) {}\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(e.fixture, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := e.input(t, "go test -count=1 ./...", time.Minute)
	scratch := t.TempDir()
	in.Env = []string{"PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin", "HOME=" + scratch, "GOCACHE=" + filepath.Join(scratch, "build"),
		"GOMODCACHE=" + filepath.Join(scratch, "mod"), "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local"}
	rec, err := Execute(context.Background(), in, budget(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestNotRun || rec.Reruns != 0 {
		t.Fatalf("classification %s after %d reruns (%q), want TEST_NOT_RUN and no rerun\n%s", rec.Classification, rec.Reruns, rec.Reason, e.log(t))
	}
	for _, want := range []string{"example.com/absent", "go mod download"} {
		if !strings.Contains(rec.Reason, want) {
			t.Errorf("reason %q does not name %q", rec.Reason, want)
		}
	}
}

// A crate whose dependency is not in cargo's local registry, run offline:
// cargo stops before building. crates.io is not reachable from the
// verification (dtolnay/itoa's own `cargo test --offline` read as
// TESTS_FAILED and ran twice), so the reason says so and how to fetch.
func TestCargoDependencyMissingOffline(t *testing.T) {
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		t.Skip("no cargo on PATH (rustup not installed)")
	}
	e := newEnv(t)
	files := map[string]string{
		"Cargo.toml": "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nabsent-crate-for-test = \"1\"\n",
		"src/lib.rs": "",
	}
	for name, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(e.fixture, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.fixture, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := e.input(t, "cargo test --offline", time.Minute)
	scratch := t.TempDir()
	in.Env = []string{"PATH=" + filepath.Dir(cargo) + ":/usr/bin:/bin", "HOME=" + scratch, "CARGO_HOME=" + filepath.Join(scratch, "cargo")}
	if v := os.Getenv("RUSTUP_HOME"); v != "" {
		in.Env = append(in.Env, "RUSTUP_HOME="+v)
	} else if home, err := os.UserHomeDir(); err == nil {
		in.Env = append(in.Env, "RUSTUP_HOME="+filepath.Join(home, ".rustup"))
	}
	rec, err := Execute(context.Background(), in, budget(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestNotRun || rec.Reruns != 0 {
		t.Fatalf("classification %s after %d reruns (%q), want TEST_NOT_RUN and no rerun\n%s", rec.Classification, rec.Reruns, rec.Reason, e.log(t))
	}
	for _, want := range []string{"absent-crate-for-test", "cargo fetch"} {
		if !strings.Contains(rec.Reason, want) {
			t.Errorf("reason %q does not name %q", rec.Reason, want)
		}
	}
}

// npm offline on a cache without the package stops at once with
// ENOTCACHED: the reason names the package and how to fill the cache, and
// the command is not rerun.
func TestNpmPackageMissingOffline(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("no npm on PATH")
	}
	e := newEnv(t)
	pkg := `{"name": "m", "version": "1.0.0", "private": true, "dependencies": {"absent-package-for-test": "1.0.0"}}`
	if err := os.WriteFile(filepath.Join(e.fixture, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	in := e.input(t, "npm install", time.Minute)
	scratch := t.TempDir()
	in.Env = []string{"PATH=" + filepath.Dir(npm) + ":/usr/bin:/bin", "HOME=" + scratch, "npm_config_cache=" + filepath.Join(scratch, "npm"),
		"npm_config_offline=true", "npm_config_update_notifier=false"}
	rec, err := Execute(context.Background(), in, budget(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestNotRun || rec.Reruns != 0 {
		t.Fatalf("classification %s after %d reruns (%q), want TEST_NOT_RUN and no rerun\n%s", rec.Classification, rec.Reruns, rec.Reason, e.log(t))
	}
	for _, want := range []string{"absent-package-for-test", "caches.npm", "npm ci"} {
		if !strings.Contains(rec.Reason, want) {
			t.Errorf("reason %q does not name %q", rec.Reason, want)
		}
	}
}

// A test runner that reported its failures and then hung (mocha with a
// handle left open) times out; the reason says what the output had
// reported, so the timeout does not hide the failing tests.
func TestTimeoutReasonNamesReportedCounts(t *testing.T) {
	e := newEnv(t)
	script := `printf '\n  1180 passing (2s)\n  3 pending\n  55 failing\n\n'; sleep 30`
	rec, err := Execute(context.Background(), e.input(t, script, 400*time.Millisecond), budget(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Classification != ctoharness.TestTimeout {
		t.Fatalf("classification %s, want TEST_TIMEOUT", rec.Classification)
	}
	want := "killed after the 400ms timeout; the output had reported 55 failed, 1180 passed and 3 skipped tests (mocha)"
	if rec.Reason != want {
		t.Errorf("reason %q\nwant   %q", rec.Reason, want)
	}
	// Without counts the reason is the timeout alone.
	rec, err = Execute(context.Background(), e.input(t, "sleep 30", 400*time.Millisecond), budget(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Reason != "killed after the 400ms timeout" {
		t.Errorf("reason %q", rec.Reason)
	}
}

// TestMakeRecipeProgramMissing runs real make: a recipe that starts a
// program the PATH does not have (git's Makefile and cargo, in a sandbox
// without the rust toolchain) fails make with "Error 127" and exit status 2.
// That is TEST_NOT_RUN naming the program, not rerun; make failing for any
// other reason stays TESTS_FAILED.
func TestMakeRecipeProgramMissing(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	const missing = "cto-absent-tool"
	for _, tc := range []struct {
		name, makefile, command string
		notRun                  bool
	}{
		{"through the shell", "all: lib.a\n\techo built\nlib.a:\n\t" + missing + " build --release && touch $@\n", "make -j2 && echo tests", true},
		{"without a shell", "all:\n\t" + missing + " build\n", "make", true},
		{"in a sub-make", "all:\n\t$(MAKE) -C sub\n", "make", true},
		{"a recipe that fails", "all:\n\texit 1\n", "make", false},
		{"one recipe missing, another failing", "all: a b\na:\n\t" + missing + "\nb:\n\tsleep 0.2; exit 1\n", "make -k", false},
		{"a program that exits 127 itself", "all:\n\tsh -c 'exit 127'\n", "make", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if err := os.WriteFile(filepath.Join(e.fixture, "Makefile"), []byte(tc.makefile), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(e.fixture, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.fixture, "sub", "Makefile"), []byte("all:\n\t"+missing+" --version\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			rec, err := Execute(context.Background(), e.input(t, tc.command, 20*time.Second), budget(), 2)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.notRun {
				if rec.Classification != ctoharness.TestFailure || rec.Reruns != 2 {
					t.Fatalf("classification %s after %d reruns (%q), want TESTS_FAILED rerun twice\n%s", rec.Classification, rec.Reruns, rec.Reason, e.log(t))
				}
				return
			}
			if rec.Classification != ctoharness.TestNotRun || rec.Reruns != 0 {
				t.Fatalf("classification %s after %d reruns (%q), want TEST_NOT_RUN and no rerun\n%s", rec.Classification, rec.Reruns, rec.Reason, e.log(t))
			}
			for _, want := range []string{"a make recipe runs is not in the sandbox: " + missing, "Error 127", "toolchains"} {
				if !strings.Contains(rec.Reason, want) {
					t.Errorf("reason %q does not say %q", rec.Reason, want)
				}
			}
		})
	}
}
