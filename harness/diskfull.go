package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
)

// A full disk (or quota) must not leave the disk full: once a write of the
// run failed for lack of space, the partial fixture and Case's scratch
// directory (the bulk of what a run writes) are removed before the trace and
// the report are written, which frees room for them, and the
// ARTIFACT_WRITE_FAILED blocker says what was removed.

// noSpace reports whether err says the filesystem is full. Some layers keep
// only the message of the system error, so the message counts too.
func noSpace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// noteNoSpace marks the run as having hit a full disk; it always carries
// ARTIFACT_WRITE_FAILED then, whichever step noticed.
func (r *run) noteNoSpace(err error, step ctoharness.Step) {
	if !noSpace(err) {
		return
	}
	r.diskFull = true
	r.blockWrite(err, step)
}

// freeSpace removes the fixture and the scratch directory of a run that hit
// a full disk (once) and records that in the ARTIFACT_WRITE_FAILED blocker.
func (r *run) freeSpace() {
	if !r.diskFull || r.freed {
		return
	}
	r.freed = true
	var removed, failed []string
	verifyDir, _ := r.roots(true)
	// An overlay fixture is unmounted by now; its layer, which holds what
	// Case wrote, is in the workspace.
	for _, p := range []string{r.fixture, r.fixtureLayer(), r.scratch, filepath.Dir(verifyDir)} {
		if p == "" || !fileExists(p) {
			continue
		}
		r.tr.Trace(ctoharness.TraceRemove, p)
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
	for i, b := range r.rep.Blockers {
		if b.Code == ctoharness.BlockArtifactWriteFailed {
			r.rep.Blockers[i].Message = b.Message + " (" + note + ")"
			return
		}
	}
}
