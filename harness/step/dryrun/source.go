package dryrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// sourceAndSpec is the source to classify and the task: the stages 1–2
// artificial fixture is materialized in a temporary directory (removed by
// cleanup). An empty path means a blocker ended the plan.
func (p *planning) sourceAndSpec(ctx context.Context, stage gates.Stage) (path string, cleanup func(), err error) {
	in := p.in
	cleanup = func() {}
	path, p.spec = in.Source, in.Spec
	if path == "" {
		if stage.Fixture != gates.FixtureArtificial {
			p.block(ctoharness.Blocker{Code: ctoharness.BlockSourceNotFound, Step: ctoharness.StepClassify,
				Message: fmt.Sprintf("%s copies an owned repository: pass --source PATH", stage)})
			return "", cleanup, nil
		}
		tmp, err := os.MkdirTemp("", "cto-harness-dry-run-")
		if err != nil {
			return "", cleanup, err
		}
		cleanup = func() { os.RemoveAll(tmp) }
		path = filepath.Join(tmp, "artificial-source")
		archive, _ := fixtures.Archive(fixtures.Artificial)
		if _, err := fixtures.Materialize(ctx, archive, path, in.ArtificialTime); err != nil {
			return "", cleanup, err
		}
		p.in.Policy.Owned = append(append([]string(nil), in.Policy.Owned...), path)
		if p.spec == nil {
			data, _ := fixtures.TaskSpec(fixtures.Artificial)
			s, err := task.Parse(data, "embedded artificial task", in.Schemas.Validator(schemas.TaskSpec))
			if err != nil {
				return "", cleanup, err
			}
			p.spec = &s
		}
	}
	if p.spec == nil && in.RequireTask {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockTaskRequired, Step: ctoharness.StepClassify,
			Message: "no task was given: give --task FILE (see docs/tasks.md), or --sample-task to run the built-in sample task on purpose"})
		return "", cleanup, nil
	}
	if p.spec == nil {
		s := in.DefaultSpec
		p.spec = &s
	}
	return path, cleanup, nil
}

// proveSource classifies the source and proves it read-only, and checks
// the task's base and history; false when the plan ends there.
func (p *planning) proveSource(ctx context.Context, path string) bool {
	in, spec, nop := p.in, p.spec, ctoharness.NopTracer{}
	repo, err := source.Classify(ctx, path, p.in.Policy, nop)
	if err != nil {
		p.block(ctoharness.AsBlocker(err, ctoharness.StepClassify))
		return false
	}
	p.repo, p.plan.Source = repo, repo.Root
	proof, err := source.Prove(ctx, repo, source.ProofOptions{RunID: in.RunID, Kind: source.KindBefore, Now: in.Clock(), Getenv: in.Getenv}, nop)
	if err != nil {
		p.block(ctoharness.AsBlocker(err, ctoharness.StepSourceProof))
		return false
	}
	p.plan.SourceClean = proof.StatusClean
	if !proof.StatusClean {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockSourceDirty, Step: ctoharness.StepSourceProof,
			Message: fmt.Sprintf("source %s is not clean (%s)", repo.Root, source.DescribeStatus(proof.Status))})
	}
	rev := in.Rev
	if rev == "" {
		rev = spec.Base
	}
	if rev != "" {
		if _, _, err := fixture.ResolveBase(repo.Root, repo.GitDir, rev); err != nil {
			p.block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepSourceProof,
				Message: fmt.Sprintf("the task's base %s; give a commit, branch or tag of %s", err, repo.Root)})
		}
	}
	if _, err := fixture.ParseHistory(spec.HistoryText()); err != nil {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepClassify, Message: err.Error()})
	}
	return true
}
