package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/cto-harness/cto-harness/harness/dataset"
	"github.com/cto-harness/cto-harness/schemas"
)

// TaskImportCmd is `cto-harness task import`.
type TaskImportCmd struct {
	SWEBench TaskImportSWEBenchCmd `cmd:"" name:"swe-bench" help:"Import SWE-bench instances (JSON lines) as task specs with hidden tests, graded lists and a reference patch, and one batch spec per repository."`
	Harbor   TaskImportHarborCmd   `cmd:"" name:"harbor" help:"Import Harbor (Terminal-Bench) task directories as task specs graded by their verifier's reward, with their starting states as commits of one repository and one batch spec."`
}

// TaskImportHarborCmd is `cto-harness task import harbor`.
type TaskImportHarborCmd struct {
	Dirs  []string `arg:"" name:"dir" help:"Harbor task directories (each with task.toml, instruction.md, environment/Dockerfile, tests/test.sh and optionally solution/solve.sh), or datasets whose subdirectories are tasks."`
	Out   string   `name:"out" required:"" placeholder:"DIR" help:"Where to write the starting states' repository (DIR/source, list it as an owned source), one directory per task (task.json, hidden/, solve.sh) and the batch spec."`
	Setup string   `name:"setup" placeholder:"CMD" help:"Every task's setup command, run in the verification's checkout: the Dockerfile's RUN lines are not run."`
	JSON  bool     `name:"json" help:"Print what was imported and skipped as one JSON line."`
}

// Help is the long help.
func (c *TaskImportHarborCmd) Help() string {
	return `Each task's starting state, the files environment/Dockerfile copies from its
build context into its WORKDIR, becomes one root commit of DIR/source (named by
refs/tasks/<task>); DIR/<task>/task.json starts from that commit and shows the
repository at the WORKDIR (the task's layout, say /app). instruction.md is the
task; tests/ are hidden tests, linked at /tests for the verifier; bash
/tests/test.sh is the verification, with /logs/verifier linked into its
checkout, and the reward it writes there (reward.txt, 1 passes) is the one graded
test, held to failing on the base. solution/solve.sh is written beside it as the
reference for 'cto-harness task check'. The image (FROM), RUN, ENV and the like
are not run: each is listed as a note. A task that cannot be mapped (no WORKDIR,
a multi-stage build, a git clone, files fetched from the network, a verifier
without reward.txt) is listed as skipped with the reason.

See docs/tasks.md (Importing Harbor tasks). Exit status: 0 when every task was
imported, 1 when some were skipped, 2 bad input.`
}

// Run executes the command.
func (c *TaskImportHarborCmd) Run(g *Globals, env *Env) error {
	set, err := compileSchemas()
	if err != nil {
		return err
	}
	res, err := dataset.Harbor(env.Ctx, c.Dirs, dataset.Options{OutDir: c.Out, Setup: c.Setup,
		Validate: set.Validator(schemas.TaskSpec), Batch: set.Validator(schemas.BatchSpec)})
	if errors.Is(err, dataset.ErrInput) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	printImport(env, res, c.JSON)
	if len(res.Imported) > 0 && !c.JSON {
		fmt.Fprintf(env.Stdout, "starting states: %s (list it in the config's owned_sources)\n", term(res.Imported[0].Source))
	}
	if len(res.Skipped) > 0 {
		return exitError{ExitFailed}
	}
	return nil
}

// printImport prints what an import did.
func printImport(env *Env, res dataset.Result, asJSON bool) {
	if asJSON {
		_ = printJSON(env.Stdout, res)
		return
	}
	for _, imp := range res.Imported {
		fmt.Fprintf(env.Stdout, "imported %s: %s (base %s, %d hidden files)\n", term(imp.ID), term(imp.Task), imp.Base[:12], len(imp.Hidden))
		for _, n := range imp.Notes {
			fmt.Fprintf(env.Stdout, "  note: %s\n", term(n))
		}
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(env.Stdout, "skipped %s: %s\n", term(s.ID), term(s.Reason))
	}
	for _, b := range res.Batches {
		fmt.Fprintf(env.Stdout, "batch spec: %s\n", term(b))
	}
}

// TaskImportSWEBenchCmd is `cto-harness task import swe-bench`.
type TaskImportSWEBenchCmd struct {
	File  string `arg:"" name:"file" help:"The instances, one JSON object per line (instance_id, repo, base_commit, problem_statement, test_patch, patch, FAIL_TO_PASS, PASS_TO_PASS)."`
	Repos string `name:"repos" required:"" placeholder:"DIR" help:"Where each instance's repository is cloned, found by its repo name: DIR/owner/name, DIR/owner__name or DIR/name. List them as owned sources."`
	Out   string `name:"out" required:"" placeholder:"DIR" help:"Where to write one directory per task (task.json, hidden/, reference.patch) and the batch specs; outside every repository."`
	Setup string `name:"setup" placeholder:"CMD" help:"Every task's setup command (say, pip install -e .): an instance does not say how its repository is installed."`
	JSON  bool   `name:"json" help:"Print what was imported and skipped as one JSON line."`
}

// Help is the long help.
func (c *TaskImportSWEBenchCmd) Help() string {
	return `Each instance becomes DIR/<instance_id>/task.json: the problem statement as the
task, base_commit as the task's base, the files of test_patch applied to the base
as hidden tests (Case never sees them), FAIL_TO_PASS and PASS_TO_PASS as the graded
lists (pytest node ids turned into the ids of pytest's JUnit report), and a pytest
verification of the test patch's files. The reference patch is written beside it
for 'cto-harness task check'. An instance that cannot be mapped (no test patch, a
test patch that deletes, renames or binary-changes a file, test ids that are not
pytest's, a base the clone lacks) is listed as skipped with the reason.

See docs/tasks.md (Importing SWE-bench tasks). Exit status: 0 when every instance
was imported, 1 when some were skipped, 2 bad input.`
}

// Run executes the command.
func (c *TaskImportSWEBenchCmd) Run(g *Globals, env *Env) error {
	set, err := compileSchemas()
	if err != nil {
		return err
	}
	f, err := os.Open(c.File)
	if err != nil {
		return usagef("read the instances %s: %v", c.File, err)
	}
	defer f.Close()
	res, err := dataset.SWEBench(env.Ctx, f, dataset.Options{ReposDir: c.Repos, OutDir: c.Out, Setup: c.Setup,
		Validate: set.Validator(schemas.TaskSpec), Batch: set.Validator(schemas.BatchSpec)})
	if errors.Is(err, dataset.ErrInput) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	printImport(env, res, c.JSON)
	if len(res.Skipped) > 0 {
		return exitError{ExitFailed}
	}
	return nil
}
