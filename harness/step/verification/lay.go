package verification

import (
	"context"
	"maps"
	"path"
	"path/filepath"
	"slices"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/task"
)

// layHidden lays the hidden tests over the verification checkout, after
// checking they are still what was digested before Case started, and
// archives them in the run directory.
func (v *Verifier) layHidden(ctx context.Context, work string) bool {
	h := v.Report.HiddenTests
	if h == nil {
		return true
	}
	fail := func(err error) bool {
		v.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepVerify, Message: err.Error()})
		v.skip("the hidden tests could not be laid over the checkout")
		return false
	}
	set, err := v.in.Hooks.Hidden.Again(ctx, h)
	if err != nil {
		return fail(err)
	}
	v.Trace.Trace(ctoharness.TraceWrite, work)
	over, err := set.Lay(ctx, work)
	h.Overridden = over
	if err != nil {
		return fail(err)
	}
	if err := v.Dir.WriteStream(ctx, evidence.HiddenTar, set.WriteArchive); err != nil {
		v.BlockWrite(err, ctoharness.StepVerify)
		v.skip(evidence.HiddenTar + " could not be written")
		return false
	}
	h.Archive = evidence.HiddenTar
	return true
}

// layLayout makes the directories the task's layout links point to in the
// verification checkout (its tests', its verifier's logs) empty, before
// the hidden tests are laid there: nothing of Case's result in them runs
// or is read.
func (v *Verifier) layLayout(ctx context.Context, work string) bool {
	if v.in.Spec.Layout == nil {
		return true
	}
	removed, err := v.in.Hooks.Hidden.MakeDirs(ctx, work, slices.Collect(maps.Values(v.in.Spec.Layout.Links)), reportPath(v.in.Spec.TestResults))
	for _, p := range removed {
		v.Trace.Trace(ctoharness.TraceRemove, filepath.Join(work, p))
	}
	if err != nil {
		v.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepVerify, Message: err.Error()})
		v.skip("the layout's directories could not be made in the checkout")
		return false
	}
	return true
}

// reportPath is the test report's path in the checkout, as a list (none
// without test results).
func reportPath(tr *task.TestResults) []string {
	if tr == nil {
		return nil
	}
	return []string{path.Clean(filepath.ToSlash(tr.Path))}
}
