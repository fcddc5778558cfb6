// Package proof is the source-proof step at both ends of a run: before
// anything is copied, the source's state is proven and written (and the
// task's base and required task check are held to it); after everything
// else, it is proven again and compared, and any difference blocks the run
// as SOURCE_MUTATED. Unknown state after the run counts as mutation.
package proof

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/checked"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/schemas"
)

// Input is what both proofs read.
type Input struct {
	Repo   source.Repo
	Deep   bool
	Now    func() time.Time
	Getenv func(string) string
}

// BeforeInput is the before-proof's: the proof's own input, the revision
// the task starts from ("" is HEAD) and the task check the run requires.
type BeforeInput struct {
	Input
	Rev       string
	TaskCheck *checked.Record
	// Aside is a file the proof's packed manifest is kept in until the
	// after-proof (source.Spill), in a directory of the run's own that no
	// sandboxed process sees; "" keeps it in memory.
	Aside string
}

// Before proves the source before the run changes anything and writes the
// proof. The proof is nil when none could be taken; clean is false when the
// run is blocked (a dirty source, a base that does not resolve, a task
// check that does not hold), with the proof still written.
func Before(ctx context.Context, s *runsink.Sink, in BeforeInput) (p *ctoharness.SourceProof, clean bool) {
	s.SetStep(ctoharness.StepSourceProof)
	got, err := source.Prove(ctx, in.Repo, source.ProofOptions{RunID: s.RunID, Kind: "before", Deep: in.Deep, Now: in.Now(), Getenv: in.Getenv}, s.Trace)
	if err != nil {
		s.BlockErr(err, ctoharness.StepSourceProof)
		return nil, false
	}
	p = &got
	s.SourceProven()
	c := &s.Report.Commits
	c.SourceHead, c.SourceTree = got.Head.Commit, got.Head.Tree
	c.BaseCommit, c.BaseTree = got.Head.Commit, got.Head.Tree
	if writeProof(ctx, s, evidence.SourceBefore, got, ctoharness.StepSourceProof) {
		s.Emit(ctx, ctoharness.EvSourceProofBefore, map[string]any{"proof": evidence.SourceBefore, "head": got.Head.Commit,
			"status_clean": got.StatusClean, "manifest_digest": got.ManifestDigest, "entries": len(got.Manifest)})
	}
	// The run holds the proof until the after-proof, mostly while Case
	// works: packed, a million entries take a fifth of the room, and set
	// aside in a file, none.
	p.Pack()
	if in.Aside != "" && !setAside(s, p, in.Aside) {
		return p, false
	}
	// The task's base and the task check it requires are held once the
	// source proof is written: a refusal still proves the source unchanged.
	if !holdBase(ctx, s, in) {
		return p, false
	}
	if !got.StatusClean {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockSourceDirty, Step: ctoharness.StepSourceProof,
			Message: fmt.Sprintf("source %s is not clean (%s); commit or stash the changes, then run again", in.Repo.Root, source.DescribeStatus(got.Status))})
	}
	return p, s.OK()
}

// holdBase resolves the task's base in the source's object store and holds
// the required task check to the run's criteria and base.
func holdBase(ctx context.Context, s *runsink.Sink, in BeforeInput) bool {
	c := &s.Report.Commits
	if in.Rev != "" {
		commit, tree, err := fixture.ResolveBase(in.Repo.Root, in.Repo.GitDir, in.Rev)
		if err != nil {
			s.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepSourceProof,
				Message: fmt.Sprintf("the task's base %s; give a commit, branch or tag of %s", err, in.Repo.Root)})
			return false
		}
		c.BaseCommit, c.BaseTree = commit, tree
	}
	tc := in.TaskCheck
	if tc == nil || s.Report.Criteria == nil {
		return true
	}
	s.Report.TaskCheck = tc.Ref()
	if err := s.Dir.WriteFile(ctx, checked.Artifact, tc.Raw); err != nil {
		s.BlockWrite(err, ctoharness.StepSourceProof)
		return false
	}
	if err := checked.Hold(tc.Check, *s.Report.Criteria, c.BaseCommit); err != nil {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepSourceProof, Message: "--require-task-check: " + err.Error()})
		return false
	}
	return true
}

// After proves the source again, writes the proof and the non-mutation
// comparison with before, and blocks the run if anything differs. On a
// full disk the sink's bulk gives its room back first (runsink.FreeSpace):
// the after-proof is the evidence that must not be lost.
func After(ctx context.Context, s *runsink.Sink, in Input, before *ctoharness.SourceProof) {
	s.SetStep(ctoharness.StepSourceAfter)
	after, err := source.Prove(ctx, in.Repo, source.ProofOptions{RunID: s.RunID, Kind: "after", Deep: in.Deep, Now: in.Now(), Getenv: in.Getenv}, s.Trace)
	if err != nil {
		// Unknown state after the run is treated as mutation: fail closed.
		s.Report.SourceRepositoryMutated = true
		s.Block(ctoharness.AsBlocker(ctoharness.Block(ctoharness.BlockSourceMutated, ctoharness.StepSourceAfter, err,
			"the source could not be proven unchanged after the run"), ctoharness.StepSourceAfter))
		return
	}
	// The before-proof comes back (source.Restored) once the after-proof's
	// status has let the index go: the walk, the index and the
	// before-proof are never held at once.
	restored, rerr := source.Restored(before)
	if rerr == nil {
		source.MarkVerifiedObjects(in.Repo, *restored, &after)
	}
	s.FreeSpace()
	wrote := writeProof(ctx, s, evidence.SourceAfter, after, ctoharness.StepSourceAfter)
	if !wrote && s.DiskFull() && !s.Freed() {
		s.FreeSpace()
		wrote = writeProof(ctx, s, evidence.SourceAfter, after, ctoharness.StepSourceAfter)
	}
	if wrote {
		s.Emit(ctx, ctoharness.EvSourceProofAfter, map[string]any{"proof": evidence.SourceAfter, "head": after.Head.Commit,
			"status_clean": after.StatusClean, "manifest_digest": after.ManifestDigest, "entries": len(after.Manifest)})
	}
	if rerr != nil {
		s.Report.SourceRepositoryMutated = true
		s.Block(ctoharness.AsBlocker(ctoharness.Block(ctoharness.BlockSourceMutated, ctoharness.StepNonMutation, rerr,
			"the before-proof this run set aside cannot be read back, so the source cannot be shown unchanged"), ctoharness.StepNonMutation))
		return
	}
	compare(ctx, s, in.Repo.Root, *restored, after)
}

// setAside keeps the packed before-proof in a file of the run's workspace
// until the after-proof; it blocks the run when that cannot be written.
func setAside(s *runsink.Sink, p *ctoharness.SourceProof, path string) bool {
	dir := filepath.Dir(path)
	s.Trace.Trace(ctoharness.TraceMkdir, dir)
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = source.Spill(p, path, s.Trace)
	}
	if err != nil {
		s.BlockErr(ctoharness.Block(ctoharness.BlockArtifactWriteFailed, ctoharness.StepSourceProof, err,
			"the run's workspace %s cannot be written; check the runs directory's permissions and free space", dir), ctoharness.StepSourceProof)
		return false
	}
	return true
}

// writeProof writes a source proof, its manifest entry by entry: the
// proof of a tree of a million files is never one document in memory.
func writeProof(ctx context.Context, s *runsink.Sink, name string, p ctoharness.SourceProof, step ctoharness.Step) bool {
	if p.Manifest == nil {
		return s.WriteJSON(ctx, name, schemas.SourceProof, p, step)
	}
	doc := p
	doc.Manifest = []ctoharness.ManifestEntry{}
	return s.WriteJSONItems(ctx, name, schemas.SourceProof, doc, "manifest", len(p.Manifest), func(i int) any { return &p.Manifest[i] }, step)
}

// compare writes the non-mutation record of before against after.
func compare(ctx context.Context, s *runsink.Sink, root string, before, after ctoharness.SourceProof) {
	s.SetStep(ctoharness.StepNonMutation)
	nm := source.Compare(s.RunID, before, after)
	s.Report.SourceRepositoryMutated = nm.Mutated
	if s.WriteJSON(ctx, evidence.NonMutation, schemas.NonMutation, nm, ctoharness.StepNonMutation) {
		s.Report.SourceNonMutation = ctoharness.NonMutationRef{Checked: true, ProofPath: evidence.NonMutation}
		s.Emit(ctx, ctoharness.EvSourceNonMutation, map[string]any{"proof": evidence.NonMutation, "mutated": nm.Mutated,
			"differences": nm.DifferenceCount})
	}
	if !nm.Mutated {
		return
	}
	var paths []string
	for i, d := range nm.Differences {
		if i == 5 {
			paths = append(paths, fmt.Sprintf("and %d more", nm.DifferenceCount-5))
			break
		}
		paths = append(paths, d.Path+" "+d.Field)
	}
	s.Block(ctoharness.Blocker{Code: ctoharness.BlockSourceMutated, Step: ctoharness.StepNonMutation,
		Message: fmt.Sprintf("the source %s changed during the run: %s; see %s", root, strings.Join(paths, ", "), evidence.NonMutation)})
}
