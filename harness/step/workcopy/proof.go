package workcopy

import (
	"context"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/schemas"
)

// CleanStart proves the fixture clean after the baseline commit, before
// Case sees it; a run already blocked is not proven. An overlay of the
// base's snapshot is proven from its layer (fixture.StartProof).
func (c Copy) CleanStart(ctx context.Context, s *runsink.Sink) bool {
	if !s.OK() {
		return false
	}
	s.SetStep(ctoharness.StepCleanStart)
	var p ctoharness.FixtureProof
	var err error
	if upper, userXattr := c.layer(); upper != "" && c.snap != nil {
		// The snapshot's overlay is read from its layer, as the adoption
		// and the clean end read it: nothing else is the base's tree.
		p, err = fixture.StartProof(ctx, fixture.StartInput{RunID: s.RunID, Root: c.Path, ExpectedTree: s.Report.Commits.BaseTree,
			Upper: upper, UserXattr: userXattr, Checkout: c.Conversions, SymlinksOutside: c.linksOut, Now: s.Clock(), Tracer: s.Trace})
	} else {
		p, err = fixture.CleanProof(ctx, s.RunID, "clean_start", c.Path, s.Report.Commits.BaseTree, s.Clock(), s.Trace)
	}
	if err != nil {
		s.BlockErr(err, ctoharness.StepCleanStart)
		return false
	}
	if s.WriteJSON(ctx, evidence.CleanStart, schemas.FixtureProof, p, ctoharness.StepCleanStart) {
		s.Emit(ctx, ctoharness.EvFixtureCleanStart, map[string]any{"proof": evidence.CleanStart, "clean": p.Clean, "tree": p.Tree})
	}
	if !p.Clean {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockFixtureDirtyStart, Step: ctoharness.StepCleanStart,
			Message: "the copied fixture is not clean after the baseline commit: " + strings.Join(p.Problems, "; ")})
	}
	return s.OK()
}

// CleanEnd proves the fixture's end state. Once Case has worked in it (the
// collect ran: col is not nil), its .git is never read: the proof compares
// the worktree with the result in the store and the .git's lstat data with
// the snapshot taken before Case. An overlay fixture is proven from its
// upper layer, as it was collected. Before that, the fixture is still the
// harness's own and the start proof's reading applies.
func (c Copy) CleanEnd(ctx context.Context, s *runsink.Sink, col *Collected) {
	s.SetStep(ctoharness.StepCleanEnd)
	expected := s.Report.Commits.ResultTree
	if expected == "" {
		expected = s.Report.Commits.BaselineTree
	}
	var p ctoharness.FixtureProof
	var err error
	if s.Report.Commits.BaselineCommit == "" {
		// Without a baseline every copied file would read as untracked,
		// blaming on Case what the copy's own blocker already explains.
		why := "the fixture has no baseline commit (the copy failed), so there is nothing to compare it with"
		if len(s.Report.Blockers) > 0 {
			why = "the fixture has no baseline commit (the copy failed: " + string(s.Report.Blockers[0].Code) + "), so there is nothing to compare it with"
		}
		c.writeCleanEndNotTaken(ctx, s, why)
		return
	}
	if col != nil && c.Store != "" {
		upper, userXattr := c.layer()
		p, err = fixture.EndProof(ctx, fixture.EndInput{RunID: s.RunID, Root: c.Path, Store: c.Store, ExpectedTree: expected,
			GitBefore: c.GitBefore, AllowGitChanges: c.in.Spec.AllowsGitChanges(), Now: s.Clock(), Tracer: s.Trace,
			Upper: upper, UserXattr: userXattr, Checkout: c.Conversions, SymlinksOutside: c.linksOut})
	} else {
		p, err = fixture.CleanProof(ctx, s.RunID, "clean_end", c.Path, expected, s.Clock(), s.Trace)
	}
	if err != nil {
		s.BlockErr(err, ctoharness.StepCleanEnd)
		return
	}
	if s.WriteJSON(ctx, evidence.CleanEnd, schemas.FixtureProof, p, ctoharness.StepCleanEnd) {
		s.Emit(ctx, ctoharness.EvFixtureCleanEnd, map[string]any{"proof": evidence.CleanEnd, "clean": p.Clean, "tree": p.Tree,
			"git_changes": p.GitChangesTotal, "ignored": p.IgnoredTotal})
	}
	if !p.Clean {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockFixtureDirtyEnd, Step: ctoharness.StepCleanEnd,
			Message: "the fixture is not clean after the result commit: " + strings.Join(p.Problems, "; ")})
	}
}

// writeCleanEndNotTaken records a clean-end proof that was not taken, and why.
func (c Copy) writeCleanEndNotTaken(ctx context.Context, s *runsink.Sink, why string) {
	p := ctoharness.FixtureProof{SchemaVersion: ctoharness.SchemaVersion, RunID: s.RunID, Kind: fixture.KindCleanEnd, FixturePath: c.Path,
		Status: []ctoharness.StatusEntry{}, Problems: []string{}, SymlinksOutside: []string{}, GitChanges: []ctoharness.GitChange{},
		Ignored: []ctoharness.Leftover{}, NotTaken: why, TakenAt: s.Clock()}
	if s.WriteJSON(ctx, evidence.CleanEnd, schemas.FixtureProof, p, ctoharness.StepCleanEnd) {
		s.Emit(ctx, ctoharness.EvFixtureCleanEnd, map[string]any{"proof": evidence.CleanEnd, "clean": false, "not_taken": why})
	}
}
