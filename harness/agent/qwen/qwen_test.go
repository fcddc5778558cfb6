package qwen

import (
	"testing"

	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/agenttest"
)

// The translation of every recorded native stream of the pinned release.
func TestTranslateRecordedStreams(t *testing.T) {
	s, err := agent.Lookup(string(agent.QwenCode))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Scenarios(t, Adapter{Spec: s}, agent.QwenCode)
}

func TestCommand(t *testing.T) {
	s, _ := agent.Lookup(string(agent.QwenCode))
	c := agenttest.CommandFor(t, Adapter{Spec: s}, s, false)
	for _, want := range []string{"OPENAI_BASE_URL=http://127.0.0.1:1234/v1", "OPENAI_MODEL=m-1", "QWEN_HOME=/scratch/home/.agent/qwen-home",
		"QWEN_USAGE_STATISTICS_ENABLED=false", "QWEN_CODE_NO_RELAUNCH=true"} {
		if !agenttest.Has(c.Env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	if got := c.Argv[1:]; len(got) != 7 || got[0] != "PROMPT-TEXT" || got[2] != "stream-json" || got[4] != "yolo" || got[6] != "openai" {
		t.Errorf("argv %q", c.Argv)
	}
}
