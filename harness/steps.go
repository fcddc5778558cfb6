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
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/caserun"
	"github.com/cto-harness/cto-harness/harness/step/classify"
	"github.com/cto-harness/cto-harness/harness/step/contract"
	"github.com/cto-harness/cto-harness/harness/step/gate"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/prescan"
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

// AgentOptions select a supported coding agent as Case (on the real lane);
// package agentcase runs it.
type AgentOptions = agentcase.Options

// AgentStream is the agent's native stream, kept verbatim (redacted, capped).
const AgentStream = agentcase.Stream

// ModelRequests lists every model request the meter relayed, one JSON line each.
const ModelRequests = agentcase.ModelRequests

// checkAgent runs at the gate (package agentcase checks the agent and
// starts its meter); a sandboxed agent's one network endpoint is its meter,
// and from now on the sink redacts the agent's key.
func (r *run) checkAgent(ctx context.Context) {
	a := agentcase.Check(ctx, r.Sink, agentcase.Input{Options: r.o.Agent, Stage: r.o.Stage, HasCase: r.Report.Backend == ctoharness.BackendCase,
		Settings: r.o.Config.Agent, Getenv: r.o.Getenv, Clock: r.o.Clock, Scratch: r.scratch, KeepWork: r.o.KeepWork})
	if a == nil {
		return
	}
	if !r.o.Unsandboxed {
		r.allowAgentNet(a.Endpoint())
	}
	r.agent = a
	r.SetRedactor(a.Redactor())
}

// allowAgentNet adds the agent's meter to what Case may reach, named as the agent's.
func (r *run) allowAgentNet(endpoint string) {
	r.o.AllowNetCase = append(append([]string(nil), r.o.AllowNetCase...), endpoint)
	origin := map[string]string{endpoint: "agent"}
	for k, v := range r.o.AllowNetOrigin {
		if k != endpoint {
			origin[k] = v
		}
	}
	r.o.AllowNetOrigin = origin
}

// secrets are the run's keys: Case's agent's and the adversary agent's.
func (r *run) secrets() []agentcase.Secret {
	var out []agentcase.Secret
	if r.agent != nil {
		out = append(out, r.agent.Secret())
	}
	if r.adv != nil {
		out = append(out, agentcase.Secret{KeyVar: r.adv.KeyVar(), Red: r.adv.Redactor()})
	}
	return out
}

// agentLimits raises the default address-space limit for an agent run.
func (r *run) agentLimits() {
	if r.agent != nil {
		r.spec.Limits = agentcase.Limits(r.spec.Limits)
	}
}

// prescan refuses, before Case, a verification the scanner would refuse
// after it whatever Case did (package prescan): with the verification's
// own policy (its network allowlist included), on the baseline Case
// starts from.
func (r *run) prescan(ctx context.Context, fixtureDir string) bool {
	if r.Report.Backend != ctoharness.BackendCase {
		return true
	}
	_, scratch := r.roots(true)
	_, pol := r.verifyEnv(egress.CommandVerify, fixtureDir, scratch)
	b, _, err := prescan.Check(ctx, prescan.Input{Command: r.spec.Verification.Command, Dir: fixtureDir, Policy: pol, Allowed: r.spec.AllowedPaths,
		Setup: r.spec.Setup != nil, Hidden: r.spec.HiddenTests != ""})
	if err != nil || b == nil {
		return true // a cancelled scan: the run's own interrupt handling ends it
	}
	r.Block(*b)
	return false
}
