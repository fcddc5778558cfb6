package harness

import (
	"context"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
)

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
