// Package classify is the classify step: it finds the repository a run
// copies (the user's, classified against the policy, or for stages 1–2
// without a source the embedded artificial fixture, materialized in the
// workspace), and fixes the task the run will be graded by before Case
// starts. What later steps need is the Classified it returns.
package classify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/hidden"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// ArtificialCommitTime makes the materialized artificial fixture's commit
// identical across runs.
var ArtificialCommitTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Input is what the step classifies and against what.
type Input struct {
	Stage  gates.Stage // the gate's stage: whether it may run on the artificial fixture
	Source string      // "" for the artificial fixture
	Policy source.Policy
	// Spec is the task given (nil: the built-in one for the source);
	// DefaultSpec is the built-in task of a user's own repository.
	Spec        *task.Spec
	DefaultSpec task.Spec
	// RequireTask refuses a user's repository with no Spec (TASK_REQUIRED).
	RequireTask bool
	// Unsandboxed refuses hidden tests and a layout, which only the
	// sandbox can keep from Case or show.
	Unsandboxed bool
	Schemas     *schemas.Set
}

// Classified is the source and the task as the step fixed them. Repo is
// set once the source is classified, even when the task is then refused.
type Classified struct {
	Repo    source.Repo
	Spec    task.Spec
	Builtin string // the embedded fixture's name, "" for a user's repository
}

// Run classifies the source and reads the task; false means the run is
// blocked (the sink says why).
func Run(ctx context.Context, s *runsink.Sink, in Input) (Classified, bool) {
	s.SetStep(ctoharness.StepClassify)
	var c Classified
	pol, path := in.Policy, in.Source
	if path == "" {
		if in.Stage.Fixture != gates.FixtureArtificial {
			s.Block(ctoharness.Blocker{Code: ctoharness.BlockSourceNotFound, Step: ctoharness.StepClassify,
				Message: fmt.Sprintf("%s copies an owned repository: pass --source PATH", in.Stage)})
			s.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false})
			return c, false
		}
		c.Builtin = fixtures.Artificial
		path = filepath.Join(s.Report.RuntimeWorkspaceRoot, "artificial-source")
		if err := materialize(ctx, s, c.Builtin, path); err != nil {
			s.BlockErr(err, ctoharness.StepClassify)
			s.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false})
			return c, false
		}
		// The harness made this repository itself, so it owns it.
		pol.Owned = append(append([]string(nil), pol.Owned...), path)
	}
	repo, err := source.Classify(ctx, path, pol, s.Trace)
	if err != nil {
		s.BlockErr(err, ctoharness.StepClassify)
		s.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false, "path": filepath.Clean(path)})
		return c, false
	}
	c.Repo = repo
	s.Report.SourcePath = repo.Root
	if repo.Separate() {
		s.Report.SourceGitDir = repo.GitDir
	}
	spec, ok := readTask(ctx, s, in, c)
	if !ok {
		return c, false
	}
	c.Spec = spec
	s.Report.AllowedPaths = append([]string{}, spec.AllowedPaths...)
	data := map[string]any{"ok": true, "root": repo.Root, "builtin": c.Builtin, "owned": true}
	// Fixed in the event chain before Case starts: the criteria cannot
	// change once the result is known.
	crit := Criteria(spec, s.Report)
	s.Report.Criteria = crit
	data["task_spec_digest"] = crit.SpecDigest
	if h := s.Report.HiddenTests; h != nil {
		data["hidden_tests_digest"] = h.Digest
	}
	if len(spec.FailToPass) > 0 || len(spec.PassToPass) > 0 {
		data["fail_to_pass"], data["pass_to_pass"] = nonNil(spec.FailToPass), nonNil(spec.PassToPass)
	}
	s.Emit(ctx, ctoharness.EvSourceClassified, data)
	return c, true
}

// readTask is the task the run is graded by, refused when it cannot be
// used for this source: none given for a user's repository when one is
// required, hidden tests that cannot be kept from Case, or a layout only
// the sandbox can show.
func readTask(ctx context.Context, s *runsink.Sink, in Input, c Classified) (task.Spec, bool) {
	root := c.Repo.Root
	refuse := func(code ctoharness.BlockerCode, msg string) (task.Spec, bool) {
		s.Block(ctoharness.Blocker{Code: code, Step: ctoharness.StepClassify, Message: msg})
		s.Emit(ctx, ctoharness.EvSourceClassified, map[string]any{"ok": false, "root": root, "owned": true})
		return task.Spec{}, false
	}
	if in.Spec == nil && c.Builtin == "" && in.RequireTask {
		return refuse(ctoharness.BlockTaskRequired, fmt.Sprintf("no task was given for %s: the built-in sample task (a note in CASE_NOTES.md) would grade none of its tests; "+
			"give --task FILE (see docs/tasks.md), or --sample-task to run the sample task on purpose", root))
	}
	spec, err := taskSpec(in, c.Builtin)
	if err != nil {
		s.BlockErr(err, ctoharness.StepClassify)
		return task.Spec{}, false
	}
	s.Report.SampleTask = in.Spec == nil && c.Builtin == ""
	if spec.HiddenTests != "" {
		rec, err := hiddenTests(ctx, spec.HiddenTests, root, in.Unsandboxed)
		if err != nil {
			return refuse(ctoharness.BlockTaskInvalid, err.Error())
		}
		s.Report.HiddenTests = rec
	}
	if spec.Layout != nil && in.Unsandboxed {
		return refuse(ctoharness.BlockTaskInvalid, fmt.Sprintf("the task's layout shows the repository at %s, which only the sandbox's view can do, and the run is --unsandboxed: run it sandboxed", spec.Layout.Workdir))
	}
	return spec, true
}

// Criteria are what the run's verdict will be judged by.
func Criteria(spec task.Spec, rep *ctoharness.Report) *ctoharness.TaskCriteria {
	raw, _ := json.Marshal(spec) // the same digest a batch trial's task_digest is
	sum := sha256.Sum256(raw)
	c := &ctoharness.TaskCriteria{SpecDigest: hex.EncodeToString(sum[:]), FailToPass: nonNil(spec.FailToPass), PassToPass: nonNil(spec.PassToPass),
		SampleTask: rep.SampleTask}
	if h := rep.HiddenTests; h != nil {
		c.HiddenTestsDigest = h.Digest
	}
	if tr := spec.TestResults; tr != nil {
		c.TestResults = string(tr.Format) + ":" + tr.Path
	}
	return c
}

// hiddenTests reads the task's hidden test directory before Case starts
// and says why it cannot be used: outside the source (whose copy Case
// gets), and with the sandbox (which hides it from Case).
func hiddenTests(ctx context.Context, dir, sourceRoot string, unsandboxed bool) (*ctoharness.HiddenTests, error) {
	set, err := hidden.Read(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("%v; fix the task's hidden_tests", err)
	}
	real, err := filepath.EvalSymlinks(set.Dir)
	if err != nil {
		return nil, fmt.Errorf("hidden tests %s: %v", set.Dir, err)
	}
	if sandbox.Within(real, sourceRoot) {
		return nil, fmt.Errorf("the hidden tests %s lie inside the source %s, whose copy Case works in: keep them outside the repository", set.Dir, sourceRoot)
	}
	if unsandboxed {
		return nil, fmt.Errorf("the task has hidden tests (%s), and --unsandboxed lets Case read any file: run it sandboxed", set.Dir)
	}
	return set.Record(), nil
}

func materialize(ctx context.Context, s *runsink.Sink, name, dst string) error {
	archive, err := fixtures.Archive(name)
	if err != nil {
		return err
	}
	s.Trace.Trace(ctoharness.TraceMkdir, dst)
	if _, err := fixtures.Materialize(ctx, archive, dst, ArtificialCommitTime); err != nil {
		return ctoharness.Block(ctoharness.BlockSourceUnreadable, ctoharness.StepClassify, err,
			"cannot materialize the embedded %s fixture at %s", name, dst)
	}
	return nil
}

func taskSpec(in Input, builtin string) (task.Spec, error) {
	if in.Spec != nil {
		return *in.Spec, nil
	}
	if builtin == "" {
		return in.DefaultSpec, nil
	}
	data, err := fixtures.TaskSpec(builtin)
	if err != nil {
		return task.Spec{}, err
	}
	return task.Parse(data, "embedded "+builtin+" task", in.Schemas.Validator(schemas.TaskSpec))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
