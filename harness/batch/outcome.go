package batch

import (
	"encoding/json"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Outcome is what a trial's run came to, for counting and for retries.
type Outcome string

// Outcome classes. Only InfraFailed and ModelFailed are retried: the others
// are results about the agent (or the policy it ran into), and a retry would
// only fish for a better number.
const (
	OutcomePass          Outcome = "pass"
	OutcomeAgentFailed   Outcome = "agent_failed"
	OutcomeModelFailed   Outcome = "model_failed"
	OutcomeInfraFailed   Outcome = "infra_failed"
	OutcomePolicyBlocked Outcome = "policy_blocked"
	// OutcomeTaskInvalid is a run its task could not judge (TASK_INVALID:
	// a fail-to-pass test that passes on the baseline, unusable hidden
	// tests): about the task, not the agent.
	OutcomeTaskInvalid Outcome = "task_invalid"
)

// AllOutcomes lists every class, in the order summaries show them.
func AllOutcomes() []Outcome {
	return []Outcome{OutcomePass, OutcomeAgentFailed, OutcomeModelFailed, OutcomeInfraFailed, OutcomePolicyBlocked, OutcomeTaskInvalid}
}

// Retryable says whether a trial with this outcome gets another attempt.
func (o Outcome) Retryable() bool { return o == OutcomeInfraFailed || o == OutcomeModelFailed }

// Scored says whether a final trial with this outcome counts in pass rates
// and pass@k. infra_failed and model_failed say that the machine or the
// model provider failed, not the agent, and task_invalid that the task
// could not judge: such a trial is unscored (left out of the denominator,
// and counted as such), as in Inspect.
func (o Outcome) Scored() bool {
	return o == OutcomePass || o == OutcomeAgentFailed || o == OutcomePolicyBlocked
}

func (o Outcome) known() bool {
	for _, k := range AllOutcomes() {
		if o == k {
			return true
		}
	}
	return false
}

// OutcomeOf classifies a run from its report.json bytes: the report's own
// "outcome" field when it has one, else the fallback table over its status
// and blocker codes. A report that does not decode, or names an outcome this
// version does not know, is infra_failed: the run's result cannot be read,
// which says nothing about the agent.
func OutcomeOf(reportJSON []byte) (Outcome, string) {
	var r struct {
		Outcome *string `json:"outcome"`
		ctoharness.Report
	}
	if err := json.Unmarshal(reportJSON, &r); err != nil {
		return OutcomeInfraFailed, "report.json does not decode: " + err.Error()
	}
	o, src := FallbackOutcome(r.Status, r.Blockers), "classified from status and blocker codes (fallback table)"
	if r.Outcome != nil {
		if o = Outcome(*r.Outcome); !o.known() || o == OutcomeTaskInvalid {
			return OutcomeInfraFailed, "report.json names an unknown outcome " + *r.Outcome
		}
		src = "from report.json"
	}
	if o == OutcomePolicyBlocked {
		for _, b := range r.Blockers {
			if b.Code == ctoharness.BlockTaskInvalid {
				return OutcomeTaskInvalid, "the task could not judge the run (TASK_INVALID)"
			}
		}
	}
	return o, src
}

// fallbackTable is the FALLBACK classification, used only for a report that
// has no outcome field (reports from harness versions before it). Codes not
// listed are policy_blocked: a precondition or rule refused the run.
var fallbackTable = map[ctoharness.BlockerCode]Outcome{
	// The agent ran and did not get there.
	ctoharness.BlockCaseExitNonZero:      OutcomeAgentFailed,
	ctoharness.BlockTestsFailed:          OutcomeAgentFailed,
	ctoharness.BlockTestTimeout:          OutcomeAgentFailed,
	ctoharness.BlockTestFlake:            OutcomeAgentFailed,
	ctoharness.BlockCaseTimeout:          OutcomeAgentFailed,
	ctoharness.BlockAgentNoChange:        OutcomeAgentFailed,
	ctoharness.BlockMissingRequiredEvent: OutcomeAgentFailed,
	ctoharness.BlockCaseEventMalformed:   OutcomeAgentFailed,
	ctoharness.BlockCaseEventOrder:       OutcomeAgentFailed,
	ctoharness.BlockTestNotRun:           OutcomeAgentFailed,
	// The model endpoint failed the agent.
	ctoharness.BlockAgentModelError: OutcomeModelFailed,
	// The machine failed the run.
	ctoharness.BlockArtifactWriteFailed:   OutcomeInfraFailed,
	ctoharness.BlockInternal:              OutcomeInfraFailed,
	ctoharness.BlockSandboxUnavailable:    OutcomeInfraFailed,
	ctoharness.BlockCopyFailed:            OutcomeInfraFailed,
	ctoharness.BlockCheckoutFailed:        OutcomeInfraFailed,
	ctoharness.BlockCaseStartFailed:       OutcomeInfraFailed,
	ctoharness.BlockCollectFailed:         OutcomeInfraFailed,
	ctoharness.BlockInterrupted:           OutcomeInfraFailed,
	ctoharness.BlockSetupFailed:           OutcomeInfraFailed,
	ctoharness.BlockAgentNotInstalled:     OutcomeInfraFailed,
	ctoharness.BlockGovernanceUnavailable: OutcomeInfraFailed,
}

// FallbackOutcome is the fallback table applied to a status and blockers.
// With several blockers the first class in the order infra, model, policy,
// agent wins: a run the machine broke says nothing about the agent.
func FallbackOutcome(status ctoharness.Status, blockers []ctoharness.Blocker) Outcome {
	if status == ctoharness.StatusPass && len(blockers) == 0 {
		return OutcomePass
	}
	if len(blockers) == 0 {
		return OutcomeInfraFailed // not a pass and no reason given: unknown state
	}
	rank := map[Outcome]int{OutcomeInfraFailed: 0, OutcomeModelFailed: 1, OutcomePolicyBlocked: 2, OutcomeAgentFailed: 3}
	best := OutcomeAgentFailed
	for _, b := range blockers {
		o, ok := fallbackTable[b.Code]
		if !ok {
			o = OutcomePolicyBlocked
		}
		if rank[o] < rank[best] {
			best = o
		}
	}
	return best
}
