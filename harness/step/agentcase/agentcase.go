// Package agentcase is a supported coding agent running as Case: the gate's
// check of the request (agent known and installed, key present, endpoint
// up) and the model meter the agent talks to instead of its provider, its
// command line and state, the reading of its native stream, its account
// once it has ended (record, usage, the model's failures), what it left in
// the fixture, and the redaction of its key from every record. The
// pipeline makes an Agent at the gate and hands each method what that step
// knows; the Agent owns the rest.
package agentcase

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/claude"
	"github.com/cto-harness/cto-harness/harness/agent/codex"
	"github.com/cto-harness/cto-harness/harness/agent/gemini"
	"github.com/cto-harness/cto-harness/harness/agent/qwen"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/modelmeter"
	"github.com/cto-harness/cto-harness/harness/proc"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Options select a supported coding agent as Case (on the real lane).
type Options struct {
	Name      string   // qwen-code, codex, claude-code or gemini-cli; "" runs no agent
	Model     string   // handed to the agent
	BaseURL   string   // the model endpoint, handed unchanged to the agent's base-URL setting
	APIKeyEnv string   // the harness variable that holds the API key
	Command   []string // the agent executable instead of the installed pinned release
	Dir       string   // the agents directory ("" resolves the default)
}

// Stream is the agent's native stream, kept verbatim (redacted, capped).
const Stream = "backend/agent.stream.jsonl"

// ModelRequests lists every model request the meter relayed, one JSON line each.
const ModelRequests = "backend/model-requests.jsonl"

// maxLine bounds one native stream line; a longer line is cut, kept in
// the stream file and counted as malformed (not fatal).
const maxLine = 4 << 20

// AdapterFor maps a supported agent to its adapter (nil for none).
func AdapterFor(s agent.Spec) agent.Adapter {
	switch s.Name {
	case agent.QwenCode:
		return qwen.Adapter{Spec: s}
	case agent.Codex:
		return codex.Adapter{Spec: s}
	case agent.ClaudeCode:
		return claude.Adapter{Spec: s}
	case agent.GeminiCLI:
		return gemini.Adapter{Spec: s}
	}
	return nil
}

// Input is what the gate knows of the agent run: the request, whether the
// stage has a Case process at all, the config's agent settings (stall
// timeout, prices), the harness's environment and clock, Case's scratch
// (the agent's state goes beneath it) and whether the workspace is kept.
type Input struct {
	Options  Options
	Stage    int
	HasCase  bool
	Settings *config.Agent
	Getenv   func(string) string
	Clock    func() time.Time
	Scratch  string
	KeepWork bool
}

// Agent is one agent run's state, from the gate to the report.
type Agent struct {
	s        *runsink.Sink
	in       Input
	spec     agent.Spec
	adapter  agent.Adapter
	exe      []string
	home     string // the pinned release's install directory; "" for a configured command
	key      string
	endpoint string // host:port of the meter the agent talks to
	red      *agent.Redactor
	tr       agent.Translator
	before   agent.Snapshot
	changed  []string // fixture paths changed while the agent ran (ignored files included)
	reported map[string]bool
	finished *backend.CaseEvent
	stream   *proc.CappedFile
	lines    int
	meter    *modelmeter.Meter // the agent's model traffic goes through it
	model    modelWatch
	// keyInResult: the agent wrote its key into a file of the result, so
	// the store holds it; DropKeyedStore removes the store before the
	// report is written.
	keyInResult bool
}

// modelPrecheck bounds the check of the model endpoint before Case starts.
const modelPrecheck = 2 * time.Second

// Check runs at the gate: the agent must be known and installed, the
// request complete, the key present, the model endpoint reachable; a
// sandboxed agent needs a network path to its endpoint, which is the
// harness's model meter (Endpoint). It records the report's agent, blocks
// the run through s when the agent cannot run, and returns nil then.
func Check(ctx context.Context, s *runsink.Sink, in Input) *Agent {
	o := in.Options
	spec, err := agent.Lookup(o.Name)
	if err != nil {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockAgentConfigInvalid, Step: ctoharness.StepGate, Message: err.Error()})
		return nil
	}
	a := &Agent{s: s, in: in, spec: spec, adapter: AdapterFor(spec), reported: map[string]bool{}}
	rec := &ctoharness.AgentRecord{Name: string(spec.Name), Version: spec.Version, Model: o.Model, Endpoint: o.BaseURL,
		EgressAllowed: []string{}, Executable: []string{}, StreamPath: Stream, AttemptedEscapes: []string{},
		SecretEnv: []string{}, Notes: []string{}}
	s.Report.Agent = rec
	if !in.HasCase {
		err = gateBlock(ctoharness.BlockAgentConfigInvalid, "an agent runs as Case, and stage %d has no Case process; use stage 2 or 3", in.Stage)
	}
	var u *url.URL
	if err == nil {
		u, err = a.request(rec)
	}
	if err == nil {
		err = a.resolve(rec)
	}
	if err == nil {
		err = a.startMeter(ctx, rec, u)
	}
	if err != nil {
		s.Block(ctoharness.AsBlocker(err, ctoharness.StepGate))
		return nil
	}
	rec.EgressAllowed = []string{a.endpoint}
	return a
}

func gateBlock(code ctoharness.BlockerCode, format string, args ...any) error {
	return ctoharness.Block(code, ctoharness.StepGate, nil, format, args...)
}

// request checks the request is complete: the model, an http(s) base URL
// and a key variable that is set, whose value every record redacts.
func (a *Agent) request(rec *ctoharness.AgentRecord) (*url.URL, error) {
	o, spec := a.in.Options, a.spec
	var missing []string
	for _, f := range []struct{ flag, v string }{{"--model", o.Model}, {"--base-url", o.BaseURL}, {"--api-key-env", o.APIKeyEnv}} {
		if f.v == "" {
			missing = append(missing, f.flag)
		}
	}
	if len(missing) > 0 {
		return nil, gateBlock(ctoharness.BlockAgentConfigInvalid, "agent %s needs %s", spec.Name, strings.Join(missing, ", "))
	}
	if rec.Model == "" {
		rec.Model = o.Model
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, gateBlock(ctoharness.BlockAgentConfigInvalid, "--base-url %q is not an http(s) URL; give the endpoint the agent talks to (%s)", o.BaseURL, spec.BaseURLShape)
	}
	a.endpoint = hostPort(u)
	a.key = a.in.Getenv(o.APIKeyEnv)
	if a.key == "" {
		return nil, gateBlock(ctoharness.BlockAgentConfigInvalid, "the variable %s named by --api-key-env is not set in the harness's environment; export it with the API key", o.APIKeyEnv)
	}
	if a.red, err = agent.NewRedactor(agent.Secret{Var: o.APIKeyEnv, Value: a.key}); err != nil {
		return nil, gateBlock(ctoharness.BlockAgentConfigInvalid, "%v", err)
	}
	return u, nil
}

// resolve finds the agent's executable: the configured command, or the
// pinned release installed under the agents directory.
func (a *Agent) resolve(rec *ctoharness.AgentRecord) error {
	o, spec := a.in.Options, a.spec
	dir := o.Dir
	var err error
	if dir == "" && len(o.Command) == 0 {
		if dir, err = agent.Dir("", a.in.Getenv); err != nil {
			return gateBlock(ctoharness.BlockAgentNotInstalled, "%v", err)
		}
	}
	if a.exe, err = spec.Resolve(dir, o.Command); err != nil {
		return gateBlock(ctoharness.BlockAgentNotInstalled, "%v", err)
	}
	if dir != "" && len(o.Command) == 0 {
		a.home = spec.InstallDir(dir)
	}
	rec.Executable = a.exe
	rec.SecretEnv = []string{spec.KeyVar}
	return nil
}

// startMeter checks the endpoint before anything is copied or started (a
// provider that cannot be reached would only be found out by the agent
// retrying until its timeout), and starts the model meter the agent talks
// to instead. Sandboxed, Case's network namespace stays empty but for the
// forwarder's listener for the meter: the one endpoint an agent gets.
func (a *Agent) startMeter(ctx context.Context, rec *ctoharness.AgentRecord, u *url.URL) error {
	o := a.in.Options
	if err := modelmeter.Precheck(ctx, u, modelPrecheck); err != nil {
		return gateBlock(ctoharness.BlockModelEndpointUnreachable, "the model endpoint %s cannot be reached (%v); Case was not started. Check --base-url and that the provider is up", o.BaseURL, err)
	}
	var stall time.Duration
	if c := a.in.Settings; c != nil {
		stall = time.Duration(c.StallSeconds) * time.Second
	}
	meter, err := modelmeter.Start(modelmeter.Options{Upstream: u, Clock: a.in.Clock, OnStop: a.model.failed, StallAfter: stall})
	if err != nil {
		return gateBlock(ctoharness.BlockSandboxUnavailable, "the model meter cannot start: %v", err)
	}
	a.meter = meter
	a.endpoint = meter.Addr()
	rec.Notes = append(rec.Notes, fmt.Sprintf("the agent talks to the harness's model meter at %s, which relays every request to %s unchanged and records its status, latency and usage", meter.BaseURL(), o.BaseURL))
	return nil
}

// hostPort is the URL's host:port, with the scheme's default port.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Endpoint is the one HOST:PORT a sandboxed agent may reach: its meter.
func (a *Agent) Endpoint() string { return a.endpoint }

// Exe is the agent's command: it is Case's.
func (a *Agent) Exe() []string { return a.exe }

// OwnPaths are the agent's own executables for the exec watch: its install
// directory and the program it is started as. What they run is counted;
// they themselves are the agent, not its commands.
func (a *Agent) OwnPaths() []string {
	var out []string
	if a.home != "" {
		out = append(out, a.home)
	}
	if len(a.exe) > 0 && filepath.IsAbs(a.exe[0]) {
		out = append(out, a.exe[0])
	}
	return out
}

// addressSpace is the address-space limit of an agent run unless the task
// sets one: Node reserves large stretches of virtual memory for
// WebAssembly (gemini-cli's HTTP parser fails to start under a 32 GiB),
// while what it actually uses stays small.
const addressSpace = 1 << 40

// Limits are the task's limits for an agent run: the default address-space
// limit raised, a limit the task spec sets kept as written (l itself is
// returned then).
func Limits(l *task.SpecLimits) *task.SpecLimits {
	out := task.SpecLimits{}
	if l != nil {
		out = *l
	}
	if out.AddressSpaceBytes != 0 {
		return l
	}
	out.AddressSpaceBytes = addressSpace
	return &out
}
