// Package batch runs many stage-3 trials from one spec (sources × tasks ×
// agents × repeats): it plans them with deterministic ids, runs them through
// an executor (in-process by default, or any Runner, such as the NATS
// JetStream coordinator), keeps every attempt on disk so a batch resumes
// where it stopped, retries only infrastructure and model failures, and sums
// the results up in batch.json and batch.html.
package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/schemas"
)

// ErrSpec marks a batch spec that cannot be used: nothing was run.
var ErrSpec = errors.New("batch spec")

// Spec is a batch spec file (schemas/batch-spec.schema.json).
type Spec struct {
	Name    string    `json:"name"`
	Sources []string  `json:"sources"` // owned repositories; relative paths are relative to the spec file
	Tasks   []TaskRef `json:"tasks"`
	Agents  []Agent   `json:"agents"`
	Repeats int       `json:"repeats"`
	// Profile is the execution profile of every trial ("" is fast).
	Profile        string   `json:"profile,omitempty"`
	AllowNet       []string `json:"allow_net,omitempty"`
	VerifyAllowNet []string `json:"verify_allow_net,omitempty"`
	SetupAllowNet  []string `json:"setup_allow_net,omitempty"`
	// Concurrency is how many trials run at once (0: from cores and memory).
	Concurrency int `json:"concurrency,omitempty"`
	// MaxAttempts bounds the attempts of one trial, retries included (0: 2).
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// TaskRef names a task and its task spec file; an empty Spec is the built-in
// task (add a note to CASE_NOTES.md).
type TaskRef struct {
	Name string `json:"name"`
	Spec string `json:"spec,omitempty"`
	// TaskCheck is a record of cto-harness task check the task's trials
	// require (run --require-task-check), relative to the spec file.
	TaskCheck string `json:"task_check,omitempty"`
}

// Agent is one contestant. Kind "" runs the built-in fake Case (the fake
// lane) with Scenario; any other kind is a supported coding agent on the
// real lane, talking to Model at BaseURL with the key in APIKeyEnv.
type Agent struct {
	Name      string `json:"name"`
	Kind      string `json:"kind,omitempty"`
	Model     string `json:"model,omitempty"`
	BaseURL   string `json:"base_url,omitempty"`
	APIKeyEnv string `json:"api_key_env,omitempty"`
	Scenario  string `json:"scenario,omitempty"`
	// Scripted points a coding agent (Kind) at the built-in scripted model
	// server, started on loopback for each trial instead of BaseURL:
	// ScriptedNote makes the change the task's first allowed path names,
	// ScriptedModelError answers every request with HTTP 500.
	Scripted string `json:"scripted,omitempty"`
	// Price estimates the cost when the agent reports none.
	Price *Price `json:"price,omitempty"`
	// MaxInFlight bounds this agent's trials at once (its model quota);
	// 0 is DefaultMaxInFlight for a coding agent and no bound but the
	// machine's for the fake Case.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// ScriptedLatencyMs makes the scripted model server wait this long
	// before each answer, as a hosted model does.
	ScriptedLatencyMs int `json:"scripted_latency_ms,omitempty"`
}

// DefaultMaxInFlight is a coding agent's trials at once when its spec
// gives no max_in_flight: its trials wait on a hosted model most of the
// time, so they are many more than the cores.
const DefaultMaxInFlight = 8

// Price is US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Scripted model server behaviours.
const (
	ScriptedNote       = "note"
	ScriptedModelError = "model-error"
)

// ScriptedModes lists Agent.Scripted values.
func ScriptedModes() []string { return []string{ScriptedNote, ScriptedModelError} }

// DefaultMaxAttempts is the attempt bound when the spec names none.
const DefaultMaxAttempts = 2

// LoadSpec reads, schema-checks and resolves a spec file: relative source and
// task paths become absolute (relative to the spec's directory).
func LoadSpec(ctx context.Context, path string, set *schemas.Set) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	return ParseSpec(data, path, set)
}

// ParseSpec is LoadSpec on bytes; origin is the file they came from.
func ParseSpec(data []byte, origin string, set *schemas.Set) (Spec, error) {
	if err := set.Validate(schemas.BatchSpec, data); err != nil {
		var syn *schemas.SyntaxError
		if errors.As(err, &syn) {
			return Spec{}, fmt.Errorf("%w %s; fix the JSON there", ErrSpec, syn.In(origin))
		}
		return Spec{}, fmt.Errorf("%w %s does not match its schema: %v", ErrSpec, origin, err)
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("%w %s: %v", ErrSpec, origin, err)
	}
	base, err := filepath.Abs(filepath.Dir(origin))
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	for i := range s.Sources {
		s.Sources[i] = abs(s.Sources[i])
	}
	for i := range s.Tasks {
		s.Tasks[i].Spec = abs(s.Tasks[i].Spec)
		s.Tasks[i].TaskCheck = abs(s.Tasks[i].TaskCheck)
	}
	return s, s.check()
}

// check is what the schema cannot say: unique names, a known profile.
func (s Spec) check() error {
	seen := map[string]bool{}
	for _, t := range s.Tasks {
		if seen["task:"+t.Name] {
			return fmt.Errorf("%w: task name %q appears twice; each task needs its own name", ErrSpec, t.Name)
		}
		seen["task:"+t.Name] = true
	}
	for _, a := range s.Agents {
		if seen["agent:"+a.Name] {
			return fmt.Errorf("%w: agent name %q appears twice; each agent needs its own name", ErrSpec, a.Name)
		}
		seen["agent:"+a.Name] = true
		if a.Kind == "" && (a.Model != "" || a.BaseURL != "" || a.APIKeyEnv != "") {
			return fmt.Errorf("%w: agent %q has a model or endpoint but no kind; name the coding agent (kind) or drop them for the fake Case", ErrSpec, a.Name)
		}
		if a.Scripted != "" && (a.Kind == "" || a.BaseURL != "" || a.APIKeyEnv != "") {
			return fmt.Errorf("%w: agent %q: scripted needs a kind and replaces base_url and api_key_env", ErrSpec, a.Name)
		}
		if a.Kind != "" && a.Scenario != "" {
			return fmt.Errorf("%w: agent %q: scenario is for the fake Case only (no kind)", ErrSpec, a.Name)
		}
	}
	for _, src := range s.Sources {
		if seen["source:"+src] {
			return fmt.Errorf("%w: source %s appears twice", ErrSpec, src)
		}
		seen["source:"+src] = true
	}
	if s.Profile != "" {
		if _, err := profile.Lookup(s.Profile); err != nil {
			return fmt.Errorf("%w: %v", ErrSpec, err)
		}
	}
	return nil
}

// Attempts is the spec's attempt bound.
func (s Spec) Attempts() int {
	if s.MaxAttempts > 0 {
		return s.MaxAttempts
	}
	return DefaultMaxAttempts
}

// label is "agent/task" for messages.
func label(parts ...string) string { return strings.Join(parts, "/") }
