package codex

import (
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/agenttest"
)

// The translation of every recorded native stream of the pinned release.
func TestTranslateRecordedStreams(t *testing.T) {
	s, err := agent.Lookup(string(agent.Codex))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Scenarios(t, Adapter{Spec: s}, agent.Codex)
}

func TestCommand(t *testing.T) {
	s, _ := agent.Lookup(string(agent.Codex))
	c := agenttest.CommandFor(t, Adapter{Spec: s}, s, false)
	joined := strings.Join(c.Argv, " ")
	for _, want := range []string{"exec --json -m m-1", "model_provider=cto_harness",
		`base_url="http://127.0.0.1:1234/v1",env_key="OPENAI_API_KEY",wire_api="responses"`, "analytics.enabled=false", "--disable plugins", "-s danger-full-access"} {
		if !strings.Contains(joined, want) {
			t.Errorf("argv lacks %s: %s", want, joined)
		}
	}
	if !agenttest.Has(c.Env, "CODEX_HOME=/scratch/home/.agent/codex-home") || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "sandbox was replaced") {
		t.Errorf("env %q notes %q", c.Env, c.Notes)
	}
}
