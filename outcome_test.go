package ctoharness

import "testing"

// Every code must be classed on purpose: the infra_failed fallback is for
// reports from a newer harness, not for a code someone forgot here.
func TestOutcomeTableComplete(t *testing.T) {
	for _, c := range AllBlockerCodes() {
		if _, ok := outcomeOf[c]; !ok {
			t.Errorf("blocker code %s has no outcome in outcomeOf", c)
		}
	}
	if len(outcomeOf) != len(AllBlockerCodes()) {
		t.Errorf("outcomeOf has %d codes, AllBlockerCodes %d", len(outcomeOf), len(AllBlockerCodes()))
	}
}

func TestOutcomeFor(t *testing.T) {
	bl := func(codes ...BlockerCode) []Blocker {
		var out []Blocker
		for _, c := range codes {
			out = append(out, Blocker{Code: c})
		}
		return out
	}
	for _, tc := range []struct {
		codes []BlockerCode
		want  Outcome
	}{
		{nil, OutcomePass},
		{[]BlockerCode{BlockTestsFailed}, OutcomeAgentFailed},
		{[]BlockerCode{BlockBudgetExceeded, BlockTestNotRun}, OutcomeAgentFailed},
		// The model's failure is the cause; the missing change its consequence.
		{[]BlockerCode{BlockModelAPIError, BlockAgentNoChange, BlockTestNotRun}, OutcomeModelFailed},
		{[]BlockerCode{BlockModelEndpointUnreachable}, OutcomeModelFailed},
		{[]BlockerCode{BlockCaseTimeout, BlockSandboxUnavailable}, OutcomeInfraFailed},
		{[]BlockerCode{BlockSourceDirty}, OutcomePolicyBlocked},
		{[]BlockerCode{BlockModelStalled, BlockSourceMutated}, OutcomePolicyBlocked},
		{[]BlockerCode{"SOME_FUTURE_CODE"}, OutcomeInfraFailed},
	} {
		if got := OutcomeFor(bl(tc.codes...)); got != tc.want {
			t.Errorf("OutcomeFor(%v) = %s, want %s", tc.codes, got, tc.want)
		}
	}
}
