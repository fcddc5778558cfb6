package harness

import (
	"context"
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/classify"
	"github.com/cto-harness/cto-harness/harness/step/dryrun"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/step/warm"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/toolenv"
)

// StatusDryRun is the status of a plan: nothing was executed.
const StatusDryRun = dryrun.Status

// DryRun is what `run --dry-run` prints (package harness/step/dryrun).
type DryRun = dryrun.Plan

// PlannedCommand is one process a run would start.
type PlannedCommand = dryrun.Command

// Plan checks the gates and the source without writing anything (read-only),
// and describes what Run would do (package harness/step/dryrun). A request
// no run could be made of is refused as Run refuses it (ErrUsage).
func Plan(ctx context.Context, o Options) (*DryRun, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if _, err := gates.Lookup(o.Stage); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	prof, err := o.lookupProfile()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := runlist.OutsideSource(o.RunsDir, o.Source); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return dryrun.Describe(ctx, planInput(o, prof))
}

// planInput is the dry run's request: the options as a run reads them, and
// the other steps' answers for each command.
func planInput(o Options, prof profile.Policy) dryrun.Input {
	argv := []string{o.SelfExe, backend.FakeSubcommand, o.Scenario}
	if o.Lane == ctoharness.LaneReal {
		argv = o.CaseCmd
		if len(argv) == 0 {
			argv = o.Config.CaseCommand
		}
	}
	return dryrun.Input{
		Gate:  gates.Request{Stage: o.Stage, Getenv: o.Getenv, Records: o.recordCheck(), Signing: o.Signing},
		RunID: o.NewRunID(o.Stage, o.Clock()), RunsDir: o.RunsDir, Source: o.Source, Policy: o.sourcePolicy(),
		Spec: o.Spec, RequireTask: o.RequireTask, DefaultSpec: DefaultSpec(), Schemas: o.Schemas, ArtificialTime: classify.ArtificialCommitTime,
		Rev: o.Rev, Config: o.Config, Getenv: o.Getenv, Clock: o.Clock, Profile: prof,
		Unsandboxed: o.Unsandboxed, AllowDangerous: o.AllowDangerous, CaseArgv: argv,
		Confirmed: o.AutoConfirm || o.Config.AutoConfirm || o.Confirm != nil,
		Adversary: dryrun.Adversary{TestsDir: adversary.TestsInView, BaselineDir: verification.BaselineInView, DefaultTimeout: adversary.DefaultTimeout,
			EnvKeys: []string{adversary.EnvTask, adversary.EnvCheckout, adversary.EnvTestsDir}},
		Hooks: planHooks(o),
	}
}

// planHooks answer the dry run from the steps that decide at a run's gate
// and launches: the toolchains and warm caches (found again, unpinned:
// nothing runs after the plan), the network grants, a coding agent's
// command line and the verification's view.
func planHooks(o Options) dryrun.Hooks {
	wi := warm.Input{Config: o.Config, Getenv: o.Getenv, Source: o.Source, RunsDir: o.RunsDir, Unsandboxed: o.Unsandboxed}
	h := dryrun.Hooks{
		Tools: func(cmd egress.Command) (toolenv.Set, error) { return tools(o, cmd) },
		Net:   func(asked *task.NetworkAllow) (egress.Policy, error) { return launch.NetPolicy(netGrants(o), asked) },
		GoCaches: func(ctx context.Context) ([]string, bool, error) {
			g, ok, err := warm.GoCaches(ctx, o.Config, o.Getenv)
			if err != nil || !ok {
				return nil, ok, err
			}
			return g.Env(), true, nil
		},
		Eco: func(ctx context.Context) (func(string, func(string) bool) []string, error) {
			e, err := warm.DetectEco(ctx, wi)
			if err != nil {
				return nil, err
			}
			return e.Env, nil
		},
		CacheWarnings: func(spec task.Spec, net egress.Policy) []string { return warm.Warnings(o.Config.Caches, spec, net) },
		Unresolved: func(progs []scan.Program, tc toolenv.Set, env []string, found []config.Toolchain) []string {
			return launch.Unresolved(o.Config, o.Getenv, progs, tc, env, found)
		},
	}
	if o.Agent.Name != "" {
		h.Agent = func(c task.Contract, scratch string, env []string) ([]string, []string, *ctoharness.Blocker) {
			return agentcase.Plan(o.Agent, o.Getenv, c, scratch, env)
		}
	}
	return h
}
