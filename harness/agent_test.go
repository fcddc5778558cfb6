package harness_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/agenttest"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

const (
	agentKeyVar = "CTO_TEST_AGENT_KEY"
	agentKey    = "sk-unit-0123456789abcdef"
)

// standInAgent writes an executable that behaves like qwen-code as far as
// the harness can tell: it replays a recorded native stream of the real
// agent (its working directory in place of the recording's), optionally
// writes a file, prints the key it was given on stderr, and exits with code.
func standInAgent(t testing.TB, recording, extra, write, content string, code int) []string {
	t.Helper()
	src := filepath.Join(agenttest.StreamsDir(), recording+".jsonl")
	if _, err := os.Stat(src); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
sed -e "s#{{WORK}}#$PWD#g" -e "s#{{OUTSIDE}}#/outside-the-fixture#g" %q
printf %q
if [ -n %q ]; then mkdir -p "$(dirname %q)"; printf %q > %q; fi
echo "stand-in agent: my key is $OPENAI_API_KEY" >&2
exit %d
`, src, extra, write, write, content, write, code)
	p := filepath.Join(t.TempDir(), "qwen")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{p}
}

func agentOptions(o harness.Options, command []string) harness.Options {
	get := o.Getenv
	o.Getenv = func(k string) string {
		if k == agentKeyVar {
			return agentKey
		}
		return get(k)
	}
	o.Unsandboxed = true
	o.Agent = harness.AgentOptions{Name: string(agent.QwenCode), Model: "scripted-model", BaseURL: standInEndpoint(),
		APIKeyEnv: agentKeyVar, Command: command}
	return o
}

var standIn struct {
	once sync.Once
	url  string
}

// standInEndpoint is a loopback model endpoint that is up (the harness
// checks that before Case starts) and that the stand-in agents never call:
// a listener that accepts and closes, for the whole test binary.
func standInEndpoint() string {
	standIn.once.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		standIn.url = "http://" + ln.Addr().String() + "/v1"
	})
	return standIn.url
}

// noKeyInEvidence fails if any evidence file holds the key, and reports
// whether the redaction marker appears somewhere.
func noKeyInEvidence(t *testing.T, runDir string) bool {
	t.Helper()
	names, err := evidence.ListArtifacts(runDir)
	if err != nil {
		t.Fatal(err)
	}
	marked := false
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(runDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), agentKey) {
			t.Errorf("%s holds the API key", n)
		}
		marked = marked || strings.Contains(string(data), agent.Marker(agentKeyVar))
	}
	return marked
}

// keyAnywhere lists the files under dir that hold the agent key, read as
// they are and, for git's loose objects, inflated: a key in a git object
// is compressed, and a plain search would not find it.
func keyAnywhere(t *testing.T, dir string) []string {
	t.Helper()
	var held []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if zr, zerr := zlib.NewReader(bytes.NewReader(data)); zerr == nil {
			if inflated, rerr := io.ReadAll(zr); rerr == nil {
				data = append(data, inflated...)
			}
		}
		if bytes.Contains(data, []byte(agentKey)) {
			held = append(held, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// The agent lane end to end with a stand-in that replays real qwen-code
// streams: translation, outcomes, redaction, all without Node.
func TestAgentLaneWithStandIn(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	const note = "note added by the fake Case\n"
	tests := []struct {
		name                          string
		recording, extra, write, body string
		code                          int
		want                          []ctoharness.BlockerCode
		unknown                       int
	}{
		{name: "pass", recording: "qwen-code-write", write: "docs/CASE_NOTES.md", body: note,
			extra: "{\"type\":\"brand_new_event\"}\nnot json at all\n", unknown: 2},
		{name: "model error exits 1", recording: "qwen-code-error", code: 1, want: []ctoharness.BlockerCode{ctoharness.BlockAgentModelError}},
		{name: "no change", recording: "qwen-code-write", want: []ctoharness.BlockerCode{ctoharness.BlockAgentNoChange}},
		{name: "disallowed", recording: "qwen-code-write", write: "src/evil.sh", body: "echo evil\n", want: []ctoharness.BlockerCode{ctoharness.BlockDisallowedChange}},
		{name: "key in the fixture", recording: "qwen-code-write", write: "docs/leak.md", body: agentKey, want: []ctoharness.BlockerCode{ctoharness.BlockSecretInEvidence}},
		{name: "write outside", recording: "qwen-code-outside", write: "docs/CASE_NOTES.md", body: note, want: []ctoharness.BlockerCode{ctoharness.BlockDisallowedChange}},
		{name: "no result", recording: "qwen-code-write", extra: "", write: "docs/CASE_NOTES.md", body: note, code: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.recording
			if tc.name == "no result" {
				// Only the first lines: init, no final result.
				rec = truncatedRecording(t, tc.recording, 2)
				tc.want = []ctoharness.BlockerCode{ctoharness.BlockMissingRequiredEvent}
			}
			o := agentOptions(base, standInAgent(t, rec, tc.extra, tc.write, tc.body, tc.code))
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(codeStrings(codes(rep)), ",") != strings.Join(codeStrings(tc.want), ",") {
				t.Fatalf("blockers %v, want %v", rep.Blockers, tc.want)
			}
			mustValidate(t, set, rep, len(tc.want) == 0)
			if !noKeyInEvidence(t, rep.RunArtifactDir) {
				t.Error("the key the stand-in printed on stderr was not redacted anywhere")
			}
			// Nothing under the runs directory holds it, git objects included:
			// a store that holds the key (the agent wrote it into the
			// result) is removed.
			if held := keyAnywhere(t, o.RunsDir); len(held) > 0 {
				t.Errorf("the key is left in %v", held)
			}
			a := rep.Agent
			if a == nil || a.Name != "qwen-code" || a.Version != "0.24.4" || a.Model != "scripted-model" || a.Endpoint != standInEndpoint() ||
				strings.Join(a.SecretEnv, ",") != "OPENAI_API_KEY" || len(a.EgressAllowed) != 1 || !strings.HasPrefix(a.EgressAllowed[0], "127.0.0.1:") {
				t.Fatalf("report.agent %+v", a)
			}
			if a.UnknownLines != tc.unknown {
				t.Errorf("unknown native lines %d, want %d", a.UnknownLines, tc.unknown)
			}
			if len(tc.want) == 0 && (a.Turns != 2 || a.InputTokens != 200 || a.OutputTokens != 40 || a.CachedTokens != 80 || a.APITimeMs == 0 || !a.Finished) {
				t.Errorf("usage not recorded: %+v", a)
			}
			if data, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "task.json")); !strings.Contains(string(data), `"address_space_bytes": 1099511627776`) {
				t.Errorf("an agent run's contract must raise the address-space limit (Node's WebAssembly): %s", data)
			}
			if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, harness.AgentStream)); err != nil {
				t.Errorf("native stream not kept: %v", err)
			}
			for _, k := range rep.Case.EnvKeys {
				if k == agentKeyVar {
					t.Errorf("the harness variable %s was passed to the agent", k)
				}
			}
		})
	}
}

func truncatedRecording(t *testing.T, name string, lines int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(agenttest.StreamsDir(), name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitAfterN(string(data), "\n", lines+1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cut.jsonl"), []byte(strings.Join(parts[:lines], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	// standInAgent looks recordings up by name in the streams directory;
	// a relative path from there reaches the cut copy.
	rel, err := filepath.Rel(agenttest.StreamsDir(), filepath.Join(dir, "cut"))
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// Requests the gate refuses before any agent starts.
func TestAgentGateRefusals(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	tests := []struct {
		name string
		mod  func(o *harness.Options)
		want ctoharness.BlockerCode
	}{
		{"key variable unset", func(o *harness.Options) { o.Agent.APIKeyEnv = "CTO_TEST_UNSET_KEY" }, ctoharness.BlockAgentConfigInvalid},
		{"no model", func(o *harness.Options) { o.Agent.Model = "" }, ctoharness.BlockAgentConfigInvalid},
		{"base url not http", func(o *harness.Options) { o.Agent.BaseURL = "ftp://x/v1" }, ctoharness.BlockAgentConfigInvalid},
		{"not installed", func(o *harness.Options) { o.Agent.Command = nil; o.Agent.Dir = t.TempDir() }, ctoharness.BlockAgentNotInstalled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := agentOptions(base, []string{"/bin/false"})
			tc.mod(&o)
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !hasCode(rep, tc.want) || rep.CaseProcessStarted || rep.Blockers[0].Step != ctoharness.StepGate {
				t.Fatalf("blockers %v, case started %v", rep.Blockers, rep.CaseProcessStarted)
			}
			mustValidate(t, set, rep, false)
		})
	}
}

// BenchmarkAgentLaneOverhead measures what the harness adds to an agent run
// on the embedded sample, with a stand-in agent replaying a recorded
// qwen-code stream (so no Node is needed): wall time of the whole run minus
// the agent process's own time. Target: at most 1 s. The same measurement
// with the real agents is BenchmarkAgentOverhead in harness/agent/e2e.
func BenchmarkAgentLaneOverhead(b *testing.B) {
	set := compileB(b)
	runs := b.TempDir()
	exe, _ := os.Executable()
	keys := testKeys(b)
	if res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys}); !res.OK {
		b.Fatalf("stage 2: %v", res.Errors)
	}
	src := filepath.Join(b.TempDir(), "owned")
	archive, _ := fixtures.Archive(fixtures.SampleOwned)
	if _, err := fixtures.Materialize(context.Background(), archive, src, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		b.Fatal(err)
	}
	data, _ := fixtures.TaskSpec(fixtures.SampleOwned)
	spec, err := task.Parse(data, "sample", set.Validator(schemas.TaskSpec))
	if err != nil {
		b.Fatal(err)
	}
	base := harness.Options{Stage: 3, Source: src, Spec: &spec, RunsDir: runs, Schemas: set, SelfExe: exe,
		Config: config.Config{OwnedSources: []string{src}}, VerifyRun: validators.StageRunVerifier(set),
		Getenv: env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}.get, Signing: keys}
	o := agentOptions(base, standInAgent(b, "qwen-code-write", "", "docs/CASE_NOTES.md", "note added by the fake Case\n", 0))
	var overhead time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		rep, err := harness.Run(context.Background(), o)
		wall := time.Since(start)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("run: %v %v", err, rep.Blockers)
		}
		overhead += wall - time.Duration(rep.Case.DurationMs)*time.Millisecond
	}
	b.ReportMetric(float64(overhead.Milliseconds())/float64(b.N), "harness-ms/op")
}

// An agent that does not finish in time is killed with its whole process
// group, the children it started included.
func TestAgentTimeoutKillsTheGroup(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	script := `#!/bin/sh
head -n 1 ` + filepath.Join(agenttest.StreamsDir(), "qwen-code-write.jsonl") + `
(sleep 3; echo alive > "$HOME/child-survived") &
sleep 300
`
	p := filepath.Join(t.TempDir(), "qwen")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := agentOptions(base, []string{p})
	spec := *o.Spec
	spec.CaseTimeoutSeconds = 1
	o.Spec = &spec
	o.KeepWork = true // the check below looks into the scratch
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !hasCode(rep, ctoharness.BlockCaseTimeout) || !rep.Case.TimedOut {
		t.Fatalf("blockers %v", rep.Blockers)
	}
	mustValidate(t, set, rep, false)
	// The child would write its file 3 s after the start; the run ended
	// after about 1 s. Wait past that point: nothing may appear.
	time.Sleep(4 * time.Second)
	if _, err := os.Stat(filepath.Join(rep.RuntimeWorkspaceRoot, "scratch", "home", "child-survived")); err == nil {
		t.Fatal("the agent's background child survived the timeout")
	}
}

// The workspace is removed at the end of a run; kept with --keep-work, it
// is scrubbed of the key an agent's session files hold.
func TestWorkspaceLeftClean(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	script := `#!/bin/sh
head -n 1 ` + filepath.Join(agenttest.StreamsDir(), "qwen-code-write.jsonl") + `
mkdir -p "$HOME/.session" && echo "{\"tool_output\":\"key=$OPENAI_API_KEY\"}" > "$HOME/.session/log.json"
exit 0
`
	p := filepath.Join(t.TempDir(), "qwen")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{false, true} {
		o := agentOptions(base, []string{p})
		o.KeepWork = keep
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(rep.RuntimeWorkspaceRoot)
		if !keep {
			if !errors.Is(statErr, os.ErrNotExist) {
				t.Fatalf("the workspace %s is still there (%v)", rep.RuntimeWorkspaceRoot, statErr)
			}
			continue
		}
		data, err := os.ReadFile(filepath.Join(rep.RuntimeWorkspaceRoot, "scratch", "home", ".session", "log.json"))
		if err != nil {
			t.Fatalf("kept workspace: %v", err)
		}
		if strings.Contains(string(data), agentKey) || !strings.Contains(string(data), agent.Marker(agentKeyVar)) {
			t.Fatalf("kept session file not scrubbed: %s", data)
		}
	}
}

// A command over the budget is refused, the process that asked is told why
// on its stderr (which is what an agent's shell tool returns), the run goes
// on, and the report lists the refused commands.
func TestRefusedCommandIsExplained(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	script := filepath.Join(t.TempDir(), "case.sh")
	body := `#!/bin/sh
echo '{"type":"case.started"}'
for i in 1 2 3 4 5 6 7 8; do /bin/true; done
echo "- note added by the fake Case" >> docs/CASE_NOTES.md
echo '{"type":"case.file_changed","path":"docs/CASE_NOTES.md"}'
echo '{"type":"case.finished","status":"ok"}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	o := base
	o.Lane = ctoharness.LaneReal
	o.CaseCmd = []string{"/bin/sh", script}
	o.Profile = "smoke"
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Case.Commands
	if c == nil || !c.Observed {
		t.Skipf("the exec watch is not available here: %+v", c)
	}
	if c.Refused == 0 || len(c.RefusedCommands) != c.Refused || c.RefusedCommands[0].Command != "/bin/true" ||
		!strings.HasPrefix(c.RefusedCommands[0].Reason, "COMMAND_BUDGET_SPENT") {
		t.Fatalf("refused %d, listed %+v", c.Refused, c.RefusedCommands)
	}
	if !strings.Contains(rep.Case.StderrInline, "cto-harness: this command was refused and did not run: COMMAND_BUDGET_SPENT") {
		t.Errorf("Case was not told why: stderr %q", rep.Case.StderrInline)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Errorf("a refused command stopped the run: %s %v", rep.Status, rep.Blockers)
	}
}
