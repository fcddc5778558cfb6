// Package contract is the step that writes task.json, the contract Case
// receives: the task, its allowed paths, limits and verification, where
// Case may leave its claims, and never the source's path. A task with an
// adversary is refused here, before Case, when its adversary could never
// run (no sandbox, nobody to confirm its tests, an agent that cannot
// start).
package contract

import (
	"context"
	"encoding/json"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// Input is the task and what decides whether its adversary can run.
type Input struct {
	Spec    task.Spec
	Fixture string // where Case works, named in the contract
	// Unsandboxed and Confirmable (auto-confirm, or a person to ask)
	// decide whether a task's adversary could run at all.
	Unsandboxed, Confirmable bool
	// ClaimsFile is where Case may write its claims for the adversary.
	ClaimsFile string
	// StartAdversary starts the task's adversary agent, if it has one
	// (false: blocked).
	StartAdversary func(ctx context.Context) bool
	// Leaks names the source path if the contract's text reveals it.
	Leaks func(string) string
}

// Write writes the contract: nil when none was written, false when the run
// is blocked.
func Write(ctx context.Context, s *runsink.Sink, in Input) (*task.Contract, bool) {
	s.SetStep(ctoharness.StepContract)
	c := task.NewContract(in.Spec, s.RunID, in.Fixture)
	if in.Spec.Adversary != nil {
		if !adversaryCanRun(s, in) {
			return nil, false
		}
		c.ClaimsFile = in.ClaimsFile // Case's scratch, shown at its own path
		if !in.StartAdversary(ctx) {
			return nil, false
		}
	}
	data, _ := json.Marshal(c)
	if leak := in.Leaks(string(data)); leak != "" {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepContract,
			Message: "the task contract would reveal the source path (" + leak + "); remove it from the task text"})
		return nil, false
	}
	if !s.WriteJSON(ctx, evidence.TaskFile, schemas.TaskContract, c, ctoharness.StepContract) {
		return nil, false
	}
	s.Emit(ctx, ctoharness.EvTaskContractWritten, map[string]any{"contract": evidence.TaskFile, "allowed_paths": c.AllowedPaths})
	return &c, s.OK()
}

// adversaryCanRun refuses, before Case rather than after it, a task whose
// adversary step could never finish.
func adversaryCanRun(s *runsink.Sink, in Input) bool {
	if in.Unsandboxed {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryFailed, Step: ctoharness.StepContract,
			Message: "the task's adversary runs only in a sandbox of its own; run without --unsandboxed"})
		return false
	}
	if !in.Confirmable {
		// Asked after Case, the question would find nobody: refused now.
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryNotConfirmed, Step: ctoharness.StepContract,
			Message: "the task's adversary writes tests that run only once a person confirms them, and there is no terminal to ask on; run with --auto-confirm (or \"auto_confirm\": true in the config) to let them run without asking"})
		return false
	}
	return true
}
