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

// With a model it has no metadata for, codex offers no write tool: the write
// arrives as a shell command (the fixture rescan reports the file), and the
// stream's leading non-fatal error item does not make the run an error.
func TestTranslateWriteWithUnknownModel(t *testing.T) {
	s, _ := agent.Lookup(string(agent.Codex))
	evs, res, ok := agenttest.Replay(t, Adapter{Spec: s}, agent.Codex, "write-unknown-model")
	if !ok {
		t.Skip("no codex-write-unknown-model recording")
	}
	files := 0
	for _, e := range evs {
		if e.Type == "case.file_changed" {
			files++
		}
	}
	if res.Commands != 1 || files != 0 || res.IsError || !res.Finished || res.Unknown != 0 {
		t.Fatalf("result %+v, %d file events", res, files)
	}
}
