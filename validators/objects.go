package validators

import (
	"encoding/json"
	"os"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/fixture"
)

// checkFixtureObjects holds the run's store to the report's proof of what
// of the source's object store reached Case: the base's closure under the
// recorded history, digested as recorded and as the baseline_committed
// event fixed before Case started, and nothing of the source beyond it
// (anything the copy let through would be in the store, which is made
// from the fixture's .git before Case runs).
func checkFixtureObjects(v *runView, c collector) {
	const chk = "fixture_objects"
	cm, fo := v.report.Commits, v.report.FixtureObjects
	if cm.BaselineCommit == "" {
		return // no fixture was made
	}
	if fo == nil {
		c.fail(chk, evidence.ReportJSON, "the run made a fixture (baseline %s) but records no proof of what of the source's objects reached Case", short(cm.BaselineCommit))
		return
	}
	var fixed struct {
		Digest string `json:"objects_digest"`
	}
	for _, e := range v.events {
		if e.Type == ctoharness.EvBaselineCommitted {
			_ = json.Unmarshal(e.Data, &fixed)
		}
	}
	if fixed.Digest != fo.Digest {
		c.fail(chk, evidence.EventsFile, "the fixture's objects digest %s in the report, %q in the baseline_committed event", fo.Digest, fixed.Digest)
	}
	if base := runBase(cm); fo.BaseCommit != base {
		c.fail(chk, evidence.ReportJSON, "the fixture was made from %s, the run's base is %s", fo.BaseCommit, base)
	}
	storeDir := v.path(evidence.StoreDir)
	if _, err := os.Stat(storeDir); err != nil {
		if v.report.Status == ctoharness.StatusPass {
			c.fail(chk, evidence.ReportJSON, "the store %s is missing: %v", storeDir, err)
		}
		return
	}
	if err := fixture.CheckStore(v.ctx, storeDir, cm.BaselineCommit, cm.ResultCommit, *fo); err != nil {
		c.fail(chk, evidence.StoreDir, "the store does not hold exactly the base's history and the result: %v", err)
	}
}

// runBase is the commit the run's fixture was made from: the report's
// base, or the source's HEAD for a run made before bases were recorded.
func runBase(cm ctoharness.Commits) string {
	if cm.BaseCommit != "" {
		return cm.BaseCommit
	}
	return cm.SourceHead
}

// runBaseTree is runBase's tree.
func runBaseTree(cm ctoharness.Commits) string {
	if cm.BaseTree != "" {
		return cm.BaseTree
	}
	return cm.SourceTree
}
