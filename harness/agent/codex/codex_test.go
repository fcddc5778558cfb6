package codex

import (
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
