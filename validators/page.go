package validators

import (
	"bytes"
	"os"

	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
)

// checkReportPage renders report.html again from report.json and the other
// artifacts and requires the same bytes: the page a person reads says exactly
// what the evidence says.
func checkReportPage(v *runView, c collector) {
	const chk = "report_page"
	have, err := os.ReadFile(v.path(evidence.ReportHTML))
	if err != nil {
		return // artifacts_present reports the missing page
	}
	want, err := htmlreport.Render(v.reportRaw, v.dir)
	if err != nil {
		c.fail(chk, evidence.ReportHTML, "cannot be rendered again from the evidence: %v", err)
		return
	}
	if !bytes.Equal(have, want) {
		c.fail(chk, evidence.ReportHTML, "differs from the page rendered from report.json and the run's artifacts (%d bytes on disk, %d rendered); it was changed after the run, or an artifact it shows was", len(have), len(want))
	}
}
