package gates

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// verifyClaim checks what a record claims instead of trusting it: a record's
// digest can be recomputed by anyone who can write the runs directory, so the
// run it names must itself be, now, a validating passing run of stage n that
// lives in this runs directory under its own id and is fresh enough.
func (rc RecordCheck) verifyClaim(ctx context.Context, n int, p string, r Record) error {
	unproven := func(format string, a ...any) error {
		return ctoharness.Block(ctoharness.BlockPrevStageUnproven, ctoharness.StepGate, nil,
			"stage %d validation record %s: %s; re-run '%s'", n, p, fmt.Sprintf(format, a...), rc.Rerun(n))
	}
	if rc.VerifyRun == nil {
		return unproven("this gate has no way to validate the run the record names")
	}
	runs, err := realDir(rc.RunsDir)
	if err != nil {
		return unproven("the runs directory %q cannot be resolved: %v", rc.RunsDir, err)
	}
	if bound, err := realDir(r.RunsDir); err != nil || bound != runs {
		return unproven("it was written for the runs directory %q, not %s", r.RunsDir, runs)
	}
	if !filepath.IsAbs(r.RunDir) {
		return unproven("run_dir %q is not an absolute path", r.RunDir)
	}
	dir, err := realDir(r.RunDir)
	if err != nil {
		return unproven("the run directory %s it names cannot be resolved: %v", r.RunDir, err)
	}
	if filepath.Dir(dir) != runs || filepath.Base(dir) != r.RunID {
		return unproven("it names %s, which is not run %s directly inside this runs directory %s", r.RunDir, r.RunID, runs)
	}
	rep, err := rc.VerifyRun(ctx, dir)
	if err != nil {
		return unproven("the run %s it names does not validate now: %v", dir, err)
	}
	switch {
	case rep.RunID != r.RunID:
		return unproven("the run's report has id %s, the record says %s", rep.RunID, r.RunID)
	case rep.Stage != n:
		return unproven("the run %s is a stage %d run, not stage %d", rep.RunID, rep.Stage, n)
	case rep.Status != ctoharness.StatusPass:
		return unproven("the run %s has status %s, not pass", rep.RunID, rep.Status)
	case !rep.Qualifies:
		return unproven("the run %s does not qualify as stage evidence", rep.RunID)
	}
	if named, err := realDir(rep.RunArtifactDir); err != nil || named != dir {
		return unproven("the run's report names the directory %s, not %s", rep.RunArtifactDir, dir)
	}
	if age := rc.Now.Sub(rep.Freshness.FinishedAt); age > rc.MaxAge || age < -time.Minute {
		return ctoharness.Block(ctoharness.BlockPrevStageStale, ctoharness.StepGate, nil,
			"stage %d validation record %s names run %s, which finished %s ago (max %s); re-run '%s'",
			n, p, rep.RunID, age.Round(time.Second), rc.MaxAge, rc.Rerun(n))
	}
	return nil
}

// realDir resolves symlinks so a path compares by identity, not spelling.
func realDir(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}
