package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/taskcheck"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// TaskCmd is `cto-harness task`.
type TaskCmd struct {
	Check  TaskCheckCmd  `cmd:"" help:"Pre-flight a task: run its reference solution through the whole pipeline, N times, and say whether the task can grade agents."`
	Import TaskImportCmd `cmd:"" help:"Turn benchmark tasks (SWE-bench instances) into task specs and batch specs."`
}

// TaskCheckCmd is `cto-harness task check`.
type TaskCheckCmd struct {
	Task      string `arg:"" name:"task" help:"The task spec file (schemas/task-spec.schema.json)."`
	Source    string `name:"source" required:"" placeholder:"PATH" help:"The owned source repository the task is for."`
	Reference string `name:"reference" required:"" placeholder:"PATCH|SCRIPT|COMMIT" help:"The task's reference solution: a patch file (git diff format), a solver script (a file starting with #!, run in the fixture by the interpreter it names), or a commit of the source whose diff from the task's base is the patch."`
	Repeats   int    `name:"repeats" default:"2" help:"How many times to run it: every repeat must give the same outcomes."`
	Rev       string `name:"rev" placeholder:"COMMIT" help:"The task's base, overriding its spec's base (as run --rev)."`
	Out       string `name:"out" placeholder:"FILE" help:"Where to write the record (default RUNS_DIR/task-checks/<task>-<base>.json); a signed statement goes beside it as FILE.dsse.json when a signing key is configured."`
	Profile   string `name:"profile" help:"The execution profile of the runs (as run --profile)."`
	JSON      bool   `name:"json" help:"Print the record as one JSON line."`
}

// Help is the long help.
func (c *TaskCheckCmd) Help() string {
	return `Each repeat is a whole stage-3 run in which the fake Case applies the reference with
git apply, in the sandbox: the reference is graded exactly as an agent would be
(hidden tests laid over the result, the task's fail_to_pass and pass_to_pass
tests on the result, the fail_to_pass tests on the base). The task is valid when
it lists fail_to_pass tests, every repeat passed with evidence that validates,
and every repeat gave the same outcomes. The stage gates apply as for run.

See docs/tasks.md (Task pre-flight). Exit status: 0 valid, 1 invalid, 2 bad input.`
}

// Run executes the command.
func (c *TaskCheckCmd) Run(g *Globals, env *Env) error {
	set, err := compileSchemas()
	if err != nil {
		return err
	}
	cfg, err := g.config(env, set)
	if err != nil {
		return err
	}
	spec, err := task.Load(env.Ctx, c.Task, set.Validator(schemas.TaskSpec))
	if err != nil {
		return usageError{err}
	}
	if c.Repeats < 1 {
		return usagef("--repeats %d: give 1 or more", c.Repeats)
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	runs := g.runsDir(env)
	opts := harness.Options{Stage: 3, Source: c.Source, Spec: &spec, RunsDir: runs, Config: cfg, Getenv: env.Getenv, SelfExe: env.Self,
		Schemas: set, Profile: c.Profile, VerifyRun: validators.StageRunVerifier(set), Signing: keys, Rev: c.Rev, RequireTask: true}
	validate := func(ctx context.Context, dir string) string {
		res := validators.Run(ctx, dir, set, validators.RunOptions{Trusted: keys.Trusted})
		if res.OK {
			return ""
		}
		return res.Errors[0].String()
	}
	rec, err := taskcheck.Check(env.Ctx, taskcheck.Input{Run: opts, Reference: c.Reference, Repeats: c.Repeats, Validate: validate})
	if errors.Is(err, taskcheck.ErrUsage) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	out := c.Out
	if out == "" {
		name := strings.TrimSuffix(filepath.Base(c.Task), filepath.Ext(c.Task))
		out = filepath.Join(runs, "task-checks", fmt.Sprintf("%s-%s.json", name, rec.BaseCommit[:12]))
	}
	signed, err := taskcheck.Write(env.Ctx, out, rec, set.Validator(schemas.TaskCheck), keys.Signer)
	if err != nil {
		return err
	}
	if c.JSON {
		_ = printJSON(env.Stdout, rec)
	} else {
		verdict := "valid"
		if !rec.Valid {
			verdict = "invalid"
		}
		fmt.Fprintf(env.Stdout, "task %s: %s (%d repeats, base %s, reference %s)\n", term(c.Task), verdict, rec.Repeats, rec.BaseCommit[:12], term(rec.Reference))
		for i, r := range rec.Runs {
			fmt.Fprintf(env.Stdout, "  repeat %d: %s %s\n", i+1, r.Status, term(r.RunDir))
		}
		for _, p := range rec.Problems {
			fmt.Fprintf(env.Stdout, "  problem: %s\n", term(p))
		}
		fmt.Fprintf(env.Stdout, "record: %s\n", term(out))
		if signed != "" {
			fmt.Fprintf(env.Stdout, "signed: %s\n", term(signed))
		}
	}
	if !rec.Valid {
		return exitError{ExitFailed}
	}
	return nil
}
