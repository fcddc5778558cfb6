package workcopy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Collected is what the collect step made: the result's time (its tree and
// commit are in the report).
type Collected struct {
	At time.Time
}

// Collect turns what Case left in the fixture worktree into the result
// commit in the harness's store, and the patch.
func (c Copy) Collect(ctx context.Context, s *runsink.Sink) *Collected {
	s.SetStep(ctoharness.StepCollect)
	allowed := task.NewPathPolicy(c.in.Spec.AllowedPaths).Check
	if c.in.Allowed != nil {
		allowed = c.in.Allowed
	}
	col := &Collected{At: s.Clock()}
	baseline := s.Report.Commits.BaselineCommit
	upper, userXattr := c.layer()
	res, err := fixture.Collect(ctx, fixture.CollectInput{Root: c.Path, Store: c.Store, Baseline: baseline,
		When: col.At, Tracer: s.Trace, Allowed: allowed, Checkout: c.Conversions, Upper: upper, UserXattr: userXattr})
	s.Report.ChangedFiles = append([]ctoharness.ChangedFile{}, res.Changed...)
	// The patch is streamed from the store (capped, never whole in
	// memory); a failed collect has none, as it has no result commit.
	werr := s.Dir.WriteStream(ctx, evidence.PatchFile, func(w io.Writer) error {
		if err != nil {
			return nil
		}
		return fixture.WritePatch(ctx, w, c.Store, baseline, res.ResultCommit)
	})
	switch {
	case errors.Is(werr, evidence.ErrWrite):
		s.BlockWrite(werr, ctoharness.StepCollect)
	case werr != nil && err == nil:
		err = werr
	}
	if err != nil {
		s.BlockErr(err, ctoharness.StepCollect)
	}
	s.Report.Commits.ResultCommit = res.ResultCommit
	s.Report.Commits.ResultTree = res.ResultTree
	var bad []string
	for _, ch := range res.Changed {
		if !ch.Allowed {
			bad = append(bad, ch.Path+" ("+ch.Reason+")")
		}
	}
	s.Emit(ctx, ctoharness.EvChangesCollected, map[string]any{"changed": len(res.Changed), "disallowed": len(bad),
		"result_commit": res.ResultCommit, "patch": evidence.PatchFile})
	if len(bad) > 0 {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockDisallowedChange, Step: ctoharness.StepCollect,
			Message: "Case changed paths outside the allowed paths: " + listSome(bad) + "; see changed_files"})
	}
	if unsafe := UnsafeNames(res.Changed); len(unsafe) > 0 {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockUnsafeFileName, Step: ctoharness.StepCollect,
			Message: "Case left files whose names hold control, format or bidi characters (shown escaped): " + listSome(unsafe)})
	}
	return col
}

// layer is the overlay fixture's upper layer and where it keeps its
// marks; "" for a copied fixture, which is walked whole.
func (c Copy) layer() (upper string, userXattr bool) {
	if c.mount == nil {
		return "", false
	}
	return c.mount.Upper(), c.mount.UserXattr()
}

// listSome joins the first items of a list Case decides the length of, and
// says how many more there are: a blocker message stays short whatever
// Case did (the full list is in changed_files).
func listSome(items []string) string {
	const most = 20
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}

// UnsafeNames lists, escaped for display, the changed files whose names hold
// a character display.Hidden reports: no honest change needs one, so each
// blocks the run (UNSAFE_FILE_NAME) whatever the allowed paths say. Bytes
// that are not UTF-8 are not in this list: such names are stored exactly
// (path_b64) and shown escaped.
func UnsafeNames(changed []ctoharness.ChangedFile) []string {
	var out []string
	for _, c := range changed {
		name, ok := c.Name()
		if !ok {
			out = append(out, display.Terminal(c.Path))
			continue
		}
		for _, r := range name {
			if display.Hidden(r) {
				out = append(out, display.Terminal(name))
				break
			}
		}
	}
	return out
}
