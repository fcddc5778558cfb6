package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// sessionScenarios are real agents' working sessions under the default
// settings (no --profile): a fix tested five times, and thirty tool calls.
// Both must pass, with no command refused.
func sessionScenarios() []scenario {
	testLoop := []modelserver.Turn{{Action: modelserver.ActionWrite, Path: "docs/CASE_NOTES.md", Content: note, Text: "Writing the fix."}}
	for i := 0; i < 5; i++ {
		// Each run differs (an agent may halt on identical calls in a row).
		testLoop = append(testLoop, modelserver.Turn{Action: modelserver.ActionShell, Command: fmt.Sprintf("sh scripts/check.sh # run %d", i+1), Text: "Running the tests."})
	}
	testLoop = append(testLoop, modelserver.Turn{Action: modelserver.ActionText, Text: "The fix is in and the tests pass."})
	long := []modelserver.Turn{{Action: modelserver.ActionWrite, Path: "docs/CASE_NOTES.md", Content: note}}
	for i := 1; i < 30; i++ {
		switch i % 3 {
		case 0:
			long = append(long, modelserver.Turn{Action: modelserver.ActionShell, Command: fmt.Sprintf("ls docs && cat README.md # step %d", i)})
		case 1:
			long = append(long, modelserver.Turn{Action: modelserver.ActionWrite, Path: fmt.Sprintf("docs/step-%02d.md", i), Content: fmt.Sprintf("step %d\n", i)})
		default:
			long = append(long, modelserver.Turn{Action: modelserver.ActionShell, Command: fmt.Sprintf("grep -c step docs/step-%02d.md", i-1)})
		}
	}
	long = append(long, modelserver.Turn{Action: modelserver.ActionText, Text: "Thirty steps done."})
	return []scenario{
		{name: "test-loop", status: ctoharness.StatusPass, changed: []string{"docs/CASE_NOTES.md"}, command: true, tests: 5, turns: testLoop},
		{name: "long-session", status: ctoharness.StatusPass, changed: []string{"docs/step-01.md", "docs/step-28.md"}, command: true, turns: long},
	}
}

func runSessions(t *testing.T, name agent.Name) {
	s, dir := requireAgent(t, name)
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	base := stage3(t, set)
	for _, sc := range sessionScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			srv, err := modelserver.Start(modelserver.Options{Script: modelserver.Script{Turns: sc.turns}}, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			o := base
			o.Spec = specCopy(base)
			o.Spec.CaseTimeoutSeconds = 300
			o.Agent = harness.AgentOptions{Name: string(name), Model: "scripted-model", BaseURL: baseURL(name, srv), APIKeyEnv: keyVar, Dir: dir}
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Profile != "agent" {
				t.Errorf("profile %q: a run with an agent defaults to the agent profile", rep.Profile)
			}
			check(t, set, s, sc, rep)
			checkUsage(t, srv, rep)
		})
	}
}

// specCopy is a copy of the options' task spec, to change per scenario.
func specCopy(o harness.Options) *task.Spec {
	s := *o.Spec
	return &s
}

func TestSessionsQwenCode(t *testing.T)   { runSessions(t, agent.QwenCode) }
func TestSessionsClaudeCode(t *testing.T) { runSessions(t, agent.ClaudeCode) }
func TestSessionsCodex(t *testing.T)      { runSessions(t, agent.Codex) }
func TestSessionsGeminiCLI(t *testing.T)  { runSessions(t, agent.GeminiCLI) }

// failure is a provider failure scenario: the run must end with code, in
// under within, and say what it spent.
type failure struct {
	name    string
	turns   []modelserver.Turn
	down    bool // no server at all
	code    ctoharness.BlockerCode
	within  time.Duration
	started bool // Case must have started (false: must not have)
}

func failures() []failure {
	return []failure{
		{name: "http-500-always", turns: []modelserver.Turn{{Action: modelserver.ActionError, Status: 500}},
			code: ctoharness.BlockModelAPIError, within: 30 * time.Second, started: true},
		{name: "stalled-stream", turns: []modelserver.Turn{{Action: modelserver.ActionStall}},
			code: ctoharness.BlockModelStalled, within: 30 * time.Second, started: true},
		{name: "endpoint-down", down: true, code: ctoharness.BlockModelEndpointUnreachable, within: 5 * time.Second},
		{name: "429-then-success", turns: []modelserver.Turn{
			{Action: modelserver.ActionWrite, Path: "docs/CASE_NOTES.md", Content: note, FailFirst: 2, FailStatus: 429},
			{Action: modelserver.ActionText, Text: "Done."}}, started: true, within: 60 * time.Second},
	}
}

func runFailures(t *testing.T, name agent.Name) {
	_, dir := requireAgent(t, name)
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	base := stage3(t, set)
	for _, f := range failures() {
		t.Run(f.name, func(t *testing.T) {
			var srv *modelserver.Server
			url := "http://" + closedPort(t)
			if !f.down {
				if srv, err = modelserver.Start(modelserver.Options{Script: modelserver.Script{Turns: f.turns}}, "127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				url = baseURL(name, srv)
			}
			o := base
			o.Agent = harness.AgentOptions{Name: string(name), Model: "scripted-model", BaseURL: url, APIKeyEnv: keyVar, Dir: dir}
			begin := time.Now()
			rep, err := harness.Run(context.Background(), o)
			took := time.Since(begin)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s %v in %s (Case ran %d ms)", f.name, rep.Status, rep.Blockers, took.Round(time.Millisecond), rep.Case.DurationMs)
			has := f.code == "" && len(rep.Blockers) == 0
			for _, b := range rep.Blockers {
				has = has || b.Code == f.code
			}
			if !has {
				if srv != nil {
					for _, q := range srv.Requests() {
						t.Logf("server: %s %s turn %d -> %d", q.Method, q.Path, q.Turn, q.Status)
					}
				}
				t.Fatalf("blockers %+v, want %q (evidence %s)", rep.Blockers, f.code, rep.RunArtifactDir)
			}
			if took > f.within {
				t.Errorf("took %s, want under %s", took, f.within)
			}
			if rep.CaseProcessStarted != f.started {
				t.Errorf("case_process_started %v, want %v", rep.CaseProcessStarted, f.started)
			}
			want := ctoharness.OutcomeModelFailed
			if f.code == "" {
				want = ctoharness.OutcomePass
			}
			if rep.Outcome != want {
				t.Errorf("outcome %s, want %s", rep.Outcome, want)
			}
			res := validators.Run(context.Background(), rep.RunArtifactDir, set, validators.RunOptions{ExpectPass: f.code == ""})
			if !res.OK {
				t.Errorf("evidence of %s does not validate: %v", rep.RunArtifactDir, res.Errors)
			}
			if srv != nil {
				checkUsage(t, srv, rep)
			}
		})
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestFailuresQwenCode(t *testing.T)   { runFailures(t, agent.QwenCode) }
func TestFailuresClaudeCode(t *testing.T) { runFailures(t, agent.ClaudeCode) }
func TestFailuresCodex(t *testing.T)      { runFailures(t, agent.Codex) }
func TestFailuresGeminiCLI(t *testing.T)  { runFailures(t, agent.GeminiCLI) }

// keyScenario has the agent print its key with a shell command (so the
// tool output, its session files and its stream hold it) and write it into
// the fixture. The run is blocked, and no byte sequence of the key is left
// anywhere under the runs directory.
func runKeyLeft(t *testing.T, name agent.Name) {
	s, dir := requireAgent(t, name)
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	base := stage3(t, set)
	turns := []modelserver.Turn{
		{Action: modelserver.ActionShell, Command: "echo the key is $" + s.KeyVar},
		{Action: modelserver.ActionLeakKey, Path: "docs/leak.md"},
		{Action: modelserver.ActionText, Text: "Done."},
	}
	srv, err := modelserver.Start(modelserver.Options{Script: modelserver.Script{Turns: turns}}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	o := base
	o.Agent = harness.AgentOptions{Name: string(name), Model: "scripted-model", BaseURL: baseURL(name, srv), APIKeyEnv: keyVar, Dir: dir}
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	has := false
	for _, b := range rep.Blockers {
		has = has || b.Code == ctoharness.BlockSecretInEvidence
	}
	if !has {
		t.Fatalf("blockers %+v, want SECRET_IN_EVIDENCE", rep.Blockers)
	}
	var holding []string
	err = filepath.WalkDir(o.RunsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(key)) {
			holding = append(holding, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(holding) > 0 {
		t.Errorf("the key is still in %d file(s) under the runs directory: %v", len(holding), holding)
	}
	if _, err := os.Stat(rep.RuntimeWorkspaceRoot); !os.IsNotExist(err) {
		t.Errorf("the workspace %s was left behind (%v)", rep.RuntimeWorkspaceRoot, err)
	}
}

func TestKeyLeftQwenCode(t *testing.T)   { runKeyLeft(t, agent.QwenCode) }
func TestKeyLeftClaudeCode(t *testing.T) { runKeyLeft(t, agent.ClaudeCode) }
func TestKeyLeftCodex(t *testing.T)      { runKeyLeft(t, agent.Codex) }
func TestKeyLeftGeminiCLI(t *testing.T)  { runKeyLeft(t, agent.GeminiCLI) }
