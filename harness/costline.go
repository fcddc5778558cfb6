package harness

import (
	"fmt"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/ledger"
)

// appendCost appends the run's line to the runs directory's cost ledger
// (package ledger): who ran as Case and as adversary, what the model
// meter counted, and the verdict the report is written with. A line that
// cannot be appended blocks the run: a ledger that misses runs would
// understate what they cost.
func (r *run) appendCost() {
	if err := ledger.Append(r.o.RunsDir, costEntry(r.rep, r.o.Clock())); err != nil {
		r.blockWrite(fmt.Errorf("the run's line could not be appended to the cost ledger: %w; check that %s is writable", err, ledger.Path(r.o.RunsDir)), ctoharness.StepReport)
	}
}

// costEntry is rep's ledger line, as of at.
func costEntry(rep *ctoharness.Report, at time.Time) ledger.Entry {
	e := ledger.Entry{At: at.UTC(), RunID: rep.RunID, Stage: rep.Stage, Status: string(rep.Status), Outcome: string(rep.Outcome)}
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
func adversaryParty(a *ctoharness.AdversarialRecord) *ledger.Party {
	ag := a.Agent
	if ag == nil {
		return &ledger.Party{Agent: "command", CostSource: string(ctoharness.CostNotReported)}
	}
	return metered(ag.Name, ag.Model, ag.Usage)
}

// caseParty is who ran as Case and what its model meter counted.
func caseParty(rep *ctoharness.Report) *ledger.Party {
	a := rep.Agent
	if a == nil {
		if rep.CaseLane == ctoharness.LaneFake {
			zero := 0.0 // the fake Case asks no model
			return &ledger.Party{Agent: "fake", CostUSD: &zero, CostSource: "no_model"}
		}
		// A --case-cmd command: whatever it spent, the harness did not meter.
		return &ledger.Party{Agent: "command", CostSource: string(ctoharness.CostNotReported)}
	}
	return metered(a.Name, a.Model, a.Usage)
}

// metered is an agent's party as its model meter counted it (u nil: it
// never started, and nothing is known of its cost).
func metered(agent, model string, u *ctoharness.ModelUsage) *ledger.Party {
	p := &ledger.Party{Agent: agent, Model: model, CostSource: string(ctoharness.CostNotReported)}
	if u != nil {
		p.Requests, p.InputTokens, p.CacheReadTokens, p.CacheWriteTokens, p.OutputTokens = u.Requests, u.InputUncached, u.CacheRead, u.CacheWrite, u.Output
		p.CostUSD, p.CostSource = u.CostUSD, string(u.CostSource)
	}
	return p
}
