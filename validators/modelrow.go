package validators

import (
	"fmt"
	"net"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/config"
)

// modelKeyVar holds the model API key a model row's agent is given.
const (
	modelKeyVar = "CTO_MATRIX_MODEL_KEY"
	modelKey    = "sk-matrix-0123456789abcdef"
)

// modelScripts are the scripted model server's failures, by row setting.
var modelScripts = map[string][]modelserver.Turn{
	"api-error":           {{Action: modelserver.ActionError, Status: 500}},
	"rate-limited":        {{Action: modelserver.ActionError, Status: 429}},
	"rate-limit-recovers": {{Action: modelserver.ActionText, Text: "Go ahead.", FailFirst: 2, FailStatus: 429}},
	"stalled":             {{Action: modelserver.ActionStall}},
}

// modelRow is a row's model provider: the scripted model server, or a
// loopback port nothing listens on.
type modelRow struct {
	srv *modelserver.Server
	url string
}

// startModel starts what the row's Model setting asks for (nothing when
// it is empty).
func startModel(st fixtures.Setup) (*modelRow, error) {
	if st.Model == "" {
		return nil, nil
	}
	if st.Model == "down" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		addr := ln.Addr().String()
		ln.Close()
		return &modelRow{url: "http://" + addr + "/v1"}, nil
	}
	turns, ok := modelScripts[st.Model]
	if !ok {
		return nil, fmt.Errorf("unknown model setting %q (want api-error, rate-limited, rate-limit-recovers, stalled or down)", st.Model)
	}
	srv, err := modelserver.Start(modelserver.Options{Script: modelserver.Script{Turns: turns}}, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &modelRow{srv: srv, url: srv.URL() + "/v1"}, nil
}

func (m *modelRow) close() {
	if m != nil && m.srv != nil {
		_ = m.srv.Close()
	}
}

// apply makes the run an agent run against the row's provider: the fake
// Case's stand-in agent on the real lane, started as qwen-code.
func (m *modelRow) apply(st fixtures.Setup, o *harness.Options) {
	if m == nil {
		return
	}
	o.Lane = ctoharness.LaneReal
	o.Scenario = ""
	o.Agent = harness.AgentOptions{Name: string(agent.QwenCode), Model: "scripted-model", BaseURL: m.url, APIKeyEnv: modelKeyVar,
		Command: []string{o.SelfExe, backend.FakeSubcommand, fakecase.AgentScenario}}
	get := o.Getenv
	o.Getenv = func(k string) string {
		if k == modelKeyVar {
			return modelKey
		}
		return get(k)
	}
	if st.ModelStallSeconds > 0 {
		o.Config.Agent = &config.Agent{Name: string(agent.QwenCode), StallSeconds: st.ModelStallSeconds}
	}
}
