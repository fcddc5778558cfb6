// Package agenttest checks an adapter's stream translation against the
// native streams the real agents wrote against the scripted model server
// (harness/agent/modelserver/testdata/streams/AGENT-SCENARIO.jsonl).
package agenttest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
)

// Placeholders the recordings use for the run's paths.
const (
	work    = "/fx/work"
	outside = "/fx/outside"
)

// StreamsDir is where the recordings live.
func StreamsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "modelserver", "testdata", "streams")
}

// Replay feeds a recording through a fresh translator and returns the events
// and the result. ok is false when there is no recording of that scenario.
func Replay(t *testing.T, a agent.Adapter, name agent.Name, scenario string) ([]agent.Event, agent.Result, bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(StreamsDir(), string(name)+"-"+scenario+".jsonl"))
	if os.IsNotExist(err) {
		return nil, agent.Result{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("{{WORK_DASHED}}", strings.ReplaceAll(work, "/", "-"), "{{WORK}}", work, "{{OUTSIDE}}", outside,
		"{{ROOT}}", "/fx", "{{URL}}", "http://127.0.0.1:1", "{{KEY}}", "sk-recorded-key")
	data = []byte(r.Replace(string(data)))
	tr := a.NewTranslator(work)
	var evs []agent.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		evs = append(evs, tr.Line(sc.Bytes())...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs, tr.Result(), true
}

// Scenarios checks the translation of every recorded scenario of an agent:
// the events each must produce and what the result must say.
func Scenarios(t *testing.T, a agent.Adapter, name agent.Name) {
	type want struct {
		files    []string // fixture-relative case.file_changed paths from tool calls
		escapes  int
		commands int
		isError  bool
		tokens   bool // usage was reported
	}
	cases := []struct {
		scenario string
		want     want
	}{
		{"write", want{files: []string{"hello.txt"}, tokens: true}},
		{"shell", want{commands: 1, tokens: true}},
		{"outside", want{escapes: 1, tokens: true}},
		{"leak", want{files: []string{"leak.txt"}, tokens: true}},
		{"error", want{isError: true}},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			evs, res, ok := Replay(t, a, name, tc.scenario)
			if !ok {
				t.Skipf("no recording %s-%s.jsonl in %s yet", name, tc.scenario, StreamsDir())
			}
			types := map[ctoharness.EventType]int{}
			var files []string
			escapes := 0
			for _, e := range evs {
				types[e.Type]++
				if e.Type == ctoharness.EvCaseFileChanged {
					if e.Data["outside_fixture"] == true {
						escapes++
					} else {
						files = append(files, e.Data["path"].(string))
					}
				}
			}
			if types[ctoharness.EvCaseStarted] != 1 || types[ctoharness.EvCaseFinished] != 1 {
				t.Fatalf("want one case.started and one case.finished, got %v", types)
			}
			if evs[0].Type != ctoharness.EvCaseStarted || evs[len(evs)-1].Type != ctoharness.EvCaseFinished {
				t.Fatalf("case.started must come first and case.finished last: %v", evs)
			}
			if got := evs[0].Data["agent"]; got != string(name) {
				t.Fatalf("case.started agent %v", got)
			}
			if strings.Join(files, ",") != strings.Join(tc.want.files, ",") || escapes != tc.want.escapes || len(res.Escapes) != tc.want.escapes {
				t.Fatalf("files %v escapes %d (%v), want %v and %d", files, escapes, res.Escapes, tc.want.files, tc.want.escapes)
			}
			if types[ctoharness.EvCaseCommand] != tc.want.commands || res.Commands != tc.want.commands {
				t.Fatalf("commands: %d events, %d counted, want %d", types[ctoharness.EvCaseCommand], res.Commands, tc.want.commands)
			}
			if res.IsError != tc.want.isError || (res.IsError && res.ErrorMessage == "") {
				t.Fatalf("is_error %v (%q), want %v", res.IsError, res.ErrorMessage, tc.want.isError)
			}
			if status := evs[len(evs)-1].Data["status"]; (status == "error") != tc.want.isError {
				t.Fatalf("case.finished status %v", status)
			}
			if !res.Started || !res.Finished || res.Version == "" {
				t.Fatalf("result %+v", res)
			}
			if tc.want.tokens && (res.InputTokens == 0 || res.OutputTokens == 0 || res.Turns == 0) {
				t.Fatalf("usage not read: %+v", res)
			}
			if !tc.want.isError && types[ctoharness.EvCaseLog] == 0 {
				t.Fatalf("assistant text not logged: %v", types)
			}
			if res.Malformed != 0 {
				t.Fatalf("%d malformed lines in a recording", res.Malformed)
			}
			// Every tool call's result is in the conversation, paired with
			// the call by its id (the page shows them together).
			calls, results := map[string]bool{}, map[string]bool{}
			for _, e := range evs {
				id, _ := e.Data["call_id"].(string)
				if e.Data["kind"] == agent.KindToolResult {
					results[id] = true
				} else if e.Type == ctoharness.EvCaseCommand || e.Type == ctoharness.EvCaseFileChanged || e.Data["kind"] == agent.KindToolCall {
					calls[id] = true
				}
			}
			if !tc.want.isError && len(results) == 0 {
				t.Fatalf("no tool result in the conversation: %v", evs)
			}
			for id := range results {
				if id == "" || !calls[id] {
					t.Errorf("tool result %q has no call with its id: %v", id, evs)
				}
			}
		})
	}
}

// CommandFor builds an adapter's command for a fixed launch and checks what
// every agent must respect: the executable first, the prompt somewhere in
// argv, the base environment kept, the key present only under the agent's
// variable, and every directory and file inside the state root.
func CommandFor(t *testing.T, a agent.Adapter, s agent.Spec, root bool) agent.Command {
	t.Helper()
	l := agent.Launch{Exe: []string{"/opt/agent/bin"}, Prompt: "PROMPT-TEXT", Model: "m-1", BaseURL: "http://127.0.0.1:1234/v1",
		Key: "sk-key-0123456789", Fixture: "/fx/work", State: "/scratch/home/.agent", BaseEnv: []string{"PATH=/usr/bin", "HOME=/scratch/home"}, Root: root}
	c, err := a.Command(l)
	if err != nil {
		t.Fatal(err)
	}
	if c.Argv[0] != "/opt/agent/bin" || !contains(c.Argv, "PROMPT-TEXT") {
		t.Fatalf("argv %q", c.Argv)
	}
	keyed := 0
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.Contains(v, l.Key) {
			keyed++
			if k != s.KeyVar {
				t.Errorf("the key is passed under %s, not %s", k, s.KeyVar)
			}
		}
	}
	if keyed != 1 || !contains(c.Env, "PATH=/usr/bin") || !contains(c.Env, "HOME=/scratch/home") {
		t.Fatalf("env %q", c.Env)
	}
	for _, d := range c.Dirs {
		if !strings.HasPrefix(d, l.State+"/") {
			t.Errorf("directory %s outside the state root", d)
		}
	}
	for _, f := range c.Files {
		if !strings.HasPrefix(f.Path, l.State+"/") {
			t.Errorf("file %s outside the state root", f.Path)
		}
	}
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Has reports whether list holds s.
func Has(list []string, s string) bool { return contains(list, s) }
