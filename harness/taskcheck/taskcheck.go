// Package taskcheck is a task's pre-flight: before agents are graded by a
// task, its reference solution is run through the whole pipeline, N times,
// as the Case of the run. Each run grades the reference exactly as it would
// grade an agent (hidden tests, fail-to-pass and pass-to-pass tests on the
// result, fail-to-pass tests on the baseline), so a task whose tests do not
// tell a fix from no change, whose reference fails its own tests, or whose
// tests do not give the same answer twice is found before it makes every
// agent look bad, or good.
package taskcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/checked"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/source"
)

// PredicateType is the in-toto predicate type of a signed task check.
const PredicateType = "https://cto-harness.invalid/attestation/task-check/v1"

// ErrUsage is a task check that cannot start: no task, no reference, a
// reference that is neither a file nor a commit of the source.
var ErrUsage = errors.New("task check")

// Input is one task check.
type Input struct {
	// Run is the template of every repeat: Stage, Source, Spec (the task),
	// Rev, Config, RunsDir, Signing, SelfExe, Schemas, Getenv, Clock. Lane
	// and Scenario are set here: the reference is applied by the fake
	// Case, in the sandbox, like any Case.
	Run harness.Options
	// Reference is the reference solution: a patch file (git diff format),
	// a solver script (a file starting "#!", run in the fixture by the
	// interpreter it names), or a revision of the source whose diff from the base is
	// the patch.
	Reference string
	Repeats   int
	// Validate checks a run's evidence, as validate would ("" when it
	// holds); nil skips it.
	Validate func(ctx context.Context, runDir string) string
}

// Check runs the task check and returns its record; the caller writes it
// (Write). An error means no run could be made at all.
func Check(ctx context.Context, in Input) (*ctoharness.TaskCheck, error) {
	o := in.Run
	if o.Spec == nil {
		return nil, fmt.Errorf("%w: give the task to check (a task spec file)", ErrUsage)
	}
	if in.Reference == "" {
		return nil, fmt.Errorf("%w: give --reference: a patch file or a commit of the source that solves the task", ErrUsage)
	}
	if in.Repeats < 1 {
		in.Repeats = 1
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	root, gitDir, err := sourceDirs(ctx, o)
	if err != nil {
		return nil, err
	}
	rev := o.Rev
	if rev == "" {
		rev = o.Spec.Base
	}
	if rev == "" {
		rev = "HEAD"
	}
	base, _, err := fixture.ResolveBase(root, gitDir, rev)
	if err != nil {
		return nil, fmt.Errorf("%w: the task's base %v", ErrUsage, err)
	}
	patch, err := referencePatch(root, gitDir, base, in.Reference)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(patch)
	digest := hex.EncodeToString(sum[:])

	// The patch sits in a directory of its own that the repeats' views
	// show (a read path of their config); the runs directory is never in
	// a view.
	work, err := os.MkdirTemp("", "cto-harness-task-check-")
	if err != nil {
		return nil, fmt.Errorf("make the task check's directory: %w", err)
	}
	defer os.RemoveAll(work)
	// A reference that starts with "#!" is a solver script (a container
	// task's solution/solve.sh), run in the fixture; anything else is a
	// patch, applied with git apply.
	name, scenario := "reference.patch", "apply-patch="
	if bytes.HasPrefix(patch, []byte("#!")) {
		name, scenario = "solve.sh", "run-script="
	}
	patchPath := filepath.Join(work, name)
	if err := os.WriteFile(patchPath, patch, 0o644); err != nil {
		return nil, fmt.Errorf("write the reference to %s: %w", patchPath, err)
	}
	o.Config = withReadPath(o.Config, work)
	o.Lane, o.Scenario, o.CaseCmd, o.Agent = ctoharness.LaneFake, scenario+patchPath, nil, harness.AgentOptions{}
	o.Rev = base

	rec := &ctoharness.TaskCheck{SchemaVersion: ctoharness.SchemaVersion, CheckedAt: o.Clock().UTC(), Source: root, BaseCommit: base, Reference: in.Reference,
		ReferenceDigest: digest, Repeats: in.Repeats, Runs: []ctoharness.TaskCheckRun{}, Problems: []string{}}
	for i := 1; i <= in.Repeats; i++ {
		rep, err := harness.Run(ctx, o)
		if rep == nil {
			return nil, fmt.Errorf("repeat %d of the task check: %w", i, err)
		}
		rec.Runs = append(rec.Runs, outcome(ctx, rep, in.Validate))
		if rec.TaskDigest == "" && rep.Criteria != nil {
			rec.TaskDigest, rec.HiddenTestsDigest = rep.Criteria.SpecDigest, rep.Criteria.HiddenTestsDigest
		}
		if ctx.Err() != nil {
			break
		}
	}
	rec.Problems = judge(o.Spec.FailToPass, rec.Runs, in.Repeats)
	rec.Valid = len(rec.Problems) == 0
	return rec, nil
}

// outcome is what one repeat showed.
func outcome(ctx context.Context, rep *ctoharness.Report, validate func(context.Context, string) string) ctoharness.TaskCheckRun {
	r := ctoharness.TaskCheckRun{RunID: rep.RunID, RunDir: rep.RunArtifactDir, Status: rep.Status, Blockers: []string{},
		Result: []ctoharness.GradedTest{}, Baseline: []ctoharness.GradedTest{}}
	for _, b := range rep.Blockers {
		r.Blockers = append(r.Blockers, string(b.Code))
	}
	if len(rep.Blockers) > 0 {
		r.Why = rep.Blockers[0].Message
	}
	if res := rep.Tests.Results; res != nil && res.Grading != nil {
		r.Result = append(append(r.Result, res.Grading.FailToPass...), res.Grading.PassToPass...)
		if b := res.Grading.Baseline; b != nil {
			r.Baseline = append(r.Baseline, b.FailToPass...)
		}
	}
	if validate != nil && rep.RunArtifactDir != "" {
		r.EvidenceProblem = validate(ctx, rep.RunArtifactDir)
	}
	return r
}

// judge lists what makes the task invalid: a task without fail-to-pass
// tests (nothing shows its tests tell a fix from no change), a repeat that
// did not pass or whose evidence does not validate, a fail-to-pass test
// the baseline run did not hold, and repeats that disagree.
func judge(failToPass []string, runs []ctoharness.TaskCheckRun, repeats int) []string {
	out := []string{}
	if len(failToPass) == 0 {
		out = append(out, "the task lists no fail_to_pass tests: nothing shows that its tests tell the reference from no change")
	}
	if len(runs) < repeats {
		out = append(out, fmt.Sprintf("only %d of %d repeats ran", len(runs), repeats))
	}
	for i, r := range runs {
		switch {
		case slices.Contains(r.Blockers, string(ctoharness.BlockTaskInvalid)):
			out = append(out, fmt.Sprintf("repeat %d (%s): the task is invalid: a fail-to-pass test already passes on the base", i+1, r.RunID))
		case r.Status != ctoharness.StatusPass:
			out = append(out, fmt.Sprintf("repeat %d (%s): the reference did not pass its task (%s: %s: %s)", i+1, r.RunID, r.Status, strings.Join(r.Blockers, ", "), r.Why))
		case len(failToPass) > 0 && len(r.Baseline) != len(failToPass):
			out = append(out, fmt.Sprintf("repeat %d (%s): the baseline run did not grade every fail-to-pass test", i+1, r.RunID))
		}
		if r.EvidenceProblem != "" {
			out = append(out, fmt.Sprintf("repeat %d (%s): its evidence does not validate: %s", i+1, r.RunID, r.EvidenceProblem))
		}
		if i > 0 && (!slices.Equal(r.Result, runs[0].Result) || !slices.Equal(r.Baseline, runs[0].Baseline)) {
			out = append(out, fmt.Sprintf("repeat %d (%s) gave other outcomes than repeat 1: the tests are not deterministic", i+1, r.RunID))
		}
	}
	return out
}

// sourceDirs classifies the source as the run will (owned, not a Target
// Repository) and returns its worktree root and git directory.
func sourceDirs(ctx context.Context, o harness.Options) (root, gitDir string, err error) {
	pol := source.Policy{Owned: o.Config.OwnedSources, TargetRoots: o.Config.TargetRoots, ExternalRoots: o.Config.ExternalRoots, Now: o.Clock, ConfigFile: o.Config.Path}
	repo, err := source.Classify(ctx, o.Source, pol, ctoharness.NopTracer{})
	if err != nil {
		return "", "", fmt.Errorf("%w: source %s: %v", ErrUsage, o.Source, err)
	}
	return repo.Root, repo.GitDir, nil
}

// referencePatch reads the reference: a patch file as it is, or a
// revision's diff from base, read from the source's object store.
func referencePatch(root, gitDir, base, ref string) ([]byte, error) {
	if fi, err := os.Stat(ref); err == nil && fi.Mode().IsRegular() {
		data, err := os.ReadFile(ref)
		if err != nil {
			return nil, fmt.Errorf("%w: read the reference patch %s: %v", ErrUsage, ref, err)
		}
		if len(data) == 0 {
			return nil, fmt.Errorf("%w: the reference patch %s is empty", ErrUsage, ref)
		}
		return data, nil
	}
	commit, _, err := fixture.ResolveBase(root, gitDir, ref)
	if err != nil {
		return nil, fmt.Errorf("%w: the reference %q is neither a patch file nor a commit of the source: %v", ErrUsage, ref, err)
	}
	if commit == base {
		return nil, fmt.Errorf("%w: the reference %q is the task's base itself: it changes nothing", ErrUsage, ref)
	}
	r, err := gitstatus.Open(root, gitDir)
	if err != nil {
		return nil, err
	}
	return diff(r, base, commit)
}

// diff is the patch from commit a to commit b, in git's format.
func diff(r *git.Repository, a, b string) ([]byte, error) {
	ca, err := r.CommitObject(plumbing.NewHash(a))
	if err != nil {
		return nil, err
	}
	cb, err := r.CommitObject(plumbing.NewHash(b))
	if err != nil {
		return nil, err
	}
	p, err := ca.Patch(cb)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", a, b, err)
	}
	return []byte(p.String()), nil
}

// withReadPath is cfg with dir added to the read paths every sandboxed
// command's view shows.
func withReadPath(cfg config.Config, dir string) config.Config {
	sb := config.Sandbox{}
	if cfg.Sandbox != nil {
		sb = *cfg.Sandbox
	}
	sb.ReadPaths = append(slices.Clone(sb.ReadPaths), dir)
	cfg.Sandbox = &sb
	return cfg
}

// Write writes the record to path, checked against its schema (validate),
// and beside it (path + ".dsse.json") its signed statement when signer is
// not nil.
func Write(ctx context.Context, path string, rec *ctoharness.TaskCheck, validate func([]byte) error, signer *attest.Signer) (signed string, err error) {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return "", err
	}
	data = append(data, '\n')
	if err := validate(data); err != nil {
		return "", fmt.Errorf("the task check record would not match its schema: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("make the directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("write the task check record %s: %w", path, err)
	}
	if signer == nil {
		return "", nil
	}
	sum := sha256.Sum256(data)
	st, err := attest.NewStatement([]attest.Subject{{Name: filepath.Base(path), SHA256: hex.EncodeToString(sum[:])}}, PredicateType, rec)
	if err != nil {
		return "", err
	}
	env, err := attest.Sign(ctx, signer, st)
	if err != nil {
		return "", err
	}
	signed = path + ".dsse.json"
	if err := os.WriteFile(signed, env, 0o644); err != nil {
		return "", fmt.Errorf("write the signed task check %s: %w", signed, err)
	}
	return signed, nil
}

// Load reads a task check record for a run to require: path, checked
// against its schema (validate), and its signed statement beside it
// (path + ".dsse.json"), which must verify against a trusted key and name
// the record's exact bytes. A record without a statement is taken only when
// no key is trusted (signing is off); otherwise it is refused.
func Load(ctx context.Context, path string, validate func([]byte) error, trusted []attest.PublicKey) (*checked.Record, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: read the task check record %s: %v", ErrUsage, path, err)
	}
	if err := validate(raw); err != nil {
		return nil, fmt.Errorf("%w: %s is not a task check record: %v", ErrUsage, path, err)
	}
	keyID := ""
	envData, err := os.ReadFile(path + ".dsse.json")
	switch {
	case errors.Is(err, os.ErrNotExist) && len(trusted) > 0:
		return nil, fmt.Errorf("%w: the task check record %s is unsigned (no %s.dsse.json beside it) and this machine trusts signing keys; run cto-harness task check with a signing key", ErrUsage, path, filepath.Base(path))
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("%w: read %s.dsse.json: %v", ErrUsage, path, err)
	default:
		env, err := attest.ParseEnvelope(envData)
		if err != nil {
			return nil, fmt.Errorf("%w: %s.dsse.json: %v", ErrUsage, path, err)
		}
		if keyID, err = env.Verify(ctx, trusted); err != nil {
			return nil, fmt.Errorf("%w: the signature of %s does not verify against a trusted key: %v", ErrUsage, path, err)
		}
		st, err := attest.ParseStatement(env.Payload)
		if err != nil {
			return nil, fmt.Errorf("%w: %s.dsse.json: %v", ErrUsage, path, err)
		}
		sum := sha256.Sum256(raw)
		if st.PredicateType != PredicateType || len(st.Subjects) != 1 || st.Subjects[0].SHA256 != hex.EncodeToString(sum[:]) {
			return nil, fmt.Errorf("%w: %s.dsse.json does not sign this record (it was changed after the check, or belongs to another)", ErrUsage, path)
		}
	}
	rec, err := checked.Parse(raw, keyID)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUsage, path, err)
	}
	return &rec, nil
}
