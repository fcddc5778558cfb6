package validators

import (
	"reflect"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Checks on the proofs: source non-mutation, fixture clean start and end.

func checkNonMutation(v *runView, c collector) {
	const chk = "source_non_mutation"
	r := v.report
	if !r.SourceNonMutation.Checked {
		if r.Status == ctoharness.StatusPass {
			c.fail(chk, evidence.ReportJSON, "a passing run must carry a source non-mutation proof")
		}
		if v.files[evidence.SourceBefore] && !v.files[evidence.SourceAfter] && !v.hasBlocker(ctoharness.BlockSourceMutated) {
			c.fail(chk, evidence.SourceAfter, "the source was proven before the run but never after, and no SOURCE_MUTATED blocker says why")
		}
		return
	}
	var before, after ctoharness.SourceProof
	var nm ctoharness.NonMutationProof
	if !v.readJSON(evidence.SourceBefore, &before) || !v.readJSON(evidence.SourceAfter, &after) || !v.readJSON(evidence.NonMutation, &nm) {
		c.fail(chk, evidence.NonMutation, "the before, after or non-mutation proof is missing or malformed")
		return
	}
	if before.Kind != "before" || after.Kind != "after" {
		c.fail(chk, evidence.SourceAfter, "proof kinds are %q/%q, want before/after", before.Kind, after.Kind)
	}
	if before.Root != after.Root || before.Root != r.SourcePath {
		c.fail(chk, evidence.SourceAfter, "the proofs describe different roots (%s, %s, report %s)", before.Root, after.Root, r.SourcePath)
	}
	if before.GitDir != r.SourceGitDir || after.GitDir != r.SourceGitDir {
		c.fail(chk, evidence.SourceAfter, "the proofs read the git directory at %q and %q, but the report's source_git_dir is %q", before.GitDir, after.GitDir, r.SourceGitDir)
	}
	recomputed := source.Compare(r.RunID, before, after)
	if !reflect.DeepEqual(normalizeNM(recomputed), normalizeNM(nm)) {
		c.fail(chk, evidence.NonMutation, "does not match a fresh comparison of the before and after proofs")
	}
	if recomputed.Mutated != r.SourceRepositoryMutated {
		c.fail(chk, evidence.ReportJSON, "source_repository_mutated=%v but the proofs say %v", r.SourceRepositoryMutated, recomputed.Mutated)
	}
	if recomputed.Mutated && !v.hasBlocker(ctoharness.BlockSourceMutated) {
		c.fail(chk, evidence.ReportJSON, "the source changed but there is no SOURCE_MUTATED blocker")
	}
	if !before.StatusClean && !v.hasBlocker(ctoharness.BlockSourceDirty) {
		c.fail(chk, evidence.SourceBefore, "the source was not clean before the run but there is no SOURCE_DIRTY blocker")
	}
	if before.Head.Tree != r.Commits.SourceTree {
		c.fail(chk, evidence.SourceBefore, "HEAD tree %s differs from the report's source_tree %s", before.Head.Tree, r.Commits.SourceTree)
	}
}

// normalizeNM makes nil and empty difference lists compare equal.
func normalizeNM(nm ctoharness.NonMutationProof) ctoharness.NonMutationProof {
	if len(nm.Differences) == 0 {
		nm.Differences = nil
	}
	return nm
}

func checkCleanStart(v *runView, c collector) {
	checkFixtureProof(v, c, "fixture_clean_start", evidence.CleanStart, "clean_start", ctoharness.BlockFixtureDirtyStart, runBaseTree(v.report.Commits))
}

func checkCleanEnd(v *runView, c collector) {
	want := v.report.Commits.ResultTree
	if want == "" {
		want = v.report.Commits.BaselineTree
	}
	checkFixtureProof(v, c, "fixture_clean_end", evidence.CleanEnd, "clean_end", ctoharness.BlockFixtureDirtyEnd, want)
	checkGitChanges(v, c)
}

// checkGitChanges holds the clean-end proof to the task's fixture_git: an
// unsafe change to the fixture's .git is a problem unless the contract Case
// received allowed it, and only then may the proof say it was allowed.
func checkGitChanges(v *runView, c collector) {
	var p ctoharness.FixtureProof
	var ct task.Contract
	if !v.files[evidence.CleanEnd] || !v.files[evidence.TaskFile] || !v.readJSON(evidence.CleanEnd, &p) || !v.readJSON(evidence.TaskFile, &ct) {
		return // checkFixtureProof and the contract check report these
	}
	allowed := ct.FixtureGit == task.FixtureGitAllow
	if p.GitChangesAllowed && !allowed {
		c.fail("fixture_clean_end", evidence.CleanEnd, "the proof lets unsafe .git changes pass, but the task contract says fixture_git %q", ct.FixtureGit)
	}
	for _, g := range p.GitChanges {
		if g.Unsafe && p.Clean && !(allowed && p.GitChangesAllowed) {
			c.fail("fixture_clean_end", evidence.CleanEnd, "the unsafe .git change %s (%s) left the fixture clean without the task's and the proof's allowance", g.Path, g.Change)
			return
		}
	}
}

func checkFixtureProof(v *runView, c collector, chk, name, kind string, code ctoharness.BlockerCode, wantTree string) {
	if !v.files[name] {
		if v.report.Status == ctoharness.StatusPass {
			c.fail(chk, name, "a passing run must carry this proof")
		}
		return
	}
	var p ctoharness.FixtureProof
	if !v.readJSON(name, &p) {
		c.fail(chk, name, "malformed")
		return
	}
	if p.Kind != kind {
		c.fail(chk, name, "kind %q, want %q", p.Kind, kind)
	}
	if p.NotTaken != "" {
		// Only a run without a baseline may skip the proof, and only when a
		// blocker already says why.
		if v.report.Commits.BaselineCommit != "" || len(v.report.Blockers) == 0 || p.Clean || len(p.Problems) > 0 {
			c.fail(chk, name, "not taken (%s) although the run has baseline %q and %d blocker(s)", p.NotTaken, v.report.Commits.BaselineCommit, len(v.report.Blockers))
		}
		return
	}
	if p.Clean != (len(p.Problems) == 0) {
		c.fail(chk, name, "clean=%v contradicts its %d problem(s)", p.Clean, len(p.Problems))
	}
	if !p.Clean && !v.hasBlocker(code) {
		c.fail(chk, name, "the fixture was not clean but there is no %s blocker", code)
	}
	if p.Clean && p.Tree != wantTree {
		c.fail(chk, name, "tree %s is not the expected %s", p.Tree, wantTree)
	}
	if p.FixturePath != v.report.FixturePath {
		c.fail(chk, name, "describes fixture %s, the report's is %s", p.FixturePath, v.report.FixturePath)
	}
}
