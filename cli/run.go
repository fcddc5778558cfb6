package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/progress"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/taskcheck"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// RunCmd is `cto-harness run`.
type RunCmd struct {
	Stage          int      `name:"stage" required:"" help:"Stage of the ladder to run (1-3 are approved; 4-6 are always blocked)."`
	Source         string   `name:"source" help:"Local path of the owned source repository (required for stage 3; stages 1-2 default to the embedded artificial fixture)." placeholder:"PATH"`
	Task           string   `name:"task" help:"Task spec JSON: task, allowed_paths, forbidden_actions, verification {command, timeout_seconds}, case_timeout_seconds (docs/tasks.md). A stage-3 run on your repository needs one." type:"path" placeholder:"FILE"`
	Rev            string   `name:"rev" placeholder:"COMMIT" help:"Start the task from this commit of the source (a hash, branch, tag or HEAD~N) instead of HEAD: the fixture is written from the source's object store, with only that commit's history (see the task's history). Overrides the task spec's base."`
	RequireCheck   string   `name:"require-task-check" placeholder:"FILE" help:"Refuse the run before Case starts unless FILE, a record of cto-harness task check (signed beside it as FILE.dsse.json when signing is on), found this task valid, with these hidden tests, at this base. The record is kept in the run as task-check.json."`
	SampleTask     bool     `name:"sample-task" help:"Without --task, run the built-in sample task (a note in CASE_NOTES.md) on purpose: the verdict then covers that task only, none of the repository's tests."`
	Lane           string   `name:"lane" default:"fake" enum:"fake,real" help:"Case lane, one of: ${enum}. fake is the built-in fake Case (the default); real runs the Case command (--case-cmd)."`
	CaseCmd        string   `name:"case-cmd" help:"Real lane: the Case command, a path or a JSON array of argv (default: $CTO_HARNESS_CASE_CMD or the config's case_command)." placeholder:"CMD"`
	Profile        string   `name:"profile" placeholder:"NAME" help:"one of: strict,fast,smoke,yolo,agent. The execution profile (default fast; agent with --agent): it sets Case's command budget, test runs, flake reruns and installs (see docs/execution-profiles.md)."`
	KeepWork       bool     `name:"keep-work" help:"Keep the run's workspace (RUNS_DIR/work/<run_id>: Case's scratch and the verification checkout) and its fixture (RUN_DIR/fixture, then always a full copy, never an overlay) after the run, scrubbed of the agent's API key. By default both are removed once the evidence is written."`
	AllowDangerous bool     `name:"allow-dangerous" help:"Run a verification command the script scanner flags as dangerous. Recorded; such a run never qualifies as stage evidence."`
	AutoConfirm    bool     `name:"auto-confirm" help:"Let the tests a task's adversary writes run without asking (the config's auto_confirm does the same). Without it they run only once you confirm them at the terminal; with no terminal the run is refused before Case starts (ADVERSARY_NOT_CONFIRMED)."`
	DryRun         bool     `name:"dry-run" help:"Check the gates and the source (read-only), print the plan, and execute nothing."`
	Unsandboxed    bool     `name:"unsandboxed" help:"Run Case and the verification command without the sandbox (Landlock, namespaces, limits). Recorded in the report; such a run never qualifies as stage evidence and is never signed, since Case could read the signing key."`
	Deep           bool     `name:"deep" help:"Add content sha256 to the source manifests (slower, catches same-size same-time rewrites)."`
	AllowNet       []string `name:"allow-net" sep:"none" placeholder:"HOST:PORT" help:"Let Case reach HOST:PORT (a name, *.suffix wildcard or IP) through the harness's egress forwarder; repeatable. Every connection is decided and logged in network.jsonl (see docs/sandbox.md)."`
	VerifyAllowNet []string `name:"verify-allow-net" sep:"none" placeholder:"HOST:PORT" help:"Like --allow-net, for the verification command (for example a module proxy); repeatable."`
	SetupAllowNet  []string `name:"setup-allow-net" sep:"none" placeholder:"HOST:PORT" help:"Like --allow-net, for the task's setup command (for example a package registry for npm ci); repeatable."`
	JSON           bool     `name:"json" help:"Print one JSON line: run_id, run_dir, status, blockers."`

	Agent     string `name:"agent" enum:"${agents}" default:"" help:"Run a coding agent as Case (real lane): ${agents_help} (default: the config's agent.name, else none). See docs/agents.md." placeholder:"NAME"`
	Model     string `name:"model" help:"The model the agent asks for (default: the config's agent.model)." placeholder:"NAME"`
	BaseURL   string `name:"base-url" help:"The model endpoint, handed unchanged to the agent's own base-URL setting: .../v1 for qwen-code and codex, the server root for claude-code and gemini-cli (default: the config's agent.base_url)." placeholder:"URL"`
	APIKeyEnv string `name:"api-key-env" help:"Name of the variable in this environment that holds the API key; the key is given only to the agent and redacted from the evidence (default: the config's agent.api_key_env)." placeholder:"VAR"`
	agentsDirFlag
}

// Help explains what a run does.
func (RunCmd) Help() string {
	return `A run checks the stage gates (CTO_HARNESS_ALLOW_CASE=1 and CTO_HARNESS_CASE_STAGE=N for stages 2-3,
plus the previous stage's validation record), classifies and proves the source, copies it into
RUNS_DIR/<run_id>/fixture, lets Case change the copy, collects and verifies the change, and proves the
source unchanged. Once the run has started, evidence is written to RUNS_DIR/<run_id>/ whatever the outcome.
SIGTERM or SIGINT stops Case and still proves the source (blocked: INTERRUPTED); a second one ends at once.

The run ends by writing attestation.dsse.json, an in-toto statement over every other evidence file,
signed with the machine key (created on first use in $XDG_CONFIG_HOME/cto-harness, else
~/.config/cto-harness) or the key named by CTO_HARNESS_SIGNING_KEY_FILE or signing.key_file. The
previous stage's record, and its run, must be signed by a trusted key (the signing key,
signing.trusted_keys, --pubkey). An --unsandboxed run is never signed; nor is any run when the config
sets signing.disabled. The report's unsigned_reason says why.

Bad input is refused before the run starts, and nothing is written under RUNS_DIR: stage 3 without
--source, a --source that does not exist or is not a directory, a --task or --config file that does not
exist or does not parse, an agent API key variable (--api-key-env, the task's or the config's
agent.api_key_env) that is not set. Gate and source-policy refusals are blocked runs with evidence.

Exit status: 0 pass, 1 blocked or failed, 2 bad input (nothing run), 3 evidence incomplete.`
}

// Run executes the command.
func (c *RunCmd) Run(g *Globals, env *Env) error {
	set, err := compileSchemas()
	if err != nil {
		return err
	}
	cfg, err := g.config(env, set)
	if err != nil {
		return err
	}
	// Bad input is refused before anything is written (precheck.go).
	var spec *task.Spec
	if c.Task != "" {
		if err := checkInputFile("--task", c.Task, "a task spec JSON file", "docs/tasks.md"); err != nil {
			return err
		}
		s, err := task.Load(env.Ctx, c.Task, set.Validator(schemas.TaskSpec))
		if err != nil {
			return usageError{err}
		}
		spec = &s
	}
	caseCmd, err := parseCaseCmd(firstNonEmpty(c.CaseCmd, env.Getenv(EnvCaseCmd)))
	if err != nil {
		return err
	}
	ag, err := c.agentOptions(env, g, cfg, spec)
	if err != nil {
		return err
	}
	if err := checkSource(env.Ctx, c.Stage, c.Source, cfg); err != nil {
		return err
	}
	if err := c.checkFlags(spec); err != nil {
		return err // before the signing key loads, which makes the machine key on first use
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	lane := ctoharness.Lane(c.Lane)
	if ag.Name != "" {
		lane = ctoharness.LaneReal
	}
	opts := harness.Options{
		Stage: c.Stage, Source: c.Source, Spec: spec, Lane: lane, CaseCmd: caseCmd, Agent: ag,
		RunsDir: g.runsDir(env), Config: cfg, Getenv: env.Getenv, Deep: c.Deep, Unsandboxed: c.Unsandboxed, SelfExe: env.Self, Schemas: set,
		Profile: c.Profile, KeepWork: c.KeepWork, AllowDangerous: c.AllowDangerous, VerifyRun: validators.StageRunVerifier(set), Signing: keys,
		AllowNetCase: c.AllowNet, AllowNetVerify: c.VerifyAllowNet, AllowNetSetup: c.SetupAllowNet,
		RequireTask: c.Stage == 3 && !c.SampleTask,
		Rev:         c.Rev,
		AutoConfirm: c.AutoConfirm,
	}
	if !c.JSON {
		opts.Confirm = terminalConfirm(env)
	}
	if c.RequireCheck != "" {
		rec, err := taskcheck.Load(env.Ctx, c.RequireCheck, set.Validator(schemas.TaskCheck), keys.Trusted)
		if err != nil {
			return usageError{err}
		}
		opts.TaskCheck = rec
	}
	if c.DryRun {
		return c.dryRun(env, opts)
	}
	if !c.JSON && progress.IsTerminal(env.Stderr) {
		opts.Progress = progress.New(env.Stderr, time.Now, 250*time.Millisecond)
	}
	rep, err := harness.Run(env.Ctx, opts)
	if errors.Is(err, harness.ErrUsage) {
		return usageError{err}
	}
	if rep == nil {
		return err
	}
	c.print(env, rep)
	warnWriteFailures(env, rep)
	if err != nil {
		return err
	}
	if rep.Status != ctoharness.StatusPass {
		codes := make([]string, len(rep.Blockers))
		for i, b := range rep.Blockers {
			codes[i] = string(b.Code)
		}
		fmt.Fprintf(env.Stderr, "cto-harness: run %s %s (%s): %s (evidence: %s)\n", term(rep.RunID), term(rep.Status),
			term(strings.Join(codes, ", ")), term(rep.Blockers[0].Message), term(rep.RunArtifactDir))
		return exitError{ExitFailed}
	}
	return nil
}

// checkFlags refuses flags that cannot make a run, before anything is
// loaded or written: --sample-task with --task, --require-task-check
// without --task or naming no file, an endpoint that does not parse.
func (c *RunCmd) checkFlags(spec *task.Spec) error {
	if c.SampleTask && spec != nil {
		return usagef("--sample-task and --task exclude each other: --task runs your task, --sample-task the built-in one")
	}
	if c.RequireCheck != "" {
		if spec == nil {
			return usagef("--require-task-check needs --task: a task check is of one task")
		}
		if err := checkInputFile("--require-task-check", c.RequireCheck, "a task check record (cto-harness task check --out FILE)", "docs/tasks.md"); err != nil {
			return err
		}
	}
	for _, e := range append(append(append([]string(nil), c.AllowNet...), c.VerifyAllowNet...), c.SetupAllowNet...) {
		if _, err := egress.ParseEndpoint(e); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// sampleTaskNote says what a --sample-task verdict covers.
const sampleTaskNote = "task: the built-in sample task (--sample-task): the verdict covers that task only, none of the repository's tests"

// runLine is the --json output of run.
type runLine struct {
	RunID                   string               `json:"run_id"`
	RunDir                  string               `json:"run_dir"`
	Status                  ctoharness.Status    `json:"status"`
	Outcome                 ctoharness.Outcome   `json:"outcome"`
	Stage                   int                  `json:"stage"`
	CaseProcessStarted      bool                 `json:"case_process_started"`
	SourceRepositoryMutated bool                 `json:"source_repository_mutated"`
	Blockers                []ctoharness.Blocker `json:"blockers"`
	Signed                  bool                 `json:"signed"`
	KeyID                   string               `json:"key_id,omitempty"`
	SampleTask              bool                 `json:"sample_task,omitempty"`
}

func (c *RunCmd) print(env *Env, rep *ctoharness.Report) {
	if c.JSON {
		_ = printJSON(env.Stdout, runLine{RunID: rep.RunID, RunDir: rep.RunArtifactDir, Status: rep.Status, Outcome: rep.Outcome,
			Stage: rep.Stage, CaseProcessStarted: rep.CaseProcessStarted, SourceRepositoryMutated: rep.SourceRepositoryMutated, Blockers: rep.Blockers,
			Signed: rep.Signed, KeyID: rep.SigningKeyID, SampleTask: rep.SampleTask})
		return
	}
	fmt.Fprintf(env.Stdout, "run %s: %s (stage %d, %s backend, lane %s)\n", term(rep.RunID), term(rep.Status), rep.Stage, term(rep.Backend), term(rep.CaseLane))
	fmt.Fprintf(env.Stdout, "outcome: %s\n", term(rep.Outcome))
	fmt.Fprintf(env.Stdout, "evidence: %s\n", term(rep.RunArtifactDir))
	fmt.Fprintln(env.Stdout, term(signedLine(rep.Signed, rep.SigningKeyID)))
	if rep.SampleTask {
		fmt.Fprintln(env.Stdout, sampleTaskNote)
	}
	for _, b := range rep.Blockers {
		fmt.Fprintf(env.Stdout, "blocker: %s at %s: %s\n", term(b.Code), term(b.Step), term(b.Message))
	}
}

// parseCaseCmd accepts a path or a JSON array of argv.
func parseCaseCmd(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if !strings.HasPrefix(s, "[") {
		if _, err := os.Stat(s); err != nil {
			return nil, usagef("Case command %q: %v; give a path to an executable or a JSON array of argv", s, err)
		}
		return []string{s}, nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil || len(argv) == 0 {
		return nil, usagef("Case command %q is not a non-empty JSON array of strings", s)
	}
	return argv, nil
}

func firstNonEmpty(a ...string) string {
	for _, s := range a {
		if s != "" {
			return s
		}
	}
	return ""
}

// dryRun prints the plan and executes nothing.
func (c *RunCmd) dryRun(env *Env, opts harness.Options) error {
	plan, err := harness.Plan(env.Ctx, opts)
	if errors.Is(err, harness.ErrUsage) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	if c.JSON {
		// The plan is checked against its schema like every JSON the harness writes.
		data, err := json.Marshal(plan)
		if err != nil {
			return err
		}
		if err := opts.Schemas.Validate(schemas.DryRun, data); err != nil {
			return fmt.Errorf("the dry-run plan does not match its schema (a bug; please report it): %w", err)
		}
		fmt.Fprintln(env.Stdout, string(display.JSON(data)))
	} else {
		fmt.Fprintf(env.Stdout, "dry run: stage %d, profile %s; nothing was executed\n", plan.Stage, plan.Profile.Name)
		fmt.Fprintf(env.Stdout, "source: %s (clean: %v)\ncopy target: %s\n", term(plan.Source), plan.SourceClean, term(plan.CopyTarget))
		fmt.Fprintf(env.Stdout, "steps: %s\n", strings.Join(plan.Steps, " -> "))
		for _, cmd := range plan.Commands {
			fmt.Fprintf(env.Stdout, "would run (%s): %q in %s, timeout %ds, sandboxed %v\n", cmd.Role, cmd.Argv, term(cmd.Dir), cmd.TimeoutSeconds, cmd.Sandboxed)
		}
		for _, f := range plan.Verification.Findings {
			fmt.Fprintf(env.Stdout, "finding: %s %s at %s:%d: %s\n", term(f.Severity), term(f.Pattern), term(f.File), f.Line, term(f.Command))
		}
		for _, w := range plan.Warnings {
			fmt.Fprintf(env.Stdout, "warning: %s\n", term(w))
		}
		if len(plan.ToolchainsFound) > 0 {
			// Ready to paste into the config's "toolchains" list.
			data, _ := json.Marshal(plan.ToolchainsFound)
			fmt.Fprintf(env.Stdout, "toolchains found in your home and not in the config (add them to \"toolchains\" to use them in the sandbox): %s\n", term(string(data)))
		}
		for _, b := range plan.Blockers {
			fmt.Fprintf(env.Stdout, "blocker: %s at %s: %s\n", term(b.Code), term(b.Step), term(b.Message))
		}
	}
	if len(plan.Blockers) > 0 {
		fmt.Fprintf(env.Stderr, "cto-harness: the dry run found blockers (%s)\n", plan.Blockers[0].Code)
		return exitError{ExitFailed}
	}
	return nil
}
