package ledger

import (
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// The ledger line says who ran as Case and what the meter counted: an
// agent's usage and cost as measured (an unknown cost stays unknown), the
// fake Case's nothing, a command's unmetered spend, and the trial it ran
// for.
func TestCostEntry(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.FixedZone("x", 3600))
	cost := 0.25
	rep := &ctoharness.Report{RunID: "r1", Stage: 3, Status: ctoharness.StatusFailed, Outcome: ctoharness.OutcomeAgentFailed, CaseProcessStarted: true,
		CaseLane: ctoharness.LaneReal, Blockers: []ctoharness.Blocker{{Code: ctoharness.BlockTestsFailed}},
		Trial: &ctoharness.TrialBinding{TrialID: "t1", BatchID: "b1"},
		Agent: &ctoharness.AgentRecord{Name: "qwen-code", Model: "qwen3-coder", Usage: &ctoharness.ModelUsage{Requests: 3, InputUncached: 100, CacheRead: 20, CacheWrite: 5, Output: 40,
			CostUSD: &cost, CostSource: ctoharness.CostEstimated}}}
	e := FromReport(rep, at)
	if e.At != at.UTC() || e.RunID != "r1" || e.TrialID != "t1" || e.BatchID != "b1" || e.Status != "failed" || e.Outcome != "agent_failed" ||
		len(e.Blockers) != 1 || e.Blockers[0] != "TESTS_FAILED" {
		t.Fatalf("entry %+v", e)
	}
	c := e.Case
	if c == nil || c.Agent != "qwen-code" || c.Model != "qwen3-coder" || c.Requests != 3 || c.InputTokens != 100 || c.CacheReadTokens != 20 ||
		c.CacheWriteTokens != 5 || c.OutputTokens != 40 || c.CostUSD == nil || *c.CostUSD != 0.25 || c.CostSource != "estimated" {
		t.Fatalf("case %+v", c)
	}
	if e.Adversary != nil {
		t.Fatalf("no adversary ran, the entry has %+v", e.Adversary)
	}

	rep.Agent.Usage.CostUSD, rep.Agent.Usage.CostSource = nil, ctoharness.CostNotReported
	if c := FromReport(rep, at).Case; c.CostUSD != nil || c.CostSource != "not_reported" {
		t.Fatalf("an unknown cost became %+v", c)
	}
	rep.Agent = nil
	if c := FromReport(rep, at).Case; c.Agent != "command" || c.CostUSD != nil {
		t.Fatalf("a --case-cmd Case: %+v", c)
	}
	rep.CaseLane, rep.Adversarial = ctoharness.LaneFake, &ctoharness.AdversarialRecord{}
	e = FromReport(rep, at)
	if c := e.Case; c.Agent != "fake" || c.CostUSD == nil || *c.CostUSD != 0 {
		t.Fatalf("the fake Case: %+v", c)
	}
	if a := e.Adversary; a == nil || a.Agent != "command" || a.CostUSD != nil {
		t.Fatalf("the adversary: %+v", a)
	}
	rep.Adversarial.Agent = &ctoharness.AdversaryAgent{Name: "codex", Model: "gpt-x", Usage: &ctoharness.ModelUsage{Requests: 2, Output: 9, CostSource: ctoharness.CostNotReported}}
	if a := FromReport(rep, at).Adversary; a.Agent != "codex" || a.Model != "gpt-x" || a.Requests != 2 || a.OutputTokens != 9 || a.CostUSD != nil {
		t.Fatalf("the adversary agent: %+v", a)
	}
	rep.CaseProcessStarted = false
	if e := FromReport(rep, at); e.Case != nil {
		t.Fatalf("no Case ran, the entry has %+v", e.Case)
	}
}
