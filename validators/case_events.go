package validators

import (
	"encoding/json"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// checkCaseEvents holds the Case events in the log to the adapter contract:
// each one's fields typed as the Case event schema says (the harness refuses
// any other, so one in the log was put there afterwards), and the grammar
// (one case.started first, one case.finished last). A run whose Case broke
// the grammar must say so with CASE_EVENT_ORDER, and can never pass.
func checkCaseEvents(v *runView, c collector) {
	const chk = "case_event_grammar"
	var g backend.Grammar
	n := 0
	for _, e := range v.events {
		if !strings.HasPrefix(string(e.Type), "case.") {
			continue
		}
		n++
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(e.Data, &fields); err != nil || fields == nil {
			c.fail(chk, evidence.EventsFile, "Case event %s (seq %d) has no object data", e.Type, e.Seq)
			continue
		}
		fields["type"], _ = json.Marshal(e.Type)
		line, _ := json.Marshal(fields)
		if err := v.set.Validate(schemas.CaseEvent, line); err != nil {
			c.fail(chk, evidence.EventsFile, "Case event %s (seq %d) does not match the Case event schema: %v", e.Type, e.Seq, err)
		}
		g.Next(e.Type)
	}
	if n == 0 {
		return
	}
	bad := g.Violations()
	if len(bad) == 0 {
		return
	}
	if v.report.Status == ctoharness.StatusPass {
		c.fail(chk, evidence.EventsFile, "a passing run's Case events break the required order: %s", strings.Join(bad, "; "))
	}
	if !v.hasBlocker(ctoharness.BlockCaseEventOrder) {
		c.fail(chk, evidence.ReportJSON, "the Case events break the required order (%s) but the report has no %s blocker",
			strings.Join(bad, "; "), ctoharness.BlockCaseEventOrder)
	}
}
