package claude

import (
	"testing"

	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/agenttest"
)

// The translation of every recorded native stream of the pinned release.
func TestTranslateRecordedStreams(t *testing.T) {
	s, err := agent.Lookup(string(agent.ClaudeCode))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Scenarios(t, Adapter{Spec: s}, agent.ClaudeCode)
}

func TestCommand(t *testing.T) {
	s, _ := agent.Lookup(string(agent.ClaudeCode))
	c := agenttest.CommandFor(t, Adapter{Spec: s}, s, true)
	for _, want := range []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:1234/v1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "IS_SANDBOX=1",
		"CLAUDE_CONFIG_DIR=/scratch/home/.agent/claude-config", "CLAUDE_CODE_TMPDIR=/scratch/home/.agent/claude-tmp"} {
		if !agenttest.Has(c.Env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	for _, want := range []string{"-p", "--verbose", "--dangerously-skip-permissions", "m-1"} {
		if !agenttest.Has(c.Argv, want) {
			t.Errorf("argv lacks %s: %q", want, c.Argv)
		}
	}
	if c := agenttest.CommandFor(t, Adapter{Spec: s}, s, false); agenttest.Has(c.Env, "IS_SANDBOX=1") {
		t.Error("IS_SANDBOX set for a non-root run")
	}
}
