// Package dryrun is `run --dry-run`: the gates and the source checked
// without writing anything, and what a run would do described (the steps,
// the copy target, the task contract, every command with its limits,
// environment keys and network, the script scanner's verdict, and what
// would likely break the run). Nothing is executed and no run directory or
// fixture is written; the embedded artificial fixture of stages 1–2 is
// materialized in a temporary directory so its scripts can be scanned, and
// removed again. What other steps decide (toolchains, caches, the network
// grants, a coding agent's command line, the view) comes in through the
// hooks the pipeline passes, so the plan says what the run would be given.
package dryrun

import (
	"context"
	"path/filepath"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/toolenv"
	"github.com/cto-harness/cto-harness/harness/verify"
	"github.com/cto-harness/cto-harness/schemas"
)

// Status is the status of a plan: nothing was executed.
const Status = "dry_run"

// Command is one process a run would start.
type Command struct {
	Role           string          `json:"role"` // "case", "setup", "verification", "adversary" or "adversarial-tests"
	Argv           []string        `json:"argv"`
	Dir            string          `json:"dir"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	Sandboxed      bool            `json:"sandboxed"`
	Rlimits        sandbox.Rlimits `json:"rlimits"`
	EnvKeys        []string        `json:"env_keys"`
	// NetworkAllow is the command's egress allowlist (empty: no network).
	NetworkAllow []string `json:"network_allow"`
}

// Plan is what `run --dry-run` prints.
type Plan struct {
	Status         string               `json:"status"`
	Stage          int                  `json:"stage"`
	Blockers       []ctoharness.Blocker `json:"blockers"`
	Steps          []string             `json:"steps"`
	Source         string               `json:"source"`
	SourceClean    bool                 `json:"source_clean"`
	CopyTarget     string               `json:"copy_target"`
	TaskContract   *task.Contract       `json:"task_contract"`
	Commands       []Command            `json:"commands"`
	Profile        profile.Record       `json:"profile"`
	Verification   verify.Plan          `json:"verification"`
	Unsandboxed    bool                 `json:"unsandboxed"`
	AllowDangerous bool                 `json:"allow_dangerous"`
	// ToolchainsFound are toolchains on this host (in the user's home) that
	// the config does not declare, in the config's own form.
	ToolchainsFound []config.Toolchain `json:"toolchains_found"`
	// Warnings are what would likely break the run though nothing blocks
	// it yet: a verification program that does not resolve in the view.
	Warnings []string `json:"warnings"`
}

// Input is what a plan is made from: the run's request, resolved by the
// pipeline, and the hooks through which the other steps say what each
// command would get.
type Input struct {
	// Gate is the stage's gate request, checked as a run's would be.
	Gate gates.Request
	// RunID names the run the plan describes; its directories are named
	// after it, none is created.
	RunID string
	// RunsDir is the (absolute) runs directory.
	RunsDir string
	// Source is the repository to copy; "" at stages 1–2 means the embedded
	// artificial fixture.
	Source string
	// Policy classifies the source (owned, Target and external roots).
	Policy source.Policy
	// Spec is the task given, nil for none: then RequireTask blocks, or
	// DefaultSpec (the artificial fixture's own task at stages 1–2) stands.
	Spec        *task.Spec
	RequireTask bool
	DefaultSpec task.Spec
	// Schemas validate the artificial fixture's embedded task.
	Schemas *schemas.Set
	// ArtificialTime is the artificial fixture's commit time, as a run
	// materializes it.
	ArtificialTime time.Time
	// Rev is the base asked for on the command line ("": the task's).
	Rev string
	// Config is the harness's config; Getenv its environment; Clock its time.
	Config config.Config
	Getenv func(string) string
	Clock  func() time.Time
	// Profile is the execution profile's limits.
	Profile        profile.Policy
	Unsandboxed    bool
	AllowDangerous bool
	// CaseArgv is Case's command line on the run's lane (a coding agent's
	// comes from Hooks.Agent).
	CaseArgv []string
	// Confirmed: an adversary's tests would be confirmed (--auto-confirm,
	// the config's auto_confirm, or a terminal to ask on).
	Confirmed bool
	// Adversary is where an adversary and its tests would run.
	Adversary Adversary
	Hooks     Hooks
}

// Adversary is where the task's adversary and its tests run in their
// sandboxes, and what the adversary gets beyond the verification's
// environment.
type Adversary struct {
	TestsDir       string   // the adversary's working directory, where it writes its tests
	BaselineDir    string   // where the baseline's checkout appears for its tests
	DefaultTimeout int      // seconds, for an adversary whose task gives none
	EnvKeys        []string // the variables it is given beyond the verification's
}

// Hooks are what the other steps decide for each command, as the pipeline
// wires them. Each is asked only once the plan reaches it; every hook but
// Agent must be set.
type Hooks struct {
	// Tools is what the config's toolchains and variables give cmd; the
	// error is the gate's blocker.
	Tools func(cmd egress.Command) (toolenv.Set, error)
	// Net is each command's network allowlist: the grants narrowed by what
	// the task asks; the error is the contract's blocker.
	Net func(asked *task.NetworkAllow) (egress.Policy, error)
	// Agent is a coding agent's command line and environment as Case, or
	// the gate's refusal (argv and env then unchanged); nil when no agent
	// runs as Case.
	Agent func(c task.Contract, scratch string, env []string) (argv, withAgent []string, refused *ctoharness.Blocker)
	// GoCaches is the warm Go caches' variables (offered false when the
	// config does not offer them); the error is the gate's blocker.
	GoCaches func(ctx context.Context) (vars []string, offered bool, err error)
	// Eco finds the warm npm, pip and cargo caches; vars is what they set
	// for a command whose HOME is home and whose allowlist is allowed. The
	// error is the gate's blocker.
	Eco func(ctx context.Context) (vars func(home string, allowed func(host string) bool) []string, err error)
	// CacheWarnings are the caches' warnings for the task under its network.
	CacheWarnings func(spec task.Spec, net egress.Policy) []string
	// Unresolved warns of each of progs (the command's programs, then
	// those its make recipes start) that would not resolve in the
	// verification's view on the PATH env sets.
	Unresolved func(progs []scan.Program, tc toolenv.Set, env []string, found []config.Toolchain) []string
}

// steps are what a run does, in order.
var steps = []string{"gate check", "classify source", "source proof (before)", "copy", "baseline commit", "clean-start proof",
	"write task contract", "change (Case)", "collect", "checkout of the result", "verification", "clean-end proof", "source proof (after)",
	"non-mutation proof", "report"}

// Describe checks the gates and the source without writing anything, and
// describes what a run would do. A blocker ends the plan where it is
// raised (the gate, the source) or is listed beside the rest (a command
// that would be refused); the error is for what no plan can be made of.
func Describe(ctx context.Context, in Input) (*Plan, error) {
	p := &planning{in: in, plan: &Plan{Status: Status, Stage: in.Gate.Stage, Blockers: []ctoharness.Blocker{}, Profile: in.Profile.Record(),
		Unsandboxed: in.Unsandboxed, AllowDangerous: in.AllowDangerous, Commands: []Command{},
		ToolchainsFound: toolenv.Detect(in.Getenv("HOME"), in.Config.Toolchains), Warnings: []string{}, Steps: steps}}
	d := gates.Check(ctx, in.Gate)
	p.block(d.Blockers...)
	if len(p.plan.Blockers) > 0 {
		return p.plan, nil
	}
	path, cleanup, err := p.sourceAndSpec(ctx, d.Stage)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	if path == "" {
		return p.plan, nil
	}
	if !p.proveSource(ctx, path) {
		return p.plan, nil
	}
	p.runDir = filepath.Join(in.RunsDir, in.RunID)
	p.plan.CopyTarget = filepath.Join(p.runDir, "fixture")
	contract := task.NewContract(*p.spec, in.RunID, p.plan.CopyTarget)
	p.plan.TaskContract = &contract
	p.rl = sandbox.DefaultRlimits()
	p.scratch = filepath.Join(in.RunsDir, runlist.WorkDir, in.RunID, "scratch")
	if d.Stage.Backend == ctoharness.BackendCase {
		p.planCase(contract)
	}
	// Finding the caches is not the plan's to cancel, as at the gate.
	p.planVerification(context.WithoutCancel(ctx))
	p.planAdversary()
	if err := p.scan(ctx); err != nil {
		return nil, err
	}
	return p.plan, nil
}

// planning is one dry run being described.
type planning struct {
	in       Input
	plan     *Plan
	runDir   string
	spec     *task.Spec
	repo     source.Repo
	rl       sandbox.Rlimits
	netPol   egress.Policy
	venv     []string    // the verification's environment
	vset     toolenv.Set // the verification's toolchains
	scratch  string      // Case's scratch
	vscratch string
}

func (p *planning) block(b ...ctoharness.Blocker) { p.plan.Blockers = append(p.plan.Blockers, b...) }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
