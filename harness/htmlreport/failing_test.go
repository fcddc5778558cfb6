package htmlreport_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
)

// failedReport is a run blocked by failing tests, of a named repository at
// a base commit.
func failedReport(tests ctoharness.TestsRecord) map[string]any {
	rep := baseReport(ctoharness.StatusBlocked,
		[]ctoharness.Blocker{{Code: ctoharness.BlockTestsFailed, Step: ctoharness.StepVerify, Message: "the tests failed"}}, nil)
	rep["source_path"] = "/home/dev/src/greeter"
	rep["commits"] = map[string]any{"source_head": strings.Repeat("a", 40), "source_tree": "t", "base_commit": "0123456789abcdef0123456789abcdef01234567",
		"base_tree": "t", "baseline_commit": "b", "baseline_tree": "t", "result_commit": "r", "result_tree": "t"}
	raw, _ := json.Marshal(tests)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	rep["tests"] = m
	return rep
}

func render(t *testing.T, rep map[string]any, files map[string]string) string {
	t.Helper()
	raw, dir := writeRun(t, rep, files)
	page, err := htmlreport.Render(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	return string(page)
}

func wantIn(t *testing.T, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

// before says a appears on the page, and before b.
func before(t *testing.T, page, a, b string) {
	t.Helper()
	i, j := strings.Index(page, a), strings.Index(page, b)
	if i < 0 || j < 0 || i > j {
		t.Errorf("%q (at %d) is not above %q (at %d)", a, i, b, j)
	}
}

// A run with a test report: the header names the repository and the base
// commit, the counts are the report's tests, and the failing tests with the
// start of their output come right under the verdict.
func TestRenderShowsFailingTestsUnderTheVerdict(t *testing.T) {
	var long []string
	for i := 1; i <= 30; i++ {
		long = append(long, fmt.Sprintf("greet_test.go:%d: line %d of the failure", i, i))
	}
	tests := map[string]any{"schema_version": "1", "run_id": "r", "format": "go-test-json", "path": "out.json", "tests": []any{
		map[string]any{"id": "ex/TestA", "outcome": "pass", "duration_ms": 1},
		map[string]any{"id": "ex/TestGreeting", "outcome": "fail", "duration_ms": 1, "output": strings.Join(long, "\n")},
		map[string]any{"id": "ex/TestPanics", "outcome": "error", "duration_ms": 1, "output": "panic: " + hostile},
	}}
	data, _ := json.Marshal(tests)
	code := 1
	rep := failedReport(ctoharness.TestsRecord{Command: "go test -json ./... > out.json", Classification: ctoharness.TestFailure, ExitCode: &code,
		LogPath: "test.log", Counts: &ctoharness.TestCounts{Passed: 1}, CountsFormat: "go-test-json-packages",
		Results: &ctoharness.TestResultsSummary{Format: "go-test-json", Path: "out.json", Artifact: "tests.json", Total: 3, Pass: 1, Fail: 1, Error: 1,
			Failing: []string{"ex/TestGreeting", "ex/TestPanics"}}})
	page := render(t, rep, map[string]string{"tests.json": string(data), "test.log": "lots of output\n"})
	wantIn(t, page,
		`of <span class="mono">/home/dev/src/greeter</span> at base commit <code title="0123456789abcdef0123456789abcdef01234567">0123456789ab</code>`,
		"3 tests: 1 passed, 1 failed, 1 errored, 0 skipped (per test, from the test report out.json)",
		"Failing tests (2, from tests.json)", "ex/TestGreeting", "line 12 of the failure", "(output clipped)",
		"ex/TestPanics", "panic: &lt;script&gt;")
	if strings.Contains(page, "line 13 of the failure") {
		t.Error("a failing test's output is not clipped to its first lines")
	}
	if strings.Contains(page, "1 passed, 0 failed, 0 skipped") {
		t.Error("the output's package counts are shown beside the test report's")
	}
	before(t, page, `id="status"`, `id="failing"`)
	before(t, page, `id="failing"`, `class="factsbox"`)
}

// Past the cap, the failing tests are counted, not listed.
func TestRenderCountsFailingTestsPastTheCap(t *testing.T) {
	var list []any
	for i := range 25 {
		list = append(list, map[string]any{"id": fmt.Sprintf("T%02d", i), "outcome": "fail", "duration_ms": 0, "output": "boom"})
	}
	data, _ := json.Marshal(map[string]any{"schema_version": "1", "run_id": "r", "format": "tap", "path": "t.tap", "tests": list})
	rep := failedReport(ctoharness.TestsRecord{Classification: ctoharness.TestFailure, LogPath: "test.log",
		Results: &ctoharness.TestResultsSummary{Format: "tap", Path: "t.tap", Artifact: "tests.json", Total: 25, Fail: 25}})
	page := render(t, rep, map[string]string{"tests.json": string(data)})
	wantIn(t, page, "Failing tests (10 of 25, from tests.json)", "T09", "and 15 more failing tests")
	if strings.Contains(page, "<code class=\"test-id\">T10</code>") {
		t.Error("an eleventh failing test is listed under the verdict")
	}
}

// Without a test report, go test's own FAIL blocks are found in test.log
// (after the verdict line without -v, before it with -v), and the counts
// say they are packages.
func TestRenderFindsGoFailuresInTheLog(t *testing.T) {
	code := 1
	for _, c := range []struct{ name, log string }{
		{"plain", "--- FAIL: TestGreeting (0.00s)\n    greet_test.go:9: got hi, want hello\nFAIL\nFAIL\texample.com/greet\t0.002s\nFAIL\n"},
		{"verbose", "=== RUN   TestOK\n--- PASS: TestOK (0.00s)\n=== RUN   TestGreeting\n    greet_test.go:9: got hi, want hello\n--- FAIL: TestGreeting (0.00s)\nFAIL\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := failedReport(ctoharness.TestsRecord{Command: "go test ./...", Classification: ctoharness.TestFailure, ExitCode: &code, LogPath: "test.log",
				Counts: &ctoharness.TestCounts{Failed: 1}, CountsFormat: "go-test-packages"})
			page := render(t, rep, map[string]string{"test.log": strings.Repeat("noise\n", 500) + c.log})
			wantIn(t, page, "Failing tests (1, from test.log)", `<code class="test-id">TestGreeting</code>`, "greet_test.go:9: got hi, want hello",
				"0 passed, 1 failed, 0 skipped (Go packages, not tests, counted from the output as go-test-packages)")
			before(t, page, `id="failing"`, `class="factsbox"`)
		})
	}
}

// A failing command whose log names no test: its last lines are shown.
func TestRenderShowsTheLogsEndWhenNoTestIsNamed(t *testing.T) {
	code := 2
	rep := failedReport(ctoharness.TestsRecord{Command: "sh check.sh", Classification: ctoharness.TestFailure, ExitCode: &code, LogPath: "test.log"})
	var log strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&log, "check line %d\n", i)
	}
	page := render(t, rep, map[string]string{"test.log": log.String()})
	wantIn(t, page, "The end of test.log", "check line 26\ncheck line 27", "check line 40")
	before(t, page, `id="failing"`, `class="factsbox"`)
	if i := strings.Index(page, "check line 25\n"); i >= 0 && i < strings.Index(page, `class="factsbox"`) {
		t.Error("more than the log's last lines are shown under the verdict")
	}
	// A passing run shows no failing section.
	pass := render(t, baseReport(ctoharness.StatusPass, nil, nil), map[string]string{"test.log": "ok\n"})
	if strings.Contains(pass, `id="failing"`) {
		t.Error("a passing run shows failing tests")
	}
}

// The agent's stream is linked only when the run directory holds it; a run
// blocked before the agent wrote anything names it without a link.
func TestRenderLinksTheAgentStreamOnlyWhenPresent(t *testing.T) {
	rep := baseReport(ctoharness.StatusBlocked, []ctoharness.Blocker{{Code: ctoharness.BlockDisallowedChange, Step: ctoharness.StepCollect, Message: "x"}}, nil)
	rep["agent"] = map[string]any{"name": "qwen-code", "model": "m1", "stream_path": "backend/agent.stream.jsonl"}
	absent := render(t, rep, nil)
	wantIn(t, absent, "it left no stream (backend/agent.stream.jsonl is not in the run directory)")
	if strings.Contains(absent, `href="backend/agent.stream.jsonl"`) {
		t.Error("the page links to a stream the run directory does not hold")
	}
	present := render(t, rep, map[string]string{"backend/agent.stream.jsonl": "{}\n"})
	wantIn(t, present, `its whole stream is in <a href="backend/agent.stream.jsonl">`)

	// A stream path out of the run directory is never linked.
	rep["agent"].(map[string]any)["stream_path"] = "../elsewhere.jsonl"
	if out := render(t, rep, map[string]string{"backend/agent.stream.jsonl": "{}\n"}); strings.Contains(out, `href="../elsewhere.jsonl"`) {
		t.Error("the page links outside the run directory")
	}
}
