package validators

import (
	"bytes"
	"encoding/json"
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
	fixture := filepath.Join(rep.RunArtifactDir, evidence.FixtureDir)
	if _, err := os.Lstat(fixture); err == nil {
		res.fail("the partial fixture was left behind after a full disk")
	}
	// The source after-proof is the evidence a full disk must not cost:
	// the fixture's room is given back before it is written.
	removed, proved := traceSeq(rep.RunArtifactDir, ctoharness.TraceRemove, fixture), traceSeq(rep.RunArtifactDir, ctoharness.TraceWrite, filepath.Join(rep.RunArtifactDir, filepath.FromSlash(evidence.SourceAfter)))
	if proved > 0 && (removed == 0 || removed > proved) {
		res.fail("the source after-proof was written (trace entry %d) before the partial fixture was removed (entry %d)", proved, removed)
	}
	for _, b := range rep.Blockers {
		if b.Code == ctoharness.BlockArtifactWriteFailed && strings.Contains(b.Message, "removed the partial fixture") {
			return
		}
	}
	res.fail("the report does not say the partial fixture was removed")
}

// traceSeq is the sequence number of the first trace entry of op on path
// in the run's trace.jsonl, 0 when there is none.
func traceSeq(runDir string, op ctoharness.TraceOp, path string) int {
	data, err := os.ReadFile(filepath.Join(runDir, evidence.TraceFile))
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var e ctoharness.TraceEntry
		if json.Unmarshal(line, &e) == nil && e.Op == op && e.Path == path {
			return e.Seq
		}
	}
	return 0
}
