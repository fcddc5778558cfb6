package verification

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/hidden"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/step/results"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/schemas"
)

// newVerifier is a verification with a real evidence directory and the
// real hidden-tests and test-report steps as its hooks; the launcher's
// hooks answer as a run without an allowlist would.
func newVerifier(t *testing.T, spec task.Spec) *Verifier {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	tr := evidence.NewTrace("run-1")
	dir, err := evidence.Create(context.Background(), filepath.Join(t.TempDir(), "run-1"), set, tr)
	if err != nil {
		t.Fatal(err)
	}
	rep := &ctoharness.Report{Blockers: []ctoharness.Blocker{}}
	sink := runsink.New("run-1", "n", dir, tr, rep, time.Now, nil)
	return New(sink, Input{Spec: spec, Profile: profile.Policy{Name: "default"}, Getenv: func(string) string { return "" },
		Clock: time.Now, Hooks: Hooks{
			ToolEnv:     func(_ egress.Command, env []string) []string { return env },
			NetEnv:      func(egress.Command) []string { return []string{"NET=1"} },
			NetAllowed:  func(egress.Command) func(string) bool { return nil },
			Unreachable: func(egress.Command) []egress.Unreachable { return nil },
			Hidden: Hidden{Again: func(ctx context.Context, h *ctoharness.HiddenTests) (Tests, error) {
				s, err := hidden.Again(ctx, h)
				return hiddenFiles(s), err
			}, MakeDirs: hidden.MakeDirs},
			Results: Results{Clear: results.Clear, Read: results.Read, Flaky: results.Flaky, Grade: results.Grade,
				FlakyListed: results.FlakyListed, GradingVerdict: results.GradingVerdict, Verdict: results.Verdict},
		}})
}

type hiddenFiles hidden.Set

func (s hiddenFiles) Lay(ctx context.Context, checkout string) ([]string, error) {
	return hidden.Lay(ctx, hidden.Set(s), checkout)
}
func (s hiddenFiles) WriteArchive(w io.Writer) error { return hidden.WriteArchive(w, hidden.Set(s)) }

func tests(outcomes ...string) []testresults.Result {
	var out []testresults.Result
	for i := 0; i+1 < len(outcomes); i += 2 {
		out = append(out, testresults.Result{ID: outcomes[i], Outcome: testresults.Outcome(outcomes[i+1])})
	}
	return out
}

// readResults: the listed tests decide over the exit code, a listed test
// that flakes blocks, and without lists a report that shows nothing
// passing blocks a command that exited 0.
func TestReadResults(t *testing.T) {
	cases := []struct {
		name         string
		f2p          []string
		cls          ctoharness.TestClass
		runs         [][]testresults.Result
		sum          ctoharness.TestResultsSummary
		blocked      bool
		code         ctoharness.BlockerCode
		wantCls      ctoharness.TestClass
		reasonPrefix string
	}{
		{name: "no report", cls: ctoharness.TestPass, wantCls: ctoharness.TestPass},
		{name: "listed test holds", f2p: []string{"a"}, cls: ctoharness.TestPass, runs: [][]testresults.Result{tests("a", "pass")},
			sum: ctoharness.TestResultsSummary{Total: 1, Pass: 1}, blocked: true, wantCls: ctoharness.TestPass},
		{name: "listed test fails", f2p: []string{"a"}, cls: ctoharness.TestPass, runs: [][]testresults.Result{tests("a", "fail")},
			sum: ctoharness.TestResultsSummary{Total: 1, Fail: 1}, blocked: true, code: ctoharness.BlockTestsFailed, wantCls: ctoharness.TestFailure,
			reasonPrefix: "the listed tests do not hold"},
		{name: "lists decide over a failed command", f2p: []string{"a"}, cls: ctoharness.TestFailure,
			runs: [][]testresults.Result{tests("a", "pass", "b", "fail")}, sum: ctoharness.TestResultsSummary{Total: 2, Pass: 1, Fail: 1},
			blocked: true, wantCls: ctoharness.TestPass, reasonPrefix: "the command failed, and every listed test holds"},
		{name: "listed test flakes", f2p: []string{"a"}, cls: ctoharness.TestFlake,
			runs: [][]testresults.Result{tests("a", "fail"), tests("a", "pass")}, sum: ctoharness.TestResultsSummary{Total: 1, Pass: 1},
			blocked: true, code: ctoharness.BlockTestFlake, wantCls: ctoharness.TestFlake, reasonPrefix: "listed tests failed, then passed"},
		{name: "no lists, nothing ran", cls: ctoharness.TestPass, runs: [][]testresults.Result{nil}, sum: ctoharness.TestResultsSummary{},
			blocked: true, code: ctoharness.BlockTestNotRun, wantCls: ctoharness.TestNotRun, reasonPrefix: "the test report"},
		{name: "no lists, failed command", cls: ctoharness.TestFailure, runs: [][]testresults.Result{tests("b", "fail")},
			sum: ctoharness.TestResultsSummary{Total: 1, Fail: 1}, wantCls: ctoharness.TestFailure},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newVerifier(t, task.Spec{FailToPass: c.f2p})
			v.Report.Tests = ctoharness.TestsRecord{Classification: c.cls, Reason: "exit 1"}
			var reps []report
			for _, run := range c.runs {
				sum := c.sum
				sum.Path, sum.Format = "report.xml", "junit"
				reps = append(reps, report{file: testresults.File{Tests: run}, sum: sum})
			}
			ok, blocked := v.readResults(context.Background(), task.TestResults{Path: "report.xml"}, reps)
			if !ok || blocked != c.blocked {
				t.Fatalf("readResults = ok %v, blocked %v; want ok, blocked %v", ok, blocked, c.blocked)
			}
			var codes []ctoharness.BlockerCode
			for _, b := range v.Report.Blockers {
				codes = append(codes, b.Code)
			}
			if (c.code == "" && len(codes) > 0) || (c.code != "" && !slices.Equal(codes, []ctoharness.BlockerCode{c.code})) {
				t.Fatalf("blockers %v, want %q", codes, c.code)
			}
			if got := v.Report.Tests.Classification; got != c.wantCls {
				t.Fatalf("classification %s, want %s", got, c.wantCls)
			}
			if !strings.HasPrefix(v.Report.Tests.Reason, c.reasonPrefix) {
				t.Fatalf("reason %q, want it to start with %q", v.Report.Tests.Reason, c.reasonPrefix)
			}
			if len(c.runs) > 0 && v.Report.Tests.Results == nil {
				t.Fatal("the report's results summary is not set")
			}
		})
	}
}

// A readable report is kept as tests.json, checked against its schema.
func TestReadResultsWritesTestsJSON(t *testing.T) {
	v := newVerifier(t, task.Spec{})
	v.Report.Tests = ctoharness.TestsRecord{Classification: ctoharness.TestPass}
	file := testresults.File{SchemaVersion: testresults.FileVersion, RunID: "run-1", Format: testresults.JUnit, Path: "report.xml", Tests: tests("a", "pass")}
	sum := ctoharness.TestResultsSummary{Format: "junit", Path: "report.xml", Artifact: evidence.TestsJSON, Total: 1, Pass: 1, Failing: []string{}}
	if ok, blocked := v.readResults(context.Background(), task.TestResults{Path: "report.xml"}, []report{{file, sum}}); !ok || blocked {
		t.Fatalf("readResults = ok %v, blocked %v; blockers %v", ok, blocked, v.Report.Blockers)
	}
	if _, err := os.Stat(v.Dir.Path(evidence.TestsJSON)); err != nil {
		t.Fatalf("tests.json: %v", err)
	}
}

// errorLines names at most two distinct lines that say "error", stderr
// first, each cut at 200 characters.
func TestErrorLines(t *testing.T) {
	long := "error: " + strings.Repeat("x", 300)
	cases := []struct{ name, stderr, stdout, want string }{
		{"none", "all good\n", "fine", ""},
		{"stderr first", "npm error 404 Not Found\n", "Error: later", ": npm error 404 Not Found; Error: later"},
		{"two at most", "error a\nerror b\nerror c", "", ": error a; error b"},
		{"duplicates once", "error a\nerror a", "error a", ": error a"},
		{"cut long", long, "", ": " + long[:200] + "…"},
	}
	for _, c := range cases {
		if got := errorLines(c.stderr, c.stdout); got != c.want {
			t.Errorf("%s: errorLines = %q, want %q", c.name, got, c.want)
		}
	}
	if reasonSuffix("") != "" || reasonSuffix("timed out") != ": timed out" {
		t.Error("reasonSuffix: want \"\" for no reason and \": reason\" otherwise")
	}
}

// Env gives a verification command the checkout's scratch as its roots,
// cmd's network environment, and the layout's paths as the scanner reads
// them; unreachableSuffix says which allowed endpoints failed.
func TestEnvAndUnreachable(t *testing.T) {
	v := newVerifier(t, task.Spec{Layout: &task.Layout{Workdir: "/app", Links: map[string]string{"/logs": "logs"}}})
	v.in.Hooks.Unreachable = func(egress.Command) []egress.Unreachable {
		return []egress.Unreachable{{Endpoint: "proxy.golang.org:443", Reason: "no route to host"}}
	}
	env, pol := v.Env(egress.CommandVerify, "/w/checkout", "/w/scratch")
	if !slices.Contains(env, "NET=1") || !slices.Contains(env, "HOME=/w/scratch/home") {
		t.Fatalf("env %v lacks the network's and the scratch's entries", env)
	}
	if !slices.Contains(pol.Roots, "/w/scratch/tmp") || pol.Aliases["/app"] != "/w/checkout" || pol.Aliases["/logs"] != "/w/checkout/logs" {
		t.Fatalf("policy roots %v, aliases %v", pol.Roots, pol.Aliases)
	}
	if _, pol := v.Env(egress.CommandVerify, "", "/w/scratch"); pol.Aliases != nil {
		t.Fatalf("without a checkout the layout has no aliases: %v", pol.Aliases)
	}
	got := v.unreachableSuffix(egress.CommandSetup)
	if !strings.Contains(got, "proxy.golang.org:443 could not be reached from this machine (no route to host)") {
		t.Fatalf("unreachableSuffix = %q", got)
	}
}

// The hidden tests are laid over the checkout and archived; tests that
// changed since they were digested block the run as TASK_INVALID, and
// the layout's directories are made.
func TestLayHiddenAndLayout(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "hidden_test.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := hidden.Read(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, task.Spec{Layout: &task.Layout{Workdir: "/app", Links: map[string]string{"/logs": "var/logs"}}})
	v.Report.HiddenTests = set.Record()
	work := t.TempDir()
	if !v.layHidden(ctx, work) || !v.layLayout(ctx, work) {
		t.Fatalf("layHidden/layLayout failed: %v", v.Report.Blockers)
	}
	if _, err := os.Stat(filepath.Join(work, "hidden_test.go")); err != nil {
		t.Fatalf("the hidden test was not laid: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(work, "var", "logs")); err != nil || !fi.IsDir() {
		t.Fatalf("the layout's directory was not made: %v", err)
	}
	if v.Report.HiddenTests.Archive != evidence.HiddenTar {
		t.Fatalf("archive %q", v.Report.HiddenTests.Archive)
	}
	if _, err := os.Stat(v.Dir.Path(evidence.HiddenTar)); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(src, "hidden_test.go"), []byte("package y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v.layHidden(ctx, t.TempDir()) {
		t.Fatal("hidden tests changed since their digest were laid")
	}
	if len(v.Report.Blockers) != 1 || v.Report.Blockers[0].Code != ctoharness.BlockTaskInvalid {
		t.Fatalf("blockers %v, want one TASK_INVALID", v.Report.Blockers)
	}
	if v.Report.Tests.Classification != ctoharness.TestNotRun {
		t.Fatalf("tests %s, want not_run", v.Report.Tests.Classification)
	}
}
