package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// demoKeyVar holds the throwaway key the agent demo gives its agent.
const demoKeyVar = "CTO_HARNESS_DEMO_MODEL_KEY"

// demoAgent runs one agent as Case at stage 3 on the embedded sample
// repository, against the scripted model server on loopback: the model runs
// a shell command, writes the note the sample's verification looks for, and
// finishes. Stages 1 and 2 must be validated first (the caller does that).
func demoAgent(ctx context.Context, env *Env, set *schemas.Set, cfg config.Config, keys attest.Keys, runs, name, agentsDir string) (*ctoharness.Report, error) {
	s, err := agent.Lookup(name)
	if err != nil {
		return nil, usageError{err}
	}
	script := modelserver.Script{Turns: []modelserver.Turn{
		{Action: modelserver.ActionShell, Command: "ls docs"},
		{Action: modelserver.ActionWrite, Path: "docs/CASE_NOTES.md", Content: "note added by the fake Case, written by " + name + "\n", Text: "Adding the note."},
		{Action: modelserver.ActionText, Text: "I added docs/CASE_NOTES.md."},
	}}
	srv, err := modelserver.Start(modelserver.Options{Script: script}, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	base := srv.URL()
	if s.Name == agent.QwenCode || s.Name == agent.Codex {
		base += "/v1"
	}
	src := filepath.Join(runs, ".demo", fmt.Sprintf("sample-owned-%d", time.Now().UnixNano()))
	archive, err := fixtures.Archive(fixtures.SampleOwned)
	if err != nil {
		return nil, err
	}
	if _, err := fixtures.Materialize(ctx, archive, src, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		return nil, err
	}
	data, err := fixtures.TaskSpec(fixtures.SampleOwned)
	if err != nil {
		return nil, err
	}
	spec, err := task.Parse(data, "embedded sample task", set.Validator(schemas.TaskSpec))
	if err != nil {
		return nil, err
	}
	spec.CaseTimeoutSeconds = 300
	cfg.OwnedSources = append(append([]string{}, cfg.OwnedSources...), src)
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	keyValue := "sk-demo-" + hex.EncodeToString(key)
	getenv := func(k string) string {
		switch k {
		case demoKeyVar:
			return keyValue
		case gates.EnvAllowCase:
			return "1"
		case gates.EnvCaseStage:
			return "3"
		}
		return env.Getenv(k)
	}
	fmt.Fprintf(env.Stdout, "\nagent %s %s against the scripted model server at %s\n", s.Name, s.Version, base)
	return harness.Run(ctx, harness.Options{Stage: 3, Source: src, Spec: &spec, Lane: ctoharness.LaneReal, RunsDir: runs, Config: cfg,
		Getenv: getenv, SelfExe: env.Self, Schemas: set, VerifyRun: validators.StageRunVerifier(set), Signing: keys,
		Agent: harness.AgentOptions{Name: name, Model: "scripted-model", BaseURL: base, APIKeyEnv: demoKeyVar, Dir: agentsDir}})
}

// printAgentRun reports the agent demo's run and validates its evidence.
func printAgentRun(env *Env, set *schemas.Set, rep *ctoharness.Report) error {
	fmt.Fprintf(env.Stdout, "  run: %s (evidence %s)\n", term(rep.Status), term(rep.RunArtifactDir))
	if a := rep.Agent; a != nil {
		fmt.Fprintf(env.Stdout, "  agent: %s %s, model %s, %d turns, %d in / %d out / %d cached tokens, %d commands, %d file writes\n",
			term(a.Name), term(a.Version), term(a.Model), a.Turns, a.InputTokens, a.OutputTokens, a.CachedTokens, a.Commands, a.FileWrites)
	}
	for _, c := range rep.ChangedFiles {
		fmt.Fprintf(env.Stdout, "  changed: %s (%s)\n", term(c.Path), term(c.Change))
	}
	for _, b := range rep.Blockers {
		fmt.Fprintf(env.Stdout, "  blocker: %s at %s: %s\n", term(b.Code), term(b.Step), term(b.Message))
	}
	res := validators.Run(env.Ctx, rep.RunArtifactDir, set, validators.RunOptions{ExpectPass: true})
	for _, e := range res.Errors {
		fmt.Fprintf(env.Stdout, "  evidence error: %s\n", term(e))
	}
	if rep.Status != ctoharness.StatusPass || !res.OK {
		fmt.Fprintf(env.Stderr, "cto-harness: the agent demo did not pass\n")
		return exitError{ExitFailed}
	}
	fmt.Fprintf(env.Stdout, "  evidence validated; the agent ran in the sandbox and reached only the model server, through the egress forwarder\n")
	return nil
}
