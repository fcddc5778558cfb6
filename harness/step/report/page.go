package report

import (
	"fmt"
	"html"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
	"github.com/cto-harness/cto-harness/harness/runsink"
)

// page renders report.html from the report and the artifacts already
// written. Every artifact it reads is final by now. A page that cannot be
// rendered is an evidence failure like any other: the run is blocked and a
// plain page says why.
func renderPage(s *runsink.Sink) []byte {
	p, err := htmlreport.RenderReport(s.Report, s.Dir.Root())
	if err == nil {
		return p
	}
	s.BlockWrite(err, ctoharness.StepReport)
	unqualified(s.Report)
	return []byte(fmt.Sprintf("<!DOCTYPE html><meta charset=\"utf-8\"><title>%s</title><p>The run page could not be rendered: %s. report.json and report.md hold the run.</p>\n",
		html.EscapeString(s.Report.RunID), html.EscapeString(err.Error())))
}
