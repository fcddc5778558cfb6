package backend

import (
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Grammar is the order the adapter contract gives Case's events: exactly one
// case.started, first; exactly one case.finished, last; nothing after it. A
// stream that breaks it is not trusted to describe what Case did. The
// validators apply the same grammar to the normalized event log.
type Grammar struct {
	n          int
	started    bool
	finished   bool
	violations []string
}

// maxViolations bounds what is kept for the blocker message.
const maxViolations = 5

// Next takes the next Case event type.
func (g *Grammar) Next(t ctoharness.EventType) {
	g.n++
	switch {
	case g.finished:
		g.violate("event %d (%s) comes after case.finished, which must be the last event", g.n, t)
	case t == ctoharness.EvCaseStarted && g.started:
		g.violate("event %d is a second case.started; it must appear once", g.n)
	case t != ctoharness.EvCaseStarted && !g.started:
		g.violate("event %d (%s) comes before case.started, which must be the first event", g.n, t)
	}
	switch t {
	case ctoharness.EvCaseStarted:
		g.started = true
	case ctoharness.EvCaseFinished:
		g.finished = true
	}
}

func (g *Grammar) violate(format string, a ...any) {
	if len(g.violations) < maxViolations {
		g.violations = append(g.violations, fmt.Sprintf(format, a...))
	}
}

// Violations lists the first few breaches of the order, empty when none.
func (g *Grammar) Violations() []string { return g.violations }
