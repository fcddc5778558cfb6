package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/claude"
	"github.com/cto-harness/cto-harness/harness/agent/codex"
	"github.com/cto-harness/cto-harness/harness/agent/gemini"
	"github.com/cto-harness/cto-harness/harness/agent/qwen"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/modelmeter"
	"github.com/cto-harness/cto-harness/harness/proc"
	"github.com/cto-harness/cto-harness/harness/task"
)

// AgentOptions select a supported coding agent as Case (on the real lane).
type AgentOptions struct {
	Name      string   // qwen-code, codex, claude-code or gemini-cli; "" runs no agent
	Model     string   // handed to the agent
	BaseURL   string   // the model endpoint, handed unchanged to the agent's base-URL setting
	APIKeyEnv string   // the harness variable that holds the API key
	Command   []string // the agent executable instead of the installed pinned release
	Dir       string   // the agents directory ("" resolves the default)
}

// AgentStream is the agent's native stream, kept verbatim (redacted, capped).
const AgentStream = "backend/agent.stream.jsonl"

// agentMaxLine bounds one native stream line; a longer line is cut, kept in
// the stream file and counted as malformed (not fatal).
const agentMaxLine = 4 << 20

// adapterFor maps a supported agent to its adapter.
func adapterFor(s agent.Spec) agent.Adapter {
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

// agentRun is one agent run's state, from the gate to the report.
type agentRun struct {
	spec     agent.Spec
	adapter  agent.Adapter
	exe      []string
	home     string // the pinned release's install directory; "" for a configured command
	key      string
	endpoint string // host:port of the base URL
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
	// the store holds it; dropKeyedStore removes the store before the
	// report is written.
	keyInResult bool
}

// modelWatch is what the model meter said while Case ran: the provider's
// failure, once, and the way to stop Case for it.
type modelWatch struct {
	mu   sync.Mutex
	stop *modelmeter.Stop
	kill func()
}

// failed records the meter's verdict and stops Case.
func (w *modelWatch) failed(s modelmeter.Stop) {
	w.mu.Lock()
	if w.stop == nil {
		w.stop = &s
	}
	kill := w.kill
	w.mu.Unlock()
	if kill != nil {
		kill()
	}
}

// stopWith arms the watch with the function that stops Case; a failure
// seen before it was armed stops Case at once.
func (w *modelWatch) stopWith(kill func()) {
	w.mu.Lock()
	w.kill = kill
	early := w.stop != nil
	w.mu.Unlock()
	if early {
		kill()
	}
}

func (w *modelWatch) verdict() *modelmeter.Stop {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stop
}

// modelPrecheck bounds the check of the model endpoint before Case starts.
const modelPrecheck = 2 * time.Second

// checkAgent runs at the gate: the agent must be known and installed, the
// request complete, the key present, the model endpoint reachable; a
// sandboxed agent needs a network path to its endpoint, which is the
// harness's model meter.
func (r *run) checkAgent(ctx context.Context) {
	o := r.o.Agent
	spec, err := agent.Lookup(o.Name)
	if err != nil {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockAgentConfigInvalid, Step: ctoharness.StepGate, Message: err.Error()})
		return
	}
	a := &agentRun{spec: spec, adapter: adapterFor(spec), reported: map[string]bool{}}
	r.Report.Agent = &ctoharness.AgentRecord{Name: string(spec.Name), Version: spec.Version, Model: o.Model, Endpoint: o.BaseURL,
		EgressAllowed: []string{}, Executable: []string{}, StreamPath: AgentStream, AttemptedEscapes: []string{},
		SecretEnv: []string{}, Notes: []string{}}
	if r.Report.Backend != ctoharness.BackendCase {
		err = gateBlock(ctoharness.BlockAgentConfigInvalid, "an agent runs as Case, and stage %d has no Case process; use stage 2 or 3", r.o.Stage)
	}
	var u *url.URL
	if err == nil {
		u, err = r.agentRequest(a)
	}
	if err == nil {
		err = r.resolveAgent(a)
	}
	if err == nil {
		err = r.meterAgent(ctx, a, u)
	}
	if err != nil {
		r.Block(ctoharness.AsBlocker(err, ctoharness.StepGate))
		return
	}
	r.Report.Agent.EgressAllowed = []string{a.endpoint}
	r.agent = a
}

func gateBlock(code ctoharness.BlockerCode, format string, args ...any) error {
	return ctoharness.Block(code, ctoharness.StepGate, nil, format, args...)
}

// agentRequest checks the request is complete: the model, an http(s) base
// URL and a key variable that is set, whose value every record redacts.
func (r *run) agentRequest(a *agentRun) (*url.URL, error) {
	o, spec := r.o.Agent, a.spec
	var missing []string
	for _, f := range []struct{ flag, v string }{{"--model", o.Model}, {"--base-url", o.BaseURL}, {"--api-key-env", o.APIKeyEnv}} {
		if f.v == "" {
			missing = append(missing, f.flag)
		}
	}
	if len(missing) > 0 {
		return nil, gateBlock(ctoharness.BlockAgentConfigInvalid, "agent %s needs %s", spec.Name, strings.Join(missing, ", "))
	}
	if r.Report.Agent.Model == "" {
		r.Report.Agent.Model = o.Model
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, gateBlock(ctoharness.BlockAgentConfigInvalid, "--base-url %q is not an http(s) URL; give the endpoint the agent talks to (%s)", o.BaseURL, spec.BaseURLShape)
	}
	a.endpoint = hostPort(u)
	a.key = r.o.Getenv(o.APIKeyEnv)
	if a.key == "" {
		return nil, gateBlock(ctoharness.BlockAgentConfigInvalid, "the variable %s named by --api-key-env is not set in the harness's environment; export it with the API key", o.APIKeyEnv)
	}
	if a.red, err = agent.NewRedactor(agent.Secret{Var: o.APIKeyEnv, Value: a.key}); err != nil {
		return nil, gateBlock(ctoharness.BlockAgentConfigInvalid, "%v", err)
	}
	return u, nil
}

// resolveAgent finds the agent's executable: the configured command, or
// the pinned release installed under the agents directory.
func (r *run) resolveAgent(a *agentRun) error {
	o, spec := r.o.Agent, a.spec
	dir := o.Dir
	var err error
	if dir == "" && len(o.Command) == 0 {
		if dir, err = agent.Dir("", r.o.Getenv); err != nil {
			return gateBlock(ctoharness.BlockAgentNotInstalled, "%v", err)
		}
	}
	if a.exe, err = spec.Resolve(dir, o.Command); err != nil {
		return gateBlock(ctoharness.BlockAgentNotInstalled, "%v", err)
	}
	if dir != "" && len(o.Command) == 0 {
		a.home = spec.InstallDir(dir)
	}
	r.Report.Agent.Executable = a.exe
	r.Report.Agent.SecretEnv = []string{spec.KeyVar}
	return nil
}

// meterAgent checks the endpoint before anything is copied or started (a
// provider that cannot be reached would only be found out by the agent
// retrying until its timeout), and starts the model meter the agent talks
// to instead. Sandboxed, Case's network namespace stays empty but for the
// forwarder's listener for the meter: the one endpoint an agent gets.
func (r *run) meterAgent(ctx context.Context, a *agentRun, u *url.URL) error {
	o := r.o.Agent
	if err := modelmeter.Precheck(ctx, u, modelPrecheck); err != nil {
		return gateBlock(ctoharness.BlockModelEndpointUnreachable, "the model endpoint %s cannot be reached (%v); Case was not started. Check --base-url and that the provider is up", o.BaseURL, err)
	}
	var stall time.Duration
	if c := r.o.Config.Agent; c != nil {
		stall = time.Duration(c.StallSeconds) * time.Second
	}
	meter, err := modelmeter.Start(modelmeter.Options{Upstream: u, Clock: r.o.Clock, OnStop: a.model.failed, StallAfter: stall})
	if err != nil {
		return gateBlock(ctoharness.BlockSandboxUnavailable, "the model meter cannot start: %v", err)
	}
	a.meter = meter
	a.endpoint = meter.Addr()
	r.Report.Agent.Notes = append(r.Report.Agent.Notes, fmt.Sprintf("the agent talks to the harness's model meter at %s, which relays every request to %s unchanged and records its status, latency and usage", meter.BaseURL(), o.BaseURL))
	if !r.o.Unsandboxed {
		r.o.AllowNetCase = append(append([]string(nil), r.o.AllowNetCase...), a.endpoint)
		origin := map[string]string{a.endpoint: "agent"}
		for k, v := range r.o.AllowNetOrigin {
			if k != a.endpoint {
				origin[k] = v
			}
		}
		r.o.AllowNetOrigin = origin
	}
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

// command builds the agent's command line and environment, and makes its
// state directories and settings files inside Case's scratch.
func (a *agentRun) command(r *run, baseEnv []string) ([]string, []string, error) {
	state := filepath.Join(r.scratch, "home", ".cto-harness-agent")
	l := agent.Launch{Exe: a.exe, Prompt: agent.Prompt(r.contract.Task, r.contract.AllowedPaths, r.contract.ForbiddenActions),
		Model: r.o.Agent.Model, BaseURL: a.meter.BaseURL(), Key: a.key, Fixture: r.fixture, State: state,
		BaseEnv: baseEnv, Root: os.Geteuid() == 0}
	cmd, err := a.adapter.Command(l)
	if err != nil {
		return nil, nil, err
	}
	if err := prepareAgent(r.Trace, state, cmd); err != nil {
		return nil, nil, err
	}
	r.Report.Agent.Notes = append(r.Report.Agent.Notes, cmd.Notes...)
	sort.Strings(cmd.Env)
	return cmd.Argv, cmd.Env, nil
}

// prepareAgent makes an agent's state directory and the directories and
// settings files its adapter asks for, all inside the scratch it runs in.
func prepareAgent(tr ctoharness.Tracer, state string, cmd agent.Command) error {
	for _, d := range append([]string{state}, cmd.Dirs...) {
		tr.Trace(ctoharness.TraceMkdir, d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	for _, f := range cmd.Files {
		tr.Trace(ctoharness.TraceWrite, f.Path)
		if err := os.WriteFile(f.Path, f.Data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

// wire makes the backend read the agent's native stream: every line goes
// verbatim to the stream file and through the translator; case.finished is
// held back until the files changed by shell commands have been found.
func (a *agentRun) wire(r *run, in *backend.Input) error {
	f, err := r.Dir.OpenAppend(AgentStream)
	if err != nil {
		return err
	}
	a.stream = proc.NewCappedFile(f, proc.DefaultLogCap)
	a.tr = a.adapter.NewTranslator(r.fixture)
	if a.before, err = agent.Take(r.fixture); err != nil {
		return fmt.Errorf("snapshot the fixture before the agent: %w", err)
	}
	in.MaxLine = agentMaxLine
	in.Translate = func(line []byte) []backend.CaseEvent {
		a.lines++
		a.stream.Write(append(append([]byte(nil), line...), '\n'))
		var out []backend.CaseEvent
		for _, ev := range a.tr.Line(line) {
			if m, _ := ev.Data["model"].(string); ev.Type == ctoharness.EvCaseStarted && m == "" {
				ev.Data["model"] = r.o.Agent.Model
			}
			ce := a.caseEvent(ev)
			if ev.Type == ctoharness.EvCaseFinished {
				a.finished = &ce
				continue
			}
			if p, _ := ev.Data["path"].(string); ev.Type == ctoharness.EvCaseFileChanged {
				a.reported[p] = true
			}
			out = append(out, ce)
		}
		return out
	}
	in.AfterExit = func() []backend.CaseEvent {
		var out []backend.CaseEvent
		after, err := agent.Take(r.fixture)
		if err != nil {
			out = append(out, a.caseEvent(agent.Event{Type: ctoharness.EvCaseLog,
				Data: map[string]any{"message": "the fixture could not be rescanned after the agent: " + err.Error()}}))
		}
		a.changed = agent.Changed(a.before, after)
		for _, p := range a.changed {
			if !a.reported[p] {
				out = append(out, a.caseEvent(agent.Event{Type: ctoharness.EvCaseFileChanged,
					Data: map[string]any{"path": p, "source": "fixture_scan"}}))
			}
		}
		if a.finished != nil {
			out = append(out, *a.finished)
		}
		return out
	}
	return nil
}

// caseEvent encodes a translated event as a Case event line, redacted.
func (a *agentRun) caseEvent(ev agent.Event) backend.CaseEvent {
	d := map[string]any{}
	for k, v := range ev.Data {
		d[k] = v
	}
	d["type"] = string(ev.Type)
	raw, _ := json.Marshal(d)
	return backend.CaseEvent{Type: ev.Type, Raw: a.red.Bytes(raw)}
}

// ModelRequests lists every model request the meter relayed, one JSON line each.
const ModelRequests = "backend/model-requests.jsonl"

// closeMeter stops the model meter (idempotent): the agent is gone, or never started.
func (a *agentRun) closeMeter() {
	if a != nil && a.meter != nil {
		_ = a.meter.Close()
	}
}

// usage is the meter's account of the run: every request in order,
// summed, with the cost the agent reported, or one estimated from the
// config's prices, or none.
func (a *agentRun) usage(ctx context.Context, r *run, rec *ctoharness.AgentRecord) {
	reported := 0.0
	if rec.Finished {
		reported = rec.ReportedCostUSD
	}
	u, lines := modelmeter.Account(a.meter.Requests(), reported, r.price(rec.Model))
	rec.Usage = u
	if err := r.Dir.WriteFile(ctx, ModelRequests, a.red.Bytes(lines)); err != nil {
		r.BlockWrite(err, ctoharness.StepCase)
	}
}

// price is the config's price of model, nil when it has none.
func (r *run) price(model string) *config.Price {
	if r.o.Config.Agent == nil {
		return nil
	}
	if p, ok := r.o.Config.Agent.Prices[model]; ok {
		return &p
	}
	return nil
}

// record closes the stream file and copies what the stream said into the report.
func (a *agentRun) record(rec *ctoharness.AgentRecord) error {
	err := a.stream.Close()
	res := a.tr.Result()
	if res.Version != "" {
		rec.Version = res.Version
	}
	if res.Model != "" {
		rec.Model = res.Model
	}
	rec.NativeLines = a.lines
	rec.UnknownLines = res.Unknown + res.Malformed
	rec.Finished = res.Finished
	rec.ResultError = a.red.String(res.ErrorMessage)
	rec.Turns = res.Turns
	rec.InputTokens, rec.OutputTokens, rec.CachedTokens = res.InputTokens, res.OutputTokens, res.CachedTokens
	rec.APITimeMs = res.APIMs
	rec.ReportedCostUSD = res.CostUSD
	rec.Commands = res.Commands
	rec.FileWrites = res.FileWrites
	rec.AttemptedEscapes = append([]string{}, res.Escapes...)
	return err
}

// stopBlocker is the blocker of a run whose model provider the meter
// judged failed (Case was stopped for it), with the code that names the
// failure; nil when the provider did not fail.
func (a *agentRun) stopBlocker(baseURL string) *ctoharness.Blocker {
	st := a.model.verdict()
	if st == nil {
		return nil
	}
	code := map[string]ctoharness.BlockerCode{modelmeter.StopAPIError: ctoharness.BlockModelAPIError,
		modelmeter.StopRateLimited: ctoharness.BlockModelRateLimited, modelmeter.StopStalled: ctoharness.BlockModelStalled}[st.Reason]
	if code == "" {
		code = ctoharness.BlockModelAPIError
	}
	return &ctoharness.Blocker{Code: code, Step: ctoharness.StepCase,
		Message: fmt.Sprintf("%s was stopped: %s at %s; the per-request record is in report.json (agent.usage) and %s",
			a.spec.Name, a.red.String(st.Message), baseURL, ModelRequests)}
}

// errorBlocker is the blocker of a run whose stream reported a model or API
// error, whatever the exit status (agents differ: some exit 0, one exits
// 144); nil when it reported none.
func (a *agentRun) errorBlocker() *ctoharness.Blocker {
	res := a.tr.Result()
	if !res.IsError {
		return nil
	}
	return &ctoharness.Blocker{Code: ctoharness.BlockAgentModelError, Step: ctoharness.StepCase,
		Message: fmt.Sprintf("%s reported a model or API error: %s; see %s", a.spec.Name, a.red.String(res.ErrorMessage), AgentStream)}
}

// afterCollect judges what the agent left: the key written into the
// fixture, an attempted write outside it, or no change at all.
func (r *run) agentAfterCollect() {
	a := r.agent
	if a == nil || a.tr == nil {
		return
	}
	paths := map[string]bool{}
	for _, p := range a.changed {
		paths[p] = true
	}
	for _, c := range r.Report.ChangedFiles {
		if name, ok := c.Name(); ok {
			paths[name] = true
		}
	}
	list := make([]string, 0, len(paths))
	for p := range paths {
		list = append(list, p)
	}
	sort.Strings(list)
	holding, err := a.red.Holding(r.fixture, list)
	if err != nil {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepCollect,
			Message: "the changed files could not be checked for the API key: " + err.Error()})
	}
	if len(holding) > 0 {
		r.agent.keyInResult = true
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepCollect,
			Message: fmt.Sprintf("the agent wrote the value of %s into the fixture (%s); it is redacted from every evidence file and %s, and the harness's store of the result (%s), whose objects hold it, is removed before the report is written, so the change cannot be re-derived: rotate the key",
				r.o.Agent.APIKeyEnv, strings.Join(holding, ", "), workFate(r.o.KeepWork, r.Report.RuntimeWorkspaceRoot), r.Dir.Path(evidence.StoreDir))})
	}
	if esc := a.tr.Result().Escapes; len(esc) > 0 {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockDisallowedChange, Step: ctoharness.StepCollect,
			Message: "the agent tried to write outside the fixture: " + strings.Join(esc, ", ")})
	}
	if r.OK() && len(r.Report.ChangedFiles) == 0 {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockAgentNoChange, Step: ctoharness.StepCollect,
			Message: fmt.Sprintf("%s finished without changing anything in the fixture; see %s for what it did", a.spec.Name, AgentStream)})
	}
}

// workFate says what becomes of the workspace, for messages.
// dropKeyedStore removes the run's store when the agent wrote its key into
// the result: git objects are compressed and cannot be redacted, and a
// blocked run validates without its store (its patch.diff, redacted, stays).
// A store that cannot be removed is said in the blocker.
func (r *run) dropKeyedStore() {
	if r.agent == nil || !r.agent.keyInResult {
		return
	}
	store := r.Dir.Path(evidence.StoreDir)
	r.Trace.Trace(ctoharness.TraceRemove, store)
	if err := RemoveTree(store); err != nil {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepReport,
			Message: fmt.Sprintf("the store %s holds the agent's key and could not be removed (%v): delete it, and rotate the key", store, err)})
	}
}

func workFate(keep bool, root string) string {
	if keep {
		return "the kept workspace " + root + " is scrubbed of it"
	}
	return "the workspace " + root + " is removed at the end of the run"
}

// redactData redacts an event's data when an agent key is in play.
func (r *run) redactData(data any) any {
	if r.agent == nil || r.agent.red == nil {
		return data
	}
	raw, err := json.Marshal(data)
	if err != nil || !r.agent.red.Contains(raw) {
		return data
	}
	return json.RawMessage(r.agent.red.Bytes(raw))
}

func (r *run) redactString(s string) string {
	if r.agent == nil {
		return s
	}
	return r.agent.red.String(s)
}

// secret is one key the evidence must not hold: its variable and its
// redactor (Case's agent's, the adversary agent's).
type secret struct {
	keyVar string
	red    *agent.Redactor
}

// secrets are the run's keys.
func (r *run) secrets() []secret {
	var out []secret
	if r.agent != nil && r.agent.red != nil {
		out = append(out, secret{r.o.Agent.APIKeyEnv, r.agent.red})
	}
	if r.adv != nil {
		out = append(out, secret{r.adv.KeyVar(), r.adv.Redactor()})
	}
	return out
}

// sweepSecrets redacts the keys from every evidence file written so far,
// before any digest is computed. The hash-chained event log cannot be
// rewritten (events are redacted as they are written); if it holds a key
// anyway the run is blocked.
func (r *run) sweepSecrets(names ...string) {
	secrets := r.secrets()
	if len(secrets) == 0 {
		return
	}
	if len(names) == 0 {
		all, err := evidence.ListArtifacts(r.Dir.Root())
		if err != nil {
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepReport,
				Message: "the evidence could not be listed to redact the API key: " + err.Error()})
			return
		}
		names = all
	}
	for _, sec := range secrets {
		for _, n := range names {
			p := r.Dir.Path(n)
			if n == evidence.EventsFile {
				if data, err := os.ReadFile(p); err == nil && sec.red.Contains(data) {
					r.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepReport,
						Message: "the event log holds the value of " + sec.keyVar + " and cannot be rewritten without breaking its hash chain"})
				}
				continue
			}
			if _, err := sec.red.File(p); err != nil {
				r.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepReport,
					Message: fmt.Sprintf("%s could not be redacted: %v", n, err)})
			}
		}
	}
}

// redactReport redacts the report itself (inline output, messages).
func (r *run) redactReport() {
	for _, sec := range r.secrets() {
		raw, err := json.Marshal(r.Report)
		if err != nil || !sec.red.Contains(raw) {
			continue
		}
		var clean ctoharness.Report
		if err := json.Unmarshal(sec.red.Bytes(raw), &clean); err == nil {
			*r.Report = clean
		}
	}
}

// mergeKeys adds keys to a sorted-unique list.
func mergeKeys(have, add []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range append(append([]string{}, have...), add...) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// agentAddressSpace is the address-space limit of an agent run unless the
// task sets one: Node reserves large stretches of virtual memory for
// WebAssembly (gemini-cli's HTTP parser fails to start under a 32
// GiB), while what it actually uses stays small.
const agentAddressSpace = 1 << 40

// agentLimits raises the default address-space limit for an agent run; a
// limit the task spec sets is kept as written.
func (r *run) agentLimits() {
	if r.agent == nil {
		return
	}
	l := task.SpecLimits{}
	if r.spec.Limits != nil {
		l = *r.spec.Limits
	}
	if l.AddressSpaceBytes == 0 {
		l.AddressSpaceBytes = agentAddressSpace
		r.spec.Limits = &l
	}
}

// planAgent is the dry run's view of an agent: the command line and
// environment keys it would get (the key itself stands as its redaction
// marker), or the gate's refusal.
func planAgent(o Options, c task.Contract, scratch string, env []string, plan *DryRun) ([]string, []string) {
	refuse := func(code ctoharness.BlockerCode, err error) ([]string, []string) {
		plan.Blockers = append(plan.Blockers, ctoharness.Blocker{Code: code, Step: ctoharness.StepGate, Message: err.Error()})
		return []string{}, env
	}
	spec, err := agent.Lookup(o.Agent.Name)
	if err != nil {
		return refuse(ctoharness.BlockAgentConfigInvalid, err)
	}
	dir := o.Agent.Dir
	if dir == "" && len(o.Agent.Command) == 0 {
		if dir, err = agent.Dir("", o.Getenv); err != nil {
			return refuse(ctoharness.BlockAgentNotInstalled, err)
		}
	}
	exe, err := spec.Resolve(dir, o.Agent.Command)
	if err != nil {
		return refuse(ctoharness.BlockAgentNotInstalled, err)
	}
	if o.Agent.APIKeyEnv == "" || o.Getenv(o.Agent.APIKeyEnv) == "" {
		return refuse(ctoharness.BlockAgentConfigInvalid, fmt.Errorf("the variable named by --api-key-env (%q) is not set", o.Agent.APIKeyEnv))
	}
	cmd, err := adapterFor(spec).Command(agent.Launch{Exe: exe, Prompt: agent.Prompt(c.Task, c.AllowedPaths, c.ForbiddenActions),
		Model: o.Agent.Model, BaseURL: o.Agent.BaseURL, Key: agent.Marker(o.Agent.APIKeyEnv), Fixture: c.FixturePath,
		State: filepath.Join(scratch, "home", ".cto-harness-agent"), BaseEnv: env, Root: os.Geteuid() == 0})
	if err != nil {
		return refuse(ctoharness.BlockAgentConfigInvalid, err)
	}
	return cmd.Argv, cmd.Env
}

// ownPaths are the agent's own executables for the exec watch: its install
// directory and the program it is started as. What they run is counted;
// they themselves are the agent, not its commands.
func (a *agentRun) ownPaths() []string {
	var out []string
	if a.home != "" {
		out = append(out, a.home)
	}
	if len(a.exe) > 0 && filepath.IsAbs(a.exe[0]) {
		out = append(out, a.exe[0])
	}
	return out
}

// redactor hides the agents' keys in what the run's sink writes.
type redactor struct{ r *run }

func (x redactor) Data(v any) any         { return x.r.redactData(v) }
func (x redactor) String(s string) string { return x.r.redactString(s) }
