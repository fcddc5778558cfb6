package batch_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// An attempt's tokens are what the harness's meter counted; the agent's
// own closing account is kept beside as its claim.
func TestDescribeReadsTheMeter(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "20260101T000000Z-s3-abcdef01")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	est := 3.9
	rep := ctoharness.Report{RunID: filepath.Base(dir), Agent: &ctoharness.AgentRecord{InputTokens: 3, OutputTokens: 1, ReportedCostUSD: 0.000002,
		Usage: &ctoharness.ModelUsage{InputUncached: 500000, CacheRead: 90000, CacheWrite: 10000, Output: 300000, CostUSD: &est, CostSource: ctoharness.CostEstimated}}}
	data, _ := json.Marshal(rep)
	if err := os.WriteFile(filepath.Join(dir, evidence.ReportJSON), data, 0o644); err != nil {
		t.Fatal(err)
	}
	a := batch.DescribeWith(context.Background(), dir, set, validators.RunOptions{})
	if a.InputTokens != 600000 || a.OutputTokens != 300000 {
		t.Errorf("metered tokens %d in / %d out, want 600000 / 300000", a.InputTokens, a.OutputTokens)
	}
	if a.ClaimedInputTokens != 3 || a.ClaimedOutputTokens != 1 || a.ReportedCost == nil || *a.ReportedCost != 0.000002 {
		t.Errorf("claims %d / %d, reported %v", a.ClaimedInputTokens, a.ClaimedOutputTokens, a.ReportedCost)
	}
	if a.MeteredCost == nil || *a.MeteredCost != est {
		t.Errorf("metered cost %v, want %v", a.MeteredCost, est)
	}
	// A report that is a link (to a FIFO, say) is not followed.
	link := filepath.Join(t.TempDir(), "20260101T000000Z-s3-abcdef02")
	if err := os.MkdirAll(link, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, evidence.ReportJSON), filepath.Join(link, evidence.ReportJSON)); err != nil {
		t.Fatal(err)
	}
	if a := batch.DescribeWith(context.Background(), link, set, validators.RunOptions{}); a.Outcome != batch.OutcomeInfraFailed || a.InputTokens != 0 {
		t.Errorf("a linked report was read: %+v", a)
	}
}

// Batch totals are the meter's, over every attempt, interrupted ones
// included; a cost the agent reports far below the metered tokens at the
// spec's price neither wins nor goes unnoticed.
func TestTotalsFromTheMeter(t *testing.T) {
	st, err := batch.OpenStore(t.TempDir(), "meter-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	tr := batch.Trial{ID: "t-00000000000000000001", BatchID: "meter-000000000000", Task: "task", Repeat: 1,
		Agent: batch.Agent{Name: "cheap", Kind: "qwen-code", Model: "m", Price: &batch.Price{InputPerMTok: 3, OutputPerMTok: 7}}}
	claim := 0.000002
	rec := batch.TrialRecord{Trial: tr, Refused: []batch.Refusal{},
		Attempts: []batch.Attempt{{ID: batch.AttemptID(tr.ID, 1), N: 1, Outcome: batch.OutcomePass, EvidenceValid: true, Blockers: []string{}, EvidenceErrors: []string{},
			InputTokens: 600000, OutputTokens: 300000, ClaimedInputTokens: 3, ClaimedOutputTokens: 1, ReportedCost: &claim, Nonce: "00112233445566778899aabbccddeeff"}},
		Interrupted: []batch.Attempt{{ID: batch.AttemptID(tr.ID, 1), N: 1, InputTokens: 300, OutputTokens: 60}}}
	if err := st.Save(rec); err != nil {
		t.Fatal(err)
	}
	plan := batch.Plan{BatchID: tr.BatchID, Name: "meter", MaxAttempts: 2, Trials: []batch.Trial{tr}}
	sum, err := batch.Summarize(plan, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ag := sum.Agents[0]
	if ag.InputTokens != 600300 || ag.OutputTokens != 300060 {
		t.Errorf("totals %d in / %d out, want the meter's 600300 / 300060", ag.InputTokens, ag.OutputTokens)
	}
	want := (600300*3.0 + 300060*7.0) / 1e6
	if ag.CostUSD == nil || math.Abs(*ag.CostUSD-want) > 1e-6 || ag.CostBasis != "estimated" {
		t.Errorf("cost %v (%s), want %v estimated from the metered tokens", ag.CostUSD, ag.CostBasis, want)
	}
	row := sum.TrialList[0]
	if !row.CostUnderReported || row.ClaimedCostUSD == nil || *row.ClaimedCostUSD != claim || row.RequestNonce != rec.Attempts[0].Nonce {
		t.Errorf("row %+v", row)
	}
	if row.InputTokens != 600300 {
		t.Errorf("row tokens %d", row.InputTokens)
	}
}

// stopsMidway is a runner whose attempt is interrupted after the model was
// paid for: the operator stops the batch while it runs.
type stopsMidway struct{ cancel context.CancelFunc }

func (s stopsMidway) RunTrial(ctx context.Context, t batch.Trial, n int) (batch.Attempt, error) {
	s.cancel()
	return batch.Attempt{InputTokens: 300, OutputTokens: 60, Outcome: batch.OutcomeInfraFailed}, nil
}

// An interrupted attempt is no attempt of the trial, but its metered spend
// is kept.
func TestInterruptedAttemptKeepsItsSpend(t *testing.T) {
	st, err := batch.OpenStore(t.TempDir(), "stop-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	tr := batch.Trial{ID: "t-00000000000000000002", BatchID: "stop-000000000000", Task: "task", Repeat: 1, Agent: batch.Agent{Name: "a"}}
	plan := batch.Plan{BatchID: tr.BatchID, Name: "stop", MaxAttempts: 2, Trials: []batch.Trial{tr}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := batch.Execute(ctx, plan, st, stopsMidway{cancel}, batch.Options{Concurrency: 1}); err == nil {
		t.Fatal("a stopped batch returned no error")
	}
	rec, err := st.Load(tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Attempts) != 0 || len(rec.Interrupted) != 1 || rec.Interrupted[0].InputTokens != 300 {
		t.Fatalf("record %+v", rec)
	}
	sum, _ := batch.Summarize(plan, st, time.Now())
	if sum.Agents[0].InputTokens != 300 || sum.Agents[0].OutputTokens != 60 {
		t.Errorf("totals %+v", sum.Agents[0].Totals)
	}
}
