package validators

import (
	"os"
	"path/filepath"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// checkSpaceGivenBack: a row that fills the disk must leave no partial
// fixture behind, and its report must say it was removed.
func checkSpaceGivenBack(row fixtures.Row, rep *ctoharness.Report, res *RowResult) {
	if !strings.HasPrefix(row.Setup.Fault, harness.FaultDiskFullPrefix) {
		return
	}
	if _, err := os.Lstat(filepath.Join(rep.RunArtifactDir, evidence.FixtureDir)); err == nil {
		res.fail("the partial fixture was left behind after a full disk")
	}
	for _, b := range rep.Blockers {
		if b.Code == ctoharness.BlockArtifactWriteFailed && strings.Contains(b.Message, "removed the partial fixture") {
			return
		}
	}
	res.fail("the report does not say the partial fixture was removed")
}
