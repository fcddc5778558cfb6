package harness

import (
	"context"
	"encoding/json"
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
	"github.com/cto-harness/cto-harness/harness/step/caserun"
	"github.com/cto-harness/cto-harness/harness/step/classify"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/proof"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

func (r *run) gate(ctx context.Context) bool {
	r.SetStep(ctoharness.StepGate)
	d := gates.Check(ctx, gates.Request{Stage: r.o.Stage, Getenv: r.o.Getenv, Records: r.o.recordCheck(), Signing: r.o.Signing})
	r.stage, r.prev = d.Stage, d.Previous
	r.Report.StageName = d.Stage.Name
	if r.Report.StageName == "" {
		r.Report.StageName = "unknown"
	}
	r.Report.Backend = d.Stage.Backend
	if r.Report.Backend == "" {
		r.Report.Backend = ctoharness.BackendCase
	}
	if r.Report.Backend == ctoharness.BackendCase {
		r.Report.CaseLane = r.o.Lane
	}
	for _, b := range d.Blockers {
		r.Block(b)
	}
	if r.OK() && r.o.Agent.Name != "" {
		// Before the probe: the agent adds to what the sandbox must allow.
		r.checkAgent(ctx)
	}
	if r.OK() {
		r.checkTools(ctx)
	}
	if r.OK() {
		r.launcher.Probe()
	}
	if r.OK() && r.Report.Backend == ctoharness.BackendCase && r.o.Lane == ctoharness.LaneReal && len(r.caseCommand()) == 0 {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockCaseCommandMissing, Step: ctoharness.StepGate,
			Message: "the real lane needs a Case command: pass --case-cmd, set CTO_HARNESS_CASE_CMD, or set case_command in the config"})
	}
	prev := map[string]any{}
	if d.Previous != nil {
		// The record's digest names exactly the record the gate trusted:
		// stage 3's validation orders this run after that record by it,
		// not by two processes' wall clocks.
		prev = map[string]any{"stage": d.Previous.Stage, "run_id": d.Previous.RunID, "validated_at": d.Previous.ValidatedAt,
			"record_digest": d.Previous.RecordDigest}
	}
	codes := []string{}
	for _, b := range r.Report.Blockers {
		codes = append(codes, string(b.Code))
	}
	r.Emit(ctx, ctoharness.EvGateChecked, map[string]any{"stage": r.o.Stage, "allowed": r.OK(), "blockers": codes, "previous_stage_record": prev,
		"warm_caches": r.ecoRecord()})
	return r.OK()
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

func (r *run) writeContract(ctx context.Context, fixtureDir string) bool {
	r.SetStep(ctoharness.StepContract)
	r.agentLimits()
	c := task.NewContract(r.spec, r.RunID, fixtureDir)
	if r.spec.Adversary != nil {
		if r.o.Unsandboxed {
			// Refused before Case, not after: the step could never finish.
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryFailed, Step: ctoharness.StepContract,
				Message: "the task's adversary runs only in a sandbox of its own; run without --unsandboxed"})
			return false
		}
		if !r.autoConfirm() && r.o.Confirm == nil {
			// Asked after Case, the question would find nobody: refused now.
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryNotConfirmed, Step: ctoharness.StepContract,
				Message: "the task's adversary writes tests that run only once a person confirms them, and there is no terminal to ask on; run with --auto-confirm (or \"auto_confirm\": true in the config) to let them run without asking"})
			return false
		}
		c.ClaimsFile = filepath.Join(r.scratch, claimsFile) // Case's scratch, shown at its own path
		if !r.startAdversaryAgent(ctx) {
			return false
		}
	}
	data, _ := json.Marshal(c)
	if leak := r.leaksSource(string(data)); leak != "" {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepContract,
			Message: "the task contract would reveal the source path (" + leak + "); remove it from the task text"})
		return false
	}
	if !r.WriteJSON(ctx, evidence.TaskFile, schemas.TaskContract, c, ctoharness.StepContract) {
		return false
	}
	r.contract = &c
	r.launcher.SetLimits(c.Limits)
	r.Emit(ctx, ctoharness.EvTaskContractWritten, map[string]any{"contract": evidence.TaskFile, "allowed_paths": c.AllowedPaths})
	return r.OK()
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
