package ledger

import (
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// FromReport is a run's line, as of at, read from its report alone.
func FromReport(rep *ctoharness.Report, at time.Time) Entry {
	e := Entry{At: at.UTC(), RunID: rep.RunID, Stage: rep.Stage, Status: string(rep.Status), Outcome: string(rep.Outcome)}
	for _, b := range rep.Blockers {
		e.Blockers = append(e.Blockers, string(b.Code))
	}
	if t := rep.Trial; t != nil {
		e.TrialID, e.BatchID = t.TrialID, t.BatchID
	}
	if rep.CaseProcessStarted {
		e.Case = caseParty(rep)
	}
	if a := rep.Adversarial; a != nil {
		e.Adversary = adversaryParty(a)
	}
	return e
}

// adversaryParty is the adversary and what its meter counted: an agent's
// usage, or, for a command of the user's own, nothing the harness could
// meter.
func adversaryParty(a *ctoharness.AdversarialRecord) *Party {
	ag := a.Agent
	if ag == nil {
		return &Party{Agent: "command", CostSource: string(ctoharness.CostNotReported)}
	}
	return metered(ag.Name, ag.Model, ag.Usage)
}

// caseParty is who ran as Case and what its model meter counted.
func caseParty(rep *ctoharness.Report) *Party {
	a := rep.Agent
	if a == nil {
		if rep.CaseLane == ctoharness.LaneFake {
			zero := 0.0 // the fake Case asks no model
			return &Party{Agent: "fake", CostUSD: &zero, CostSource: "no_model"}
		}
		// A --case-cmd command: whatever it spent, the harness did not meter.
		return &Party{Agent: "command", CostSource: string(ctoharness.CostNotReported)}
	}
	return metered(a.Name, a.Model, a.Usage)
}

// metered is an agent's party as its model meter counted it (u nil: it
// never started, and nothing is known of its cost).
func metered(agent, model string, u *ctoharness.ModelUsage) *Party {
	p := &Party{Agent: agent, Model: model, CostSource: string(ctoharness.CostNotReported)}
	if u != nil {
		p.Requests, p.InputTokens, p.CacheReadTokens, p.CacheWriteTokens, p.OutputTokens = u.Requests, u.InputUncached, u.CacheRead, u.CacheWrite, u.Output
		p.CostUSD, p.CostSource = u.CostUSD, string(u.CostSource)
	}
	return p
}
