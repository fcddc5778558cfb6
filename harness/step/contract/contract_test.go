package contract

import (
	"context"
	"os"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/runsink/runsinktest"
	"github.com/cto-harness/cto-harness/harness/task"
)

func newSink(t *testing.T) *runsink.Sink { return runsinktest.New(t, nil) }

func spec(adversary bool) task.Spec {
	s := task.Spec{Task: "Fix the parser.", AllowedPaths: []string{"src/**"},
		Verification: task.Verification{Command: "go test ./...", TimeoutSeconds: 60}, CaseTimeoutSeconds: 60}
	if adversary {
		s.Adversary = &task.SpecAdversary{Command: []string{"write-tests"}, TestCommand: "go test ./..."}
	}
	return s
}

// The contract is written; one that names the source, or an adversary
// that could never run, is refused before Case with its code.
func TestWrite(t *testing.T) {
	none := func(string) string { return "" }
	started := 0
	start := func(context.Context) bool { started++; return true }
	for _, tc := range []struct {
		name string
		in   Input
		want string // blocker code, "" for a written contract
	}{
		{"plain", Input{Spec: spec(false), Leaks: none}, ""},
		{"adversary confirmed", Input{Spec: spec(true), Confirmable: true, ClaimsFile: "/s/home/claims.json", StartAdversary: start, Leaks: none}, ""},
		{"adversary unsandboxed", Input{Spec: spec(true), Unsandboxed: true, Confirmable: true, StartAdversary: start, Leaks: none}, string(ctoharness.BlockAdversaryFailed)},
		{"adversary with nobody to ask", Input{Spec: spec(true), StartAdversary: start, Leaks: none}, string(ctoharness.BlockAdversaryNotConfirmed)},
		{"names the source", Input{Spec: spec(false), Leaks: func(s string) string {
			if strings.Contains(s, "parser") {
				return "/home/me/src"
			}
			return ""
		}}, string(ctoharness.BlockTaskInvalid)},
	} {
		s := newSink(t)
		tc.in.Fixture = "/runs/run-1/fixture"
		c, ok := Write(context.Background(), s, tc.in)
		var codes []string
		for _, b := range s.Report.Blockers {
			codes = append(codes, string(b.Code))
		}
		got := strings.Join(codes, ",")
		if got != tc.want || ok != (tc.want == "") || (c != nil) != (tc.want == "") {
			t.Errorf("%s: blockers %q ok %v contract %v, want %q", tc.name, got, ok, c != nil, tc.want)
			continue
		}
		_, err := os.Stat(s.Dir.Path(evidence.TaskFile))
		if (err == nil) != (tc.want == "") {
			t.Errorf("%s: task.json written: %v", tc.name, err == nil)
		}
		if tc.want == "" && tc.in.Spec.Adversary != nil && c.ClaimsFile != tc.in.ClaimsFile {
			t.Errorf("%s: claims file %q", tc.name, c.ClaimsFile)
		}
	}
	if started != 1 {
		t.Errorf("the adversary was started %d times, want once (only when it can run)", started)
	}
}
