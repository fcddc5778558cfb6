package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// EnvAgentTests turns the agent end-to-end tests on.
const EnvAgentTests = "CTO_HARNESS_AGENT_TESTS"

// TestMain lets this test binary be the fake Case and the sandbox launcher
// (stage 2, which stage 3 requires, runs the fake Case in the sandbox).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == backend.FakeSubcommand {
		os.Exit(fakecase.Main(os.Args[2:], os.Stdout, os.Stderr, os.Getenv))
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.Subcommand {
		os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

const (
	keyVar = "CTO_TEST_MODEL_KEY"
	key    = "sk-e2e-0123456789abcdef"
	note   = "note added by the fake Case, written by the agent\n"
)

// requireAgent skips (or fails, with =require) when the tests are off or the
// agent is not installed.
func requireAgent(t testing.TB, name agent.Name) (agent.Spec, string) {
	t.Helper()
	gate := os.Getenv(EnvAgentTests)
	if gate == "" {
		t.Skipf("agent end-to-end tests are off: set %s=1 (make test-agents) after `cto-harness agents install`", EnvAgentTests)
	}
	s, err := agent.Lookup(string(name))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := agent.Dir("", os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Installed(dir) {
		msg := "%s %s is not installed in %s: run `cto-harness agents install %s`"
		if gate == "require" {
			t.Fatalf(msg, s.Name, s.Version, dir, s.Name)
		}
		t.Skipf(msg, s.Name, s.Version, dir, s.Name)
	}
	return s, dir
}

// stage3 makes a runs directory with stage 2 validated and an owned copy of
// the sample repository, and returns options for a stage 3 run on it.
func stage3(t testing.TB, set *schemas.Set) harness.Options {
	t.Helper()
	runs := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := attest.Ephemeral()
	if err != nil {
		t.Fatal(err)
	}
	res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys})
	if !res.OK {
		t.Fatalf("stage 2 validation: %v", res.Errors)
	}
	archive, err := fixtures.Archive(fixtures.SampleOwned)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "owned")
	if _, err := fixtures.Materialize(context.Background(), archive, src, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	data, err := fixtures.TaskSpec(fixtures.SampleOwned)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := task.Parse(data, "sample", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	spec.CaseTimeoutSeconds = 240
	env := map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3", keyVar: key}
	return harness.Options{Stage: 3, RunsDir: runs, Schemas: set, SelfExe: exe, Source: src, Spec: &spec,
		Config: config.Config{OwnedSources: []string{src}}, VerifyRun: validators.StageRunVerifier(set), Signing: keys,
		Getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			if k == "PATH" {
				return os.Getenv("PATH")
			}
			return ""
		}}
}

// baseURL is the endpoint each agent is given (see modelserver's doc).
func baseURL(name agent.Name, srv *modelserver.Server) string {
	if name == agent.QwenCode || name == agent.Codex {
		return srv.URL() + "/v1"
	}
	return srv.URL()
}

type scenario struct {
	name    string
	turns   []modelserver.Turn
	status  ctoharness.Status
	code    ctoharness.BlockerCode // "" for a pass
	changed []string               // case.file_changed paths the events must show
	command bool                   // a case.command event must appear
	tests   int                    // at least this many observed commands count as test runs
}

func scenarios() []scenario {
	return []scenario{
		{name: "pass", status: ctoharness.StatusPass, changed: []string{"docs/CASE_NOTES.md", "docs/shell-note.md"}, command: true,
			turns: []modelserver.Turn{
				{Action: modelserver.ActionShell, Command: "echo checked by a shell command > docs/shell-note.md"},
				{Action: modelserver.ActionWrite, Path: "docs/CASE_NOTES.md", Content: note, Text: "Writing the note."},
				{Action: modelserver.ActionText, Text: "I added docs/CASE_NOTES.md."},
			}},
		{name: "disallowed", status: ctoharness.StatusBlocked, code: ctoharness.BlockDisallowedChange, changed: []string{"src/evil.sh"},
			turns: []modelserver.Turn{
				{Action: modelserver.ActionWrite, Path: "src/evil.sh", Content: "echo evil\n"},
				{Action: modelserver.ActionText, Text: "Done."},
			}},
		{name: "model-error", status: ctoharness.StatusBlocked, code: ctoharness.BlockAgentModelError,
			turns: []modelserver.Turn{{Action: modelserver.ActionError, Status: 400, Body: ""}}},
		{name: "key-leak", status: ctoharness.StatusBlocked, code: ctoharness.BlockSecretInEvidence, changed: []string{"docs/leak.md"},
			turns: []modelserver.Turn{
				{Action: modelserver.ActionLeakKey, Path: "docs/leak.md"},
				{Action: modelserver.ActionText, Text: "Done."},
			}},
	}
}

func runAgent(t *testing.T, name agent.Name) {
	s, dir := requireAgent(t, name)
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	base := stage3(t, set)
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			srv, err := modelserver.Start(modelserver.Options{Script: modelserver.Script{Turns: sc.turns}}, "127.0.0.1:0")
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
			check(t, set, s, sc, rep)
			checkUsage(t, srv, rep)
		})
	}
}

// checkUsage holds the report's usage to what the model server answered:
// as many model requests, and for each answered one the tokens it sent.
func checkUsage(t *testing.T, srv *modelserver.Server, rep *ctoharness.Report) {
	t.Helper()
	var served, answered int
	for _, r := range srv.Requests() {
		if r.API == modelserver.APIOther {
			continue
		}
		served++
		if r.Status == 200 && !r.Stalled {
			answered++
		}
	}
	u := rep.Agent.Usage
	if u == nil {
		t.Fatalf("no usage in the report (%s)", rep.RunArtifactDir)
	}
	t.Logf("usage: %d requests (%d failed), %d uncached + %d cache read + %d cache write in, %d out, cost %v (%s)",
		u.Requests, u.Failed, u.InputUncached, u.CacheRead, u.CacheWrite, u.Output, u.CostUSD, u.CostSource)
	n := int64(answered)
	if u.Requests != served || u.Output != n*modelserver.UsageOutput || u.CacheRead != n*modelserver.UsageCached ||
		u.InputUncached != n*(modelserver.UsageInput-modelserver.UsageCached) || u.CacheWrite != 0 {
		t.Errorf("usage %+v; the server answered %d model requests (%d of them with usage)", u, served, answered)
	}
	if u.CostSource == ctoharness.CostNotReported && u.CostUSD != nil {
		t.Errorf("cost %v with source %s", *u.CostUSD, u.CostSource)
	}
}

func check(t *testing.T, set *schemas.Set, s agent.Spec, sc scenario, rep *ctoharness.Report) {
	t.Helper()
	hasCode := sc.code == ""
	for _, b := range rep.Blockers {
		if b.Code == sc.code {
			hasCode = true
		}
	}
	if rep.Status != sc.status || !hasCode || (sc.code == "" && len(rep.Blockers) > 0) {
		t.Fatalf("status %s blockers %+v; want %s with %q (evidence %s)", rep.Status, rep.Blockers, sc.status, sc.code, rep.RunArtifactDir)
	}
	if !rep.CaseProcessStarted || rep.SourceRepositoryMutated || rep.Agent == nil {
		t.Fatalf("case started %v, source mutated %v, agent %+v", rep.CaseProcessStarted, rep.SourceRepositoryMutated, rep.Agent)
	}
	if !rep.Sandbox.Enforced || rep.Sandbox.Unsandboxed {
		t.Errorf("the agent did not run in the enforced sandbox: %+v", rep.Sandbox)
	}
	// The agent reaches its model endpoint through an allowlist, and its
	// execs are observed all the same: none of an honest session's commands
	// is refused, and the shell command it was asked to run is counted.
	if rep.Network == nil || len(rep.Network.Policy.Case) == 0 {
		t.Errorf("the agent ran without a network allowlist: %+v", rep.Network)
	}
	if c := rep.Case.Commands; c == nil || !c.Observed {
		t.Errorf("the agent's execs were not observed: %+v", c)
	} else {
		t.Logf("commands: %d of budget %d used, %d commands (%d test runs), %d refused, %d execs (%d inside), %d claimed", c.Used, c.Budget, c.Commands, c.Tests, c.Refused, c.Execs, c.Inside, c.Claimed.Commands)
		if c.Refused != 0 || (sc.command && c.Commands == 0) {
			t.Errorf("case.commands %+v: an honest session has its commands counted and none refused", c)
		}
		if c.Tests < sc.tests {
			t.Errorf("case.commands counts %d test run(s), want at least %d: the agent's test commands were not seen as tests (refused: %+v)", c.Tests, sc.tests, c.RefusedCommands)
		}
	}
	a := rep.Agent
	if a.Name != string(s.Name) || a.Version != s.Version || a.Model == "" || !a.Finished || len(a.SecretEnv) != 1 || a.SecretEnv[0] != s.KeyVar {
		t.Fatalf("report.agent %+v", a)
	}
	res := validators.Run(context.Background(), rep.RunArtifactDir, set, validators.RunOptions{ExpectPass: sc.status == ctoharness.StatusPass})
	if !res.OK {
		t.Fatalf("evidence of %s does not validate: %v", rep.RunArtifactDir, res.Errors)
	}
	evs := caseEvents(t, rep.RunArtifactDir)
	for _, p := range sc.changed {
		if !evs.changed[p] {
			t.Errorf("no case.file_changed for %s; events: %v", p, evs.all)
		}
	}
	if sc.command && evs.commands == 0 {
		t.Errorf("no case.command event; events: %v", evs.all)
	}
	if evs.started != 1 || evs.finished != 1 {
		t.Errorf("case.started %d, case.finished %d; events: %v", evs.started, evs.finished, evs.all)
	}
	if sc.status == ctoharness.StatusPass && (a.InputTokens == 0 || a.OutputTokens == 0 || a.Turns == 0) {
		t.Errorf("token usage not recorded: %+v", a)
	}
	// The key never reaches the evidence, whatever the agent did with it.
	names, err := evidence.ListArtifacts(rep.RunArtifactDir)
	if err != nil {
		t.Fatal(err)
	}
	redacted := false
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), key) {
			t.Errorf("%s holds the API key", n)
		}
		redacted = redacted || strings.Contains(string(data), agent.Marker(keyVar))
	}
	if sc.code == ctoharness.BlockSecretInEvidence && !redacted {
		t.Errorf("the leaked key was not replaced by %s anywhere", agent.Marker(keyVar))
	}
}

type caseView struct {
	changed                     map[string]bool
	commands, started, finished int
	all                         []string
}

func caseEvents(t *testing.T, runDir string) caseView {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, evidence.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	v := caseView{changed: map[string]bool{}}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct {
			Type ctoharness.EventType `json:"type"`
			Data struct {
				Path string `json:"path"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case ctoharness.EvCaseFileChanged:
			v.changed[ev.Data.Path] = true
		case ctoharness.EvCaseCommand:
			v.commands++
		case ctoharness.EvCaseStarted:
			v.started++
		case ctoharness.EvCaseFinished:
			v.finished++
		}
		if strings.HasPrefix(string(ev.Type), "case.") {
			v.all = append(v.all, string(ev.Type)+":"+ev.Data.Path)
		}
	}
	return v
}

func TestQwenCode(t *testing.T)   { runAgent(t, agent.QwenCode) }
func TestClaudeCode(t *testing.T) { runAgent(t, agent.ClaudeCode) }
func TestCodex(t *testing.T)      { runAgent(t, agent.Codex) }
func TestGeminiCLI(t *testing.T)  { runAgent(t, agent.GeminiCLI) }

// BenchmarkAgentOverhead measures what the harness adds to a real agent run
// on the embedded sample: the whole run's wall time minus the agent
// process's own duration (gate, source proofs, copy, baseline, collection,
// verification, evidence). The target is at most 1 s.
func BenchmarkAgentOverhead(b *testing.B) {
	for _, name := range []agent.Name{agent.QwenCode, agent.ClaudeCode, agent.Codex, agent.GeminiCLI} {
		b.Run(string(name), func(b *testing.B) {
			_, dir := requireAgent(b, name)
			set, err := schemas.Compile()
			if err != nil {
				b.Fatal(err)
			}
			base := stage3(b, set)
			turns := scenarios()[0].turns
			var overhead, own time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				srv, err := modelserver.Start(modelserver.Options{Script: modelserver.Script{Turns: turns}}, "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				o := base
				o.Unsandboxed = true
				o.Agent = harness.AgentOptions{Name: string(name), Model: "scripted-model", BaseURL: baseURL(name, srv), APIKeyEnv: keyVar, Dir: dir}
				start := time.Now()
				rep, err := harness.Run(context.Background(), o)
				wall := time.Since(start)
				srv.Close()
				if err != nil || rep.Status != ctoharness.StatusPass {
					b.Fatalf("run: %v %+v", err, rep.Blockers)
				}
				agentTime := time.Duration(rep.Case.DurationMs) * time.Millisecond
				overhead += wall - agentTime
				own += agentTime
			}
			b.ReportMetric(float64(overhead.Milliseconds())/float64(b.N), "harness-ms/op")
			b.ReportMetric(float64(own.Milliseconds())/float64(b.N), "agent-ms/op")
		})
	}
}
