package harness

import (
	"fmt"
	"html"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
)

// page renders report.html from the report and the artifacts already
// written. Every artifact it reads is final by now. A page that cannot be
// rendered is an evidence failure like any other: the run is blocked and a
// plain page says why.
func (r *run) page() []byte {
	p, err := htmlreport.RenderReport(r.Report, r.Dir.Root())
	if err == nil {
		return p
	}
	r.BlockWrite(err, ctoharness.StepReport)
	r.Report.Status = ctoharness.StatusFor(r.Report.Blockers)
	r.Report.Outcome = ctoharness.OutcomeFor(r.Report.Blockers)
	r.Report.Qualifies = false
	return []byte(fmt.Sprintf("<!DOCTYPE html><meta charset=\"utf-8\"><title>%s</title><p>The run page could not be rendered: %s. report.json and report.md hold the run.</p>\n",
		html.EscapeString(r.Report.RunID), html.EscapeString(err.Error())))
}
