package batch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
	"github.com/cto-harness/cto-harness/harness/caseworld"
	"github.com/cto-harness/cto-harness/harness/checked"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/modelmeter"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// Local runs trials in this process, each an ordinary stage-3 run.
type Local struct {
	// Base is the run template: runs directory, config, schemas, signing
	// keys, environment (with the stage gates), the harness executable.
	// Each trial fills in its source, task, agent and profile.
	Base harness.Options
	// Worker names who ran the attempt in the record ("local" by default).
	Worker string
	// Unchecked skips validating the run after it is made: for a worker,
	// whose coordinator validates what it downloads anyway.
	Unchecked bool
}

// RunTrial makes one stage-3 run of the trial, bound to a fresh request
// nonce, and checks its evidence.
func (l Local) RunTrial(ctx context.Context, t Trial, attempt int) (Attempt, error) {
	return l.RunBound(ctx, t, attempt, NewNonce())
}

// NewNonce is a fresh request nonce: 16 random bytes in hex.
func NewNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RunBound makes one stage-3 run of the trial for the request whose nonce
// is given: the run records the trial binding (trial, attempt, nonce, task
// digest, source, agent) in its report and signed predicate.
func (l Local) RunBound(ctx context.Context, t Trial, attempt int, nonce string) (Attempt, error) {
	b := t.Binding(attempt, nonce)
	o, stop, err := l.options(t, &b)
	if err != nil {
		return Attempt{}, err
	}
	defer stop()
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	start := clock()
	rep, err := harness.Run(ctx, o)
	if rep == nil {
		if err == nil {
			err = errors.New("the harness returned no report")
		}
		return Attempt{}, fmt.Errorf("trial %s: %w", t.ID, err)
	}
	worker := l.Worker
	if worker == "" {
		worker = "local"
	}
	var a Attempt
	if l.Unchecked {
		a = Attempt{RunDir: rep.RunArtifactDir, RunID: rep.RunID, Status: string(rep.Status), Blockers: []string{}, EvidenceErrors: []string{},
			OutcomeSource: "not validated here"}
	} else {
		a = Describe(ctx, rep.RunArtifactDir, l.Base.Schemas, l.Base.Signing.Signer != nil, trustedWithOwn(l.Base.Signing))
	}
	a.StartedAt = start.UTC()
	a.DurationMs = clock().Sub(start).Milliseconds()
	a.Worker = worker
	a.Nonce = nonce
	if !l.Unchecked {
		if why := CheckBinding(t, attempt, nonce, a.Binding); why != "" {
			a.Outcome, a.OutcomeSource = OutcomeInfraFailed, "the run is not bound to its trial"
			a.Note = joinNote(a.Note, why)
		}
	}
	if err != nil { // evidence could not be written completely
		a.Note = joinNote(a.Note, err.Error())
		a.Outcome = OutcomeInfraFailed
	}
	checkHead(t, rep, &a)
	return a, nil
}

// options are the harness options of one run of trial t (a scripted
// agent's model server started; stop ends it).
func (l Local) options(t Trial, b *ctoharness.TrialBinding) (harness.Options, func(), error) {
	spec, err := t.Spec(l.Base.Schemas) // checks the spec against the trial's task digest
	if err != nil {
		return harness.Options{}, nil, err
	}
	o := l.Base
	o.Trial = b
	if len(t.TaskCheck) > 0 {
		rec, err := checked.Parse(t.TaskCheck, t.TaskCheckKey)
		if err != nil {
			return harness.Options{}, nil, fmt.Errorf("trial %s: %w", t.ID, err)
		}
		o.TaskCheck = &rec
	}
	o.Stage = 3
	o.Source = t.Source
	o.Spec = &spec
	o.Profile = t.Profile
	o.AllowNetCase, o.AllowNetVerify, o.AllowNetSetup = t.AllowNet, t.VerifyAllowNet, t.SetupAllowNet
	stop := func() {}
	if t.Agent.Kind == "" {
		o.Lane = ctoharness.LaneFake
		o.Scenario = t.Agent.Scenario
	} else {
		o.Lane = ctoharness.LaneReal
		o.Agent.Name, o.Agent.Model, o.Agent.BaseURL, o.Agent.APIKeyEnv = t.Agent.Kind, t.Agent.Model, t.Agent.BaseURL, t.Agent.APIKeyEnv
		if t.Agent.Scripted != "" {
			if stop, err = scripted(&o, t.Agent, spec.AllowedPaths); err != nil {
				return harness.Options{}, nil, fmt.Errorf("trial %s: the scripted model server: %w", t.ID, err)
			}
		}
	}
	return o, stop, nil
}

// endpointWait bounds the reachability check of a model endpoint.
const endpointWait = 3 * time.Second

// Precheck is what would stop the trials that have no final result yet
// before they run, found without running anything: for each distinct
// source, task and agent, the dry-run plan's blockers (stage gates, the
// source owned and clean, the agent installed and its key variable set,
// the network lists, the verification's scripts) and whether the agent's
// model endpoint can be reached. Each problem names the trial it was found
// on and its fix.
func (l Local) Precheck(ctx context.Context, p Plan, st Store) ([]string, error) {
	var problems []string
	seen := map[string]bool{}
	reached := map[string]error{}
	for _, t := range p.Trials {
		key := t.Source + "\x00" + t.TaskDigest + "\x00" + t.Agent.Name
		if seen[key] {
			continue
		}
		if rec, err := st.Load(t); err != nil {
			return nil, err
		} else if rec.Final(p.MaxAttempts) {
			continue
		}
		seen[key] = true
		where := fmt.Sprintf("agent %s, task %s, source %s", t.Agent.Name, t.Task, t.Source)
		o, stop, err := l.options(t, nil)
		if err != nil {
			problems = append(problems, where+": "+err.Error())
			continue
		}
		dry, err := harness.Plan(ctx, o)
		stop()
		if err != nil {
			problems = append(problems, where+": "+err.Error())
			continue
		}
		for _, b := range dry.Blockers {
			problems = append(problems, fmt.Sprintf("%s: %s: %s", where, b.Code, b.Message))
		}
		if u := t.Agent.BaseURL; u != "" && t.Agent.Scripted == "" {
			if _, done := reached[u]; !done {
				pu, err := url.Parse(u)
				if err == nil {
					err = modelmeter.Precheck(ctx, pu, endpointWait)
				}
				reached[u] = err
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: %s: the model endpoint %s cannot be reached (%v); check the agent's base_url and that the provider is up",
						where, ctoharness.BlockModelEndpointUnreachable, u, err))
				}
			}
		}
	}
	return problems, nil
}

// trustedWithOwn is the keys a run's signature is checked against: the
// trusted keys plus the signer's own public key.
func trustedWithOwn(k attest.Keys) []attest.PublicKey {
	out := append([]attest.PublicKey(nil), k.Trusted...)
	if k.Signer != nil {
		out = append(out, k.Signer.Public())
	}
	return out
}

// checkHead makes a run whose source was not at the trial's commit count as
// policy_blocked: it is not the trial its id names.
func checkHead(t Trial, rep *ctoharness.Report, a *Attempt) {
	if rep.Commits.SourceHead != "" && rep.Commits.SourceHead != t.SourceHead {
		a.Outcome = OutcomePolicyBlocked
		a.OutcomeSource = "the source moved"
		a.Note = joinNote(a.Note, fmt.Sprintf("the source's HEAD was %s, the trial is of %s; re-plan the batch", rep.Commits.SourceHead, t.SourceHead))
	}
}

// Describe reads a finished run directory into an attempt: outcome, tokens,
// cost, signature, and the full run validation (requireSignature makes an
// unsigned or unverifiable run invalid). Invalid evidence makes the attempt
// infra_failed: nothing in it can be counted.
func Describe(ctx context.Context, runDir string, set *schemas.Set, requireSignature bool, trusted []attest.PublicKey) Attempt {
	return DescribeWith(ctx, runDir, set, validators.RunOptions{Trusted: trusted, RequireSignature: requireSignature})
}

// DescribeWith is Describe with the validation's options given whole (a
// coordinator checks a relocated run against its worker keys).
func DescribeWith(ctx context.Context, runDir string, set *schemas.Set, vo validators.RunOptions) Attempt {
	a := Attempt{RunDir: runDir, RunID: filepath.Base(runDir), Blockers: []string{}, EvidenceErrors: []string{}}
	data, err := readReport(runDir)
	if err != nil {
		a.Outcome, a.OutcomeSource = OutcomeInfraFailed, "no report"
		a.EvidenceErrors = append(a.EvidenceErrors, err.Error())
		return a
	}
	a.Outcome, a.OutcomeSource = OutcomeOf(data)
	var rep ctoharness.Report
	if json.Unmarshal(data, &rep) == nil {
		a.RunID, a.Status, a.Signed, a.KeyID = rep.RunID, string(rep.Status), rep.Signed, rep.SigningKeyID
		if f := rep.Freshness; !f.StartedAt.IsZero() && f.FinishedAt.After(f.StartedAt) {
			a.StartedAt, a.DurationMs = f.StartedAt.UTC(), f.FinishedAt.Sub(f.StartedAt).Milliseconds()
		}
		for _, b := range rep.Blockers {
			a.Blockers = append(a.Blockers, string(b.Code))
		}
		a.Binding = rep.Trial
		a.Tests = attemptTests(&rep)
		if ag := rep.Agent; ag != nil {
			a.ClaimedInputTokens, a.ClaimedOutputTokens = ag.InputTokens, ag.OutputTokens
			if ag.ReportedCostUSD > 0 {
				c := ag.ReportedCostUSD
				a.ReportedCost = &c
			}
			if u := ag.Usage; u != nil {
				a.InputTokens, a.OutputTokens = u.InputUncached+u.CacheRead+u.CacheWrite, u.Output
				if u.CostUSD != nil && u.CostSource == ctoharness.CostEstimated {
					c := *u.CostUSD
					a.MeteredCost = &c
				}
			}
		}
	}
	res := validators.Run(ctx, runDir, set, vo)
	a.EvidenceValid = res.OK
	for _, f := range res.Errors {
		a.EvidenceErrors = append(a.EvidenceErrors, f.String())
	}
	if !res.OK {
		a.Note = joinNote(a.Note, fmt.Sprintf("the run's evidence did not validate (its own outcome: %s)", a.Outcome))
		a.Outcome = OutcomeInfraFailed
	}
	return a
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// scriptedKeyVar carries the throwaway key a scripted trial's agent gets.
const scriptedKeyVar = "CTO_HARNESS_BATCH_MODEL_KEY"

// scripted starts the built-in scripted model server for one trial and
// points the agent at it.
func scripted(o *harness.Options, a Agent, allowed []string) (func(), error) {
	var script modelserver.Script
	switch a.Scripted {
	case ScriptedNote:
		if len(allowed) == 0 || strings.ContainsAny(allowed[0], "*?[") {
			return nil, fmt.Errorf("the task's first allowed path %v is not a file the script can write", allowed)
		}
		script.Turns = []modelserver.Turn{
			{Action: modelserver.ActionShell, Command: "ls"},
			{Action: modelserver.ActionWrite, Path: allowed[0], Content: "note added by the fake Case, written by " + a.Kind + "\n", Text: "Adding the note."},
			{Action: modelserver.ActionText, Text: "I added " + allowed[0] + "."},
		}
	case ScriptedModelError:
		script.Turns = []modelserver.Turn{{Action: modelserver.ActionError, Status: 500}}
	default:
		return nil, fmt.Errorf("unknown scripted mode %q; use %s", a.Scripted, strings.Join(ScriptedModes(), " or "))
	}
	srv, err := modelserver.Start(modelserver.Options{Script: script, Latency: time.Duration(a.ScriptedLatencyMs) * time.Millisecond}, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	base := srv.URL()
	if k := agent.Name(a.Kind); k == agent.QwenCode || k == agent.Codex {
		base += "/v1"
	}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	value := "sk-batch-" + hex.EncodeToString(key)
	host := o.Getenv
	o.Getenv = func(k string) string {
		if k == scriptedKeyVar {
			return value
		}
		return host(k)
	}
	o.Agent.BaseURL, o.Agent.APIKeyEnv = base, scriptedKeyVar
	if o.Agent.Model == "" {
		o.Agent.Model = "scripted-model"
	}
	return func() { _ = srv.Close() }, nil
}

// maxReportBytes bounds the report read before validation.
const maxReportBytes = 64 << 20

// readReport reads a run's report.json without following a link and
// without blocking on a FIFO (a run directory may come from a worker), and
// refuses anything but a regular file of bounded size.
func readReport(runDir string) ([]byte, error) {
	f, err := caseworld.Open(runDir, evidence.ReportJSON)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReportBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxReportBytes {
		return nil, fmt.Errorf("%s/%s is larger than %d bytes", runDir, evidence.ReportJSON, maxReportBytes)
	}
	return data, nil
}
