package batch

import (
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

// A trial's last attempt that was flaky, or that the adversary failed, is
// counted apart: a batch can tell a flaky task, or an agent whose passes
// the adversary rejects, from a plain failure.
func TestTotalsCountFlakyAndRejectedApart(t *testing.T) {
	var c cellAcc
	tr := Trial{Agent: Agent{Name: "fake"}}
	for _, codes := range [][]string{
		{string(ctoharness.BlockTestFlake)},
		{string(ctoharness.BlockAdversarialFailed)},
		{string(ctoharness.BlockTestsFailed)},
		{},
	} {
		o := OutcomeAgentFailed
		if len(codes) == 0 {
			o = OutcomePass
		}
		c.add(tr, TrialRecord{Attempts: []Attempt{{Outcome: o, Blockers: codes}}}, true)
	}
	got := c.totals()
	if got.Flaky != 1 || got.AdversaryRejected != 1 || got.Outcomes.AgentFailed != 3 || got.Passes != 1 {
		t.Errorf("totals %+v", got)
	}
}
