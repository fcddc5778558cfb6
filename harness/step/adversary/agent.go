package adversary

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/modelmeter"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Agent is an adversary that is one of the coding agents: its adapter,
// executable and key, and the model meter every request of its goes
// through (its sandbox's only network endpoint).
type Agent struct {
	spec    agent.Spec
	adapter agent.Adapter
	want    task.AdversaryAgent
	exe     []string
	key     string
	red     *agent.Redactor
	meter   *modelmeter.Meter
}

// AgentInput is what starting the adversary's agent needs: the task's
// choice, the harness's environment (the key's variable), the agents
// directory ("" for the default), an executable instead of the installed
// release (tests), the adapter of each agent, and the clock.
type AgentInput struct {
	Want    task.AdversaryAgent
	Getenv  func(string) string
	Dir     string
	Command []string
	Adapter func(agent.Spec) agent.Adapter
	Clock   func() time.Time
}

// AgentError is why the adversary's agent cannot start, with the code
// that classes it (as Case's agent's would be).
type AgentError struct {
	Code ctoharness.BlockerCode
	Err  error
}

func (e *AgentError) Error() string { return "the task's adversary: " + e.Err.Error() }
func (e *AgentError) Unwrap() error { return e.Err }

// precheckTimeout bounds the check that the model endpoint is up.
const precheckTimeout = 2 * time.Second

// StartAgent checks the adversary's agent before Case starts (a known,
// installed agent, its key present, its endpoint up) and starts its model
// meter.
func StartAgent(ctx context.Context, in AgentInput) (*Agent, error) {
	bad := func(code ctoharness.BlockerCode, format string, args ...any) (*Agent, error) {
		return nil, &AgentError{Code: code, Err: fmt.Errorf(format, args...)}
	}
	spec, err := agent.Lookup(in.Want.Name)
	if err != nil {
		return bad(ctoharness.BlockAgentConfigInvalid, "%v", err)
	}
	u, err := url.Parse(in.Want.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad(ctoharness.BlockAgentConfigInvalid, "base_url %q is not an http(s) URL; give the endpoint the agent talks to (%s)", in.Want.BaseURL, spec.BaseURLShape)
	}
	a := &Agent{spec: spec, adapter: in.Adapter(spec), want: in.Want, key: in.Getenv(in.Want.APIKeyEnv)}
	if a.key == "" {
		return bad(ctoharness.BlockAgentConfigInvalid, "the variable %s named by api_key_env is not set in the harness's environment; export it with the API key", in.Want.APIKeyEnv)
	}
	if a.red, err = agent.NewRedactor(agent.Secret{Var: in.Want.APIKeyEnv, Value: a.key}); err != nil {
		return bad(ctoharness.BlockAgentConfigInvalid, "%v", err)
	}
	dir := in.Dir
	if dir == "" && len(in.Command) == 0 {
		if dir, err = agent.Dir("", in.Getenv); err != nil {
			return bad(ctoharness.BlockAgentNotInstalled, "%v", err)
		}
	}
	if a.exe, err = spec.Resolve(dir, in.Command); err != nil {
		return bad(ctoharness.BlockAgentNotInstalled, "%v", err)
	}
	if err := modelmeter.Precheck(ctx, u, precheckTimeout); err != nil {
		return bad(ctoharness.BlockModelEndpointUnreachable, "the model endpoint %s cannot be reached (%v); check base_url and that the provider is up", in.Want.BaseURL, err)
	}
	if a.meter, err = modelmeter.Start(modelmeter.Options{Upstream: u, Clock: in.Clock}); err != nil {
		return bad(ctoharness.BlockSandboxUnavailable, "the model meter cannot start: %v", err)
	}
	return a, nil
}

// Endpoint is the one HOST:PORT the adversary's sandbox may reach: its
// meter.
func (a *Agent) Endpoint() string { return a.meter.Addr() }

// Redactor removes the adversary's key from evidence.
func (a *Agent) Redactor() *agent.Redactor { return a.red }

// KeyVar names the variable of the key the evidence must never hold.
func (a *Agent) KeyVar() string { return a.want.APIKeyEnv }

// Close stops the meter (idempotent).
func (a *Agent) Close() {
	if a != nil && a.meter != nil {
		_ = a.meter.Close()
	}
}

// Launch is where the adversary's agent runs: its working directory (the
// tests directory), its private state root, the environment it starts
// from, what it is told, and whether the harness runs as root.
type Launch struct {
	WorkDir, State string
	BaseEnv        []string
	Brief          Brief
	Root           bool
}

// Command is the agent's command line, environment, and the directories
// and settings files to make first.
func (a *Agent) Command(l Launch) (agent.Command, error) {
	return a.adapter.Command(agent.Launch{Exe: a.exe, Prompt: Prompt(l.Brief), Model: a.want.Model, BaseURL: a.meter.BaseURL(), Key: a.key,
		Fixture: l.WorkDir, State: l.State, BaseEnv: l.BaseEnv, Root: l.Root})
}

// Record is the adversary agent's account for the report: who it was, the
// meter's usage (its cost estimated from price when known), and whether
// it is the same agent and model as Case (caseAgent, caseModel; "" when
// Case was not an agent).
func (a *Agent) Record(price *config.Price, caseAgent, caseModel string) (*ctoharness.AdversaryAgent, []byte) {
	u, lines := modelmeter.Account(a.meter.Requests(), 0, price)
	rec := &ctoharness.AdversaryAgent{Name: string(a.spec.Name), Version: a.spec.Version, Model: a.want.Model, Endpoint: a.want.BaseURL, Usage: u}
	if caseAgent == string(a.spec.Name) && caseModel == a.want.Model {
		rec.SameAsCase = true
		rec.Warning = fmt.Sprintf("the adversary is the same agent and model as Case (%s, %s): a test designer that shares the implementer's blind spots rejects fewer wrong changes; choose another agent or model for the adversary", caseAgent, caseModel)
	}
	return rec, a.red.Bytes(lines)
}

// Brief is what the adversary is told: the task, where the result and
// Case's claims are, the command its tests run with and its report.
type Brief struct {
	Task        string
	Checkout    string // the read-only result
	Claims      string // "" when Case gave none
	Diff        string // Case's diff, "" unless the task shows it
	TestCommand string
	TestResults task.TestResults
}

// Prompt is the harness's own prompt for an adversary agent: write tests
// that fail unless the task was done, into the working directory; report,
// never fix; no mocking of what the tests must exercise.
func Prompt(b Brief) string {
	var s strings.Builder
	s.WriteString("You are the adversary of a coding agent: it was given the task below, and you write tests that pass only if the task was really done.\n\nThe task:\n")
	s.WriteString(strings.TrimSpace(b.Task))
	fmt.Fprintf(&s, "\n\nThe agent's result is a read-only checkout at %s. ", b.Checkout)
	if b.Claims != "" {
		fmt.Fprintf(&s, "What the agent says its change does is in %s (JSON). ", b.Claims)
	}
	if b.Diff != "" {
		fmt.Fprintf(&s, "The agent's diff is in %s. ", b.Diff)
	}
	s.WriteString("\nWrite your test files in the current directory, at the paths they should have in the repository (they are laid over a fresh checkout at the same paths).")
	fmt.Fprintf(&s, "\nThey run with `%s`, which must write its report (%s) to %s.", b.TestCommand, b.TestResults.Format, b.TestResults.Path)
	s.WriteString("\nRules:")
	s.WriteString("\n- Only a test that fails on the code before the change counts: test what the task asks for, not what already works.")
	s.WriteString("\n- Do not mock or replace subprocesses, os.system, sockets or HTTP clients; exercise them.")
	s.WriteString("\n- Do not change the agent's result and do not fix anything: you only write tests.")
	s.WriteString("\n- Nothing outside the current directory is yours to write.")
	s.WriteString("\nWhen your tests are written, stop and say in one sentence what they check.")
	return s.String()
}
