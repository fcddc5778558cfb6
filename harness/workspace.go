package harness

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cto-harness/cto-harness/harness/evidence"
)

// leaveWork deals with the run's workspace (RUNS_DIR/work/<id>: Case's
// scratch, an agent's caches and session files among them, and the
// verification checkout) and the fixture copy (RUN_DIR/fixture)
// once the evidence is written: removed, unless the operator asked to keep
// it, and then scrubbed of the agent's key, which session files hold in
// plain text whenever a tool printed it. The evidence never needs the
// workspace: the store in the run directory holds the result.
func (r *run) leaveWork() {
	// The fixture copy lives in the run directory (fixture/), outside the
	// artifacts; it goes with the workspace (when the copy never made it,
	// there is nothing there).
	for _, root := range []string{r.Report.RuntimeWorkspaceRoot, r.Dir.Path(evidence.FixtureDir)} {
		if root == "" {
			continue
		}
		if !r.o.KeepWork {
			_ = RemoveTree(root)
			continue
		}
		r.agent.Scrub(root) // Case's world: opened beneath root, never through a link
	}
}

// RemoveTree removes p and everything under it, also trees with read-only
// directories (a Go module cache is made read-only by go itself).
func RemoveTree(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
