package gemini

import (
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/agenttest"
)

// The translation of every recorded native stream of the pinned release.
func TestTranslateRecordedStreams(t *testing.T) {
	s, err := agent.Lookup(string(agent.GeminiCLI))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Scenarios(t, Adapter{Spec: s}, agent.GeminiCLI)
}

func TestCommand(t *testing.T) {
	s, _ := agent.Lookup(string(agent.GeminiCLI))
	c := agenttest.CommandFor(t, Adapter{Spec: s}, s, false)
	for _, want := range []string{"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:1234/v1", "GEMINI_CLI_HOME=/scratch/home/.agent/gemini-home", "GEMINI_CLI_NO_RELAUNCH=true"} {
		if !agenttest.Has(c.Env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	for _, want := range []string{"--yolo", "--skip-trust", "stream-json"} {
		if !agenttest.Has(c.Argv, want) {
			t.Errorf("argv lacks %s", want)
		}
	}
	if len(c.Files) != 1 || !strings.HasSuffix(c.Files[0].Path, ".gemini/settings.json") ||
		!strings.Contains(string(c.Files[0].Data), `"selectedType": "gemini-api-key"`) || !strings.Contains(string(c.Files[0].Data), `"usageStatisticsEnabled": false`) {
		t.Errorf("settings %+v", c.Files)
	}
}
