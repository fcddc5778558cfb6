package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/step/workcopy"
)

// A full disk (or quota) must not leave the disk full: once a write of the
// run failed for lack of space, the partial fixture and Case's scratch
// directory (the bulk of what a run writes) are removed before the trace and
// the report are written, which frees room for them, and the
// ARTIFACT_WRITE_FAILED blocker says what was removed.

// freeSpace removes the fixture and the scratch directory of a run that hit
// a full disk (once) and records that in the ARTIFACT_WRITE_FAILED blocker.
func (r *run) freeSpace() {
	if !r.DiskFull() || r.freed {
		return
	}
	r.freed = true
	var removed, failed []string
	verifyDir, _ := r.roots(true)
	// An overlay fixture is unmounted by now; its layer, which holds what
	// Case wrote, is in the workspace (package workcopy).
	fixture := r.Dir.Path(evidence.FixtureDir)
	for _, p := range []string{fixture, workcopy.Layer(r.Report.RuntimeWorkspaceRoot), r.scratch, filepath.Dir(verifyDir)} {
		if p == "" || !fileExists(p) {
			continue
		}
		r.Trace.Trace(ctoharness.TraceRemove, p)
		if err := os.RemoveAll(p); err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		removed = append(removed, p)
	}
	note := "the disk is full"
	if len(removed) > 0 {
		note += "; removed the partial fixture and scratch to free the space: " + strings.Join(removed, ", ")
	}
	if len(failed) > 0 {
		note += "; could not remove " + strings.Join(failed, ", ")
	}
	for i, b := range r.Report.Blockers {
		if b.Code == ctoharness.BlockArtifactWriteFailed {
			r.Report.Blockers[i].Message = b.Message + " (" + note + ")"
			return
		}
	}
}
