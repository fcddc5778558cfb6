package batch_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/batch"
)

// pageSummary is a summary of three agents: one with a known cost and
// failures, one whose cost is unknown, one with no scored trial.
func pageSummary() batch.Summary {
	cost := 0.42
	return batch.Summary{SchemaVersion: batch.SummaryVersion, BatchID: "b-1", Name: "nightly", GeneratedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		MaxAttempts: 2, Trials: 22, Finished: 22, Complete: true,
		Agents: []batch.AgentTotal{
			{Agent: "good<script>", Totals: batch.Totals{Trials: 10, Finished: 10, Scored: 10, Passes: 8, CostUSD: &cost, CostBasis: "estimated"}, PassRate: 0.8,
				Failures: []batch.FailureCount{{Outcome: "agent_failed", Code: "TESTS_FAILED", Attempts: 2}, {Outcome: "agent_failed", Code: "TIMEOUT", Attempts: 1},
					{Outcome: "infra_failed", Attempts: 1}}},
			{Agent: "priceless", Totals: batch.Totals{Trials: 10, Finished: 10, Scored: 10, Passes: 5, CostBasis: "unknown"}, PassRate: 0.5},
			{Agent: "down", Totals: batch.Totals{Trials: 2, Finished: 2, CostBasis: "none"},
				Failures: []batch.FailureCount{{Outcome: "model_failed", Code: "AGENT_MODEL_ERROR", Attempts: 4}}},
		}}
}

func TestSummaryPageDrawsRatesCostAndFailures(t *testing.T) {
	s := pageSummary()
	page, err := batch.Page(s)
	if err != nil {
		t.Fatal(err)
	}
	p := string(page)
	if regexp.MustCompile(`(?i)<(script|img|iframe|link|object)\b`).MatchString(p) || regexp.MustCompile(`(?i)(src|href)\s*=\s*"?(https?:)?//`).MatchString(p) {
		t.Fatal("the page runs or loads something")
	}
	for _, want := range []string{
		"good&lt;script&gt;",
		"80%<svg class=\"bar\"", `<rect width="96.0" height="12"`, `x1="58.8" x2="113.2"`, "49%–94%", // 8/10: [0.490, 0.943]
		"50%<svg", "24%–76%", "no scored trial",
		`id="scatter"`, "cost in USD (all attempts)", "pass rate</text>", "good&lt;script&gt;: pass rate 80% (95% interval 49–94%) at $0.4200",
		"Not drawn: priceless (cost unknown), down (no scored trial).",
		`<td class="fail">agent failed</td><td><code>TESTS_FAILED</code> × 2, <code>TIMEOUT</code> × 1</td>`,
		`<td class="fail">infra failed</td><td><code>no blocker code</code> × 1</td>`,
		`<td>down</td><td class="fail">model failed</td><td><code>AGENT_MODEL_ERROR</code> × 4</td>`,
		"Not signed: no signing key was configured.",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(p, "<circle "); n != 1 {
		t.Errorf("%d points drawn, want 1 (one agent has a cost and a scored trial)", n)
	}
	s.SigningKeyID = "k-0123456789abcdef"
	signed, err := batch.Page(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(signed), "with key <code>k-0123456789abcdef</code>") {
		t.Error("a signed summary's page does not name its key")
	}
	s.Agents = nil
	empty, err := batch.Page(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(empty), `<p id="failures">No attempt failed.</p>`) {
		t.Error("a summary without failures does not say so")
	}
}
