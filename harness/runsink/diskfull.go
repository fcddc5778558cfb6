package runsink

import (
	"fmt"
	"os"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// A full disk (or quota) must not leave the disk full: once a write of the
// run failed for lack of space, the bulk of what the run wrote outside its
// evidence (the partial fixture and its layer, Case's scratch, the
// verification checkouts) is removed before the after-proof, the trace and
// the report are written, which frees room for them, and the
// ARTIFACT_WRITE_FAILED blocker says what was removed.

// SetBulk names what FreeSpace may remove, asked for when it runs (the
// paths exist by then or are skipped).
func (s *Sink) SetBulk(paths func() []string) { s.bulk = paths }

// Freed says whether FreeSpace has removed the bulk.
func (s *Sink) Freed() bool { return s.freed }

// FreeSpace removes the bulk of a run that hit a full disk (once) and
// records that in the ARTIFACT_WRITE_FAILED blocker.
func (s *Sink) FreeSpace() {
	if !s.diskFull || s.freed || s.bulk == nil {
		return
	}
	s.freed = true
	var removed, failed []string
	for _, p := range s.bulk() {
		if p == "" {
			continue
		}
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		s.Trace.Trace(ctoharness.TraceRemove, p)
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
	for i, b := range s.Report.Blockers {
		if b.Code == ctoharness.BlockArtifactWriteFailed {
			s.Report.Blockers[i].Message = b.Message + " (" + note + ")"
			return
		}
	}
}
