package harness

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/step/caserun"
	"github.com/cto-harness/cto-harness/harness/step/classify"
	"github.com/cto-harness/cto-harness/harness/step/contract"
	"github.com/cto-harness/cto-harness/harness/step/gate"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/proof"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// gate checks the stage's gate (package gate), with the agent, the
// toolchains and the sandbox probe as the checks other steps make there.
func (r *run) gate(ctx context.Context) bool {
	p, ok := gate.Run(ctx, r.Sink, gate.Input{Request: gates.Request{Stage: r.o.Stage, Getenv: r.o.Getenv, Records: r.o.recordCheck(), Signing: r.o.Signing},
		Lane: r.o.Lane, Agent: r.o.Agent.Name != "",
		Hooks: gate.Hooks{Agent: r.checkAgent, Tools: r.checkTools, Probe: r.launcher.Probe, CaseCommand: r.caseCommand, WarmRecord: r.ecoRecord}})
	r.stage, r.prev = p.Stage, p.Previous
	return ok
}

func (r *run) caseCommand() []string {
	if r.agent != nil {
		return r.agent.Exe()
	}
	if len(r.o.CaseCmd) > 0 {
		return r.o.CaseCmd
	}
	return r.o.Config.CaseCommand
}

// classify finds the source and fixes the task (package classify); the
// launcher is told both.
func (r *run) classify(ctx context.Context) bool {
	c, ok := classify.Run(ctx, r.Sink, classify.Input{Stage: r.stage, Source: r.o.Source, Policy: r.o.sourcePolicy(), Spec: r.o.Spec,
		DefaultSpec: DefaultSpec(), RequireTask: r.o.RequireTask, Unsandboxed: r.o.Unsandboxed, Schemas: r.o.Schemas})
	if c.Repo.Root != "" {
		r.repo = c.Repo
		r.launcher.SetSource(launch.Source{Root: c.Repo.Root, Given: c.Repo.Given, GitDir: r.Report.SourceGitDir})
	}
	if !ok {
		return false
	}
	r.spec = c.Spec
	r.launcher.SetTask(c.Spec)
	return true
}

// proofInput is what the source proofs read (package proof).
func (r *run) proofInput() proof.Input {
	return proof.Input{Repo: r.repo, Deep: r.o.Deep, Now: r.o.Clock, Getenv: r.o.Getenv}
}

// writeContract writes Case's contract (package contract), with an agent's
// limits and the adversary's agent started, and gives the launcher its limits.
func (r *run) writeContract(ctx context.Context, fixtureDir string) bool {
	r.agentLimits()
	c, ok := contract.Write(ctx, r.Sink, contract.Input{Spec: r.spec, Fixture: fixtureDir, Unsandboxed: r.o.Unsandboxed,
		Confirmable: r.autoConfirm() || r.o.Confirm != nil, ClaimsFile: filepath.Join(r.scratch, adversary.ClaimsFile),
		StartAdversary: r.startAdversaryAgent, Leaks: r.leaksSource})
	if c != nil {
		r.contract = c
		r.launcher.SetLimits(c.Limits)
	}
	return ok
}

// leaksSource returns the source path if s names it, as itself or as JSON
// encodes it.
func (r *run) leaksSource(s string) string {
	for _, p := range []string{r.repo.Root, r.repo.Given, r.Report.SourceGitDir} {
		if p != "" && p != "/" && task.RevealsPath([]byte(s), p) {
			return p
		}
	}
	return ""
}

// change makes the task's change in the fixture at dir (package caserun),
// launched by the launcher, with the agent when one runs as Case.
func (r *run) change(ctx context.Context, dir string) {
	in := caserun.Input{Fixture: dir, Contract: r.contract, FakeBackend: r.Report.Backend == ctoharness.BackendFake,
		FakeLane: r.o.Lane == ctoharness.LaneFake, Lane: r.o.Lane, Argv: r.caseCommand(), Profile: r.profile, Sandboxed: !r.o.Unsandboxed,
		Leaks: r.leaksSource, MakeScratch: r.scratchDirs.Make, Started: r.caseStarted,
		ValidateEvent: r.o.Schemas.Validator(schemas.CaseEvent), Progress: r.o.Progress,
		Env: func() []string {
			env := backend.Env(r.scratch, r.Dir.Path(evidence.TaskFile), r.o.Getenv("PATH"), r.repo.Root, r.Report.SourceGitDir)
			return append(r.toolEnv(egress.CommandCase, env), r.launcher.NetEnv(egress.CommandCase)...)
		},
		Launch: func(argv []string, execs *execwatch.Watch) ([]string, *syscall.SysProcAttr, []*os.File, *notify.Watch, error) {
			return r.launcher.LaunchFor(egress.CommandCase, argv, execs, nil)
		}}
	if in.FakeLane {
		in.Argv = []string{r.o.SelfExe, backend.FakeSubcommand, r.o.Scenario}
	}
	if r.agent != nil {
		in.Agent = r.agent
	}
	caserun.Change(ctx, r.Sink, in)
}

func (r *run) skipVerify(reason string) {
	verification.Skip(r.Report, r.spec, r.profile, reason)
}
