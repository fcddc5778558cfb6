package validators

import (
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

func TestRedactedFrom(t *testing.T) {
	agentRun := &ctoharness.Report{Agent: &ctoharness.AgentRecord{SecretEnv: []string{"OPENAI_API_KEY"}}}
	derived := []byte("+++ b/docs/leak.md\n+key: sk-live-123456789\n+end\n")
	tests := []struct {
		name   string
		rep    *ctoharness.Report
		stored string
		want   bool
	}{
		{"marker stands for the key", agentRun, "+++ b/docs/leak.md\n+key: [REDACTED:MY_KEY]\n+end\n", true},
		{"other text changed too", agentRun, "+++ b/docs/leak.md\n+key: [REDACTED:MY_KEY]\n+END\n", false},
		{"marker may not swallow lines", agentRun, "+++ b/docs/leak.md\n+key: [REDACTED:MY_KEY]\n", false},
		{"no agent run", &ctoharness.Report{}, "+++ b/docs/leak.md\n+key: [REDACTED:MY_KEY]\n+end\n", false},
		{"no marker", agentRun, "+++ b/docs/leak.md\n+key: other\n+end\n", false},
	}
	for _, tc := range tests {
		if got := redactedFrom(tc.rep, []byte(tc.stored), derived); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
