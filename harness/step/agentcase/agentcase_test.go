package agentcase

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/modelmeter"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/task"
)

const key = "sk-test-0123456789abcdef"

func redactor(t *testing.T) *agent.Redactor {
	t.Helper()
	red, err := agent.NewRedactor(agent.Secret{Var: "MY_KEY", Value: key})
	if err != nil {
		t.Fatal(err)
	}
	return red
}

// sink is a run's sink over a fresh run directory.
func sink(t *testing.T) *runsink.Sink {
	t.Helper()
	tr := evidence.NewTrace("run-1")
	dir, err := evidence.Create(context.Background(), filepath.Join(t.TempDir(), "run-1"), nil, tr)
	if err != nil {
		t.Fatal(err)
	}
	rep := &ctoharness.Report{Blockers: []ctoharness.Blocker{}, ChangedFiles: []ctoharness.ChangedFile{}}
	return runsink.New("run-1", "n", dir, tr, rep, time.Now, nil)
}

// result is a translator that has read its whole stream.
type result agent.Result

func (r result) Line([]byte) []agent.Event { return nil }
func (r result) Result() agent.Result      { return agent.Result(r) }

func TestStopBlocker(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   ctoharness.BlockerCode
	}{
		{modelmeter.StopAPIError, ctoharness.BlockModelAPIError},
		{modelmeter.StopRateLimited, ctoharness.BlockModelRateLimited},
		{modelmeter.StopStalled, ctoharness.BlockModelStalled},
		{"something new", ctoharness.BlockModelAPIError},
	} {
		a := &Agent{spec: agent.Spec{Name: agent.QwenCode}, red: redactor(t), in: Input{Options: Options{BaseURL: "http://m.example/v1"}}}
		if b := a.stopBlocker(); b != nil {
			t.Fatalf("%s: a blocker before the meter said anything: %+v", tc.reason, b)
		}
		a.model.failed(modelmeter.Stop{Reason: tc.reason, Message: "the provider answered 503 with " + key})
		a.model.failed(modelmeter.Stop{Reason: modelmeter.StopStalled, Message: "later"}) // the first verdict stands
		b := a.stopBlocker()
		if b == nil || b.Code != tc.want || b.Step != ctoharness.StepCase {
			t.Fatalf("%s: blocker %+v, want %s at case", tc.reason, b, tc.want)
		}
		want := "qwen-code was stopped: the provider answered 503 with [REDACTED:MY_KEY] at http://m.example/v1; the per-request record is in report.json (agent.usage) and " + ModelRequests
		if b.Message != want {
			t.Errorf("%s: message\n%q, want\n%q", tc.reason, b.Message, want)
		}
	}
}

func TestStopWithAfterAFailureStopsAtOnce(t *testing.T) {
	a := &Agent{}
	a.model.failed(modelmeter.Stop{Reason: modelmeter.StopAPIError})
	stopped := 0
	a.StopWith(func() { stopped++ })
	a.model.failed(modelmeter.Stop{Reason: modelmeter.StopAPIError})
	if stopped != 2 {
		t.Fatalf("stopped %d times, want once when armed and once for the later failure", stopped)
	}
}

func TestErrorBlocker(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  agent.Result
		want string
	}{
		{"no error", agent.Result{Finished: true}, ""},
		{"model error", agent.Result{IsError: true, ErrorMessage: "401 bad key " + key},
			"codex reported a model or API error: 401 bad key [REDACTED:MY_KEY]; see " + Stream},
	} {
		a := &Agent{spec: agent.Spec{Name: agent.Codex}, red: redactor(t), tr: result(tc.res)}
		b := a.errorBlocker()
		switch {
		case tc.want == "" && b != nil:
			t.Errorf("%s: blocker %+v, want none", tc.name, b)
		case tc.want != "" && (b == nil || b.Code != ctoharness.BlockAgentModelError || b.Step != ctoharness.StepCase || b.Message != tc.want):
			t.Errorf("%s: blocker %+v, want AGENT_MODEL_ERROR %q", tc.name, b, tc.want)
		}
	}
}

func TestPrice(t *testing.T) {
	c := &config.Agent{Prices: map[string]config.Price{"m-1": {Input: 1.5}}}
	for _, tc := range []struct {
		name  string
		c     *config.Agent
		model string
		want  *config.Price
	}{
		{"no settings", nil, "m-1", nil},
		{"priced", c, "m-1", &config.Price{Input: 1.5}},
		{"not priced", c, "m-2", nil},
	} {
		if got := Price(tc.c, tc.model); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestWorkFate(t *testing.T) {
	if got := workFate(true, "/w/1"); got != "the kept workspace /w/1 is scrubbed of it" {
		t.Errorf("kept: %q", got)
	}
	if got := workFate(false, "/w/1"); got != "the workspace /w/1 is removed at the end of the run" {
		t.Errorf("removed: %q", got)
	}
}

func TestHostPort(t *testing.T) {
	for raw, want := range map[string]string{"http://m.example/v1": "m.example:80", "https://m.example": "m.example:443",
		"http://127.0.0.1:8080/v1": "127.0.0.1:8080", "https://[::1]/x": "[::1]:443"} {
		u, _ := url.Parse(raw)
		if got := hostPort(u); got != want {
			t.Errorf("hostPort(%s) = %s, want %s", raw, got, want)
		}
	}
}

func TestLimits(t *testing.T) {
	set := &task.SpecLimits{AddressSpaceBytes: 1 << 30}
	if got := Limits(set); got != set {
		t.Errorf("a limit the task sets was replaced: %+v", got)
	}
	if got := Limits(nil); got == nil || got.AddressSpaceBytes != addressSpace {
		t.Errorf("no limits: %+v", got)
	}
	other := &task.SpecLimits{OpenFiles: 64}
	got := Limits(other)
	if got == other || got.AddressSpaceBytes != addressSpace || got.OpenFiles != 64 || other.AddressSpaceBytes != 0 {
		t.Errorf("other limits: %+v (task's %+v)", got, other)
	}
}

func TestRedactorDataAndString(t *testing.T) {
	x := Redactor{redactor(t)}
	clean := map[string]any{"message": "nothing here"}
	if got := x.Data(clean); !reflect.DeepEqual(got, clean) {
		t.Errorf("data without the key changed: %v", got)
	}
	got, ok := x.Data(map[string]any{"message": "key " + key}).(json.RawMessage)
	if !ok || string(got) != `{"message":"key [REDACTED:MY_KEY]"}` {
		t.Errorf("data with the key: %s", got)
	}
	if s := x.String("it is " + key); s != "it is [REDACTED:MY_KEY]" {
		t.Errorf("string: %q", s)
	}
	none := Redactor{}
	if none.Data(clean) == nil || none.String("a "+key) != "a "+key {
		t.Error("a redactor without a key changed what it was given")
	}
}

func TestRedactReport(t *testing.T) {
	rep := &ctoharness.Report{RunID: "r", Case: ctoharness.CaseRecord{StdoutInline: "printed " + key},
		Blockers: []ctoharness.Blocker{{Code: ctoharness.BlockTestsFailed, Message: "saw " + key}}}
	RedactReport(rep, nil)
	if !strings.Contains(rep.Case.StdoutInline, key) {
		t.Fatal("no secrets, yet the report changed")
	}
	RedactReport(rep, []Secret{{KeyVar: "MY_KEY", Red: redactor(t)}})
	raw, _ := json.Marshal(rep)
	if strings.Contains(string(raw), key) || rep.Case.StdoutInline != "printed [REDACTED:MY_KEY]" || rep.Blockers[0].Message != "saw [REDACTED:MY_KEY]" || rep.RunID != "r" {
		t.Fatalf("report %s", raw)
	}
}

func TestSweep(t *testing.T) {
	s := sink(t)
	secrets := []Secret{{KeyVar: "MY_KEY", Red: redactor(t)}}
	write := func(name, data string) {
		if err := os.WriteFile(s.Dir.Path(name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(evidence.TestLog, "test printed "+key+"\n")
	write(evidence.PatchFile, "+x\n")
	Sweep(s, nil)
	if data, _ := os.ReadFile(s.Dir.Path(evidence.TestLog)); !strings.Contains(string(data), key) {
		t.Fatal("no secrets, yet a file changed")
	}
	Sweep(s, secrets, evidence.PatchFile) // only the named file
	if data, _ := os.ReadFile(s.Dir.Path(evidence.TestLog)); !strings.Contains(string(data), key) {
		t.Fatal("a file that was not named was swept")
	}
	Sweep(s, secrets)
	if data, _ := os.ReadFile(s.Dir.Path(evidence.TestLog)); string(data) != "test printed [REDACTED:MY_KEY]\n" || !s.OK() {
		t.Fatalf("test.log %q, blockers %v", data, s.Report.Blockers)
	}
	write(evidence.EventsFile, `{"data":"`+key+`"}`+"\n")
	Sweep(s, secrets)
	if len(s.Report.Blockers) != 1 || s.Report.Blockers[0].Code != ctoharness.BlockSecretInEvidence || s.Report.Blockers[0].Step != ctoharness.StepReport ||
		s.Report.Blockers[0].Message != "the event log holds the value of MY_KEY and cannot be rewritten without breaking its hash chain" {
		t.Fatalf("blockers %+v", s.Report.Blockers)
	}
	if data, _ := os.ReadFile(s.Dir.Path(evidence.EventsFile)); !strings.Contains(string(data), key) {
		t.Fatal("the hash-chained event log was rewritten")
	}
}

func TestDropKeyedStore(t *testing.T) {
	var none *Agent
	none.DropKeyedStore(func(string) error { t.Fatal("no agent, yet the store was removed"); return nil })
	s := sink(t)
	a := &Agent{s: s}
	a.DropKeyedStore(func(string) error { t.Fatal("no key in the result, yet the store was removed"); return nil })
	a.keyInResult = true
	var removed string
	a.DropKeyedStore(func(p string) error { removed = p; return errors.New("busy") })
	if removed != s.Dir.Path(evidence.StoreDir) {
		t.Fatalf("removed %q", removed)
	}
	b := s.Report.Blockers
	if len(b) != 1 || b[0].Code != ctoharness.BlockSecretInEvidence || b[0].Step != ctoharness.StepReport ||
		b[0].Message != "the store "+removed+" holds the agent's key and could not be removed (busy): delete it, and rotate the key" {
		t.Fatalf("blockers %+v", b)
	}
}

func TestCheckRefusals(t *testing.T) {
	ok := Options{Name: string(agent.QwenCode), Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "MY_KEY", Command: []string{"/bin/true"}}
	env := func(k string) string {
		if k == "MY_KEY" {
			return key
		}
		return ""
	}
	for _, tc := range []struct {
		name    string
		in      Input
		code    ctoharness.BlockerCode
		message string
		record  bool
	}{
		{"unknown agent", Input{Options: Options{Name: "nope"}}, ctoharness.BlockAgentConfigInvalid, "unknown agent", false},
		{"no Case process", Input{Options: ok, Stage: 1}, ctoharness.BlockAgentConfigInvalid, "stage 1 has no Case process", true},
		{"incomplete", Input{Options: Options{Name: ok.Name}, HasCase: true}, ctoharness.BlockAgentConfigInvalid, "needs --model, --base-url, --api-key-env", true},
		{"not http", Input{Options: func() Options { o := ok; o.BaseURL = "ftp://x"; return o }(), HasCase: true}, ctoharness.BlockAgentConfigInvalid, "is not an http(s) URL", true},
		{"key unset", Input{Options: ok, HasCase: true, Getenv: func(string) string { return "" }}, ctoharness.BlockAgentConfigInvalid, "MY_KEY named by --api-key-env is not set", true},
		{"not installed", Input{Options: func() Options { o := ok; o.Command, o.Dir = nil, t.TempDir(); return o }(), HasCase: true, Getenv: env},
			ctoharness.BlockAgentNotInstalled, "is not in", true},
		{"unreachable", Input{Options: ok, HasCase: true, Getenv: env}, ctoharness.BlockModelEndpointUnreachable, "cannot be reached", true},
	} {
		s := runsink.New("r", "n", nil, nil, &ctoharness.Report{Blockers: []ctoharness.Blocker{}}, time.Now, nil)
		if a := Check(context.Background(), s, tc.in); a != nil {
			t.Errorf("%s: the agent was accepted", tc.name)
			continue
		}
		b := s.Report.Blockers
		if len(b) != 1 || b[0].Code != tc.code || b[0].Step != ctoharness.StepGate || !strings.Contains(b[0].Message, tc.message) {
			t.Errorf("%s: blockers %+v, want %s with %q", tc.name, b, tc.code, tc.message)
		}
		if (s.Report.Agent != nil) != tc.record {
			t.Errorf("%s: report.agent %+v", tc.name, s.Report.Agent)
		}
	}
}

func TestPlanRefusals(t *testing.T) {
	c := task.Contract{Task: "t", FixturePath: "/fx"}
	env := []string{"PATH=/usr/bin"}
	argv, got, b := Plan(Options{Name: string(agent.Codex), APIKeyEnv: "MY_KEY", Command: []string{"/bin/codex"}}, func(string) string { return "" }, c, "/s", env)
	if b == nil || b.Code != ctoharness.BlockAgentConfigInvalid || b.Step != ctoharness.StepGate || len(argv) != 0 || argv == nil || !reflect.DeepEqual(got, env) {
		t.Fatalf("key unset: %v %v %+v", argv, got, b)
	}
	argv, got, b = Plan(Options{Name: string(agent.Codex), Model: "m", BaseURL: "http://m/v1", APIKeyEnv: "MY_KEY", Command: []string{"/bin/codex"}},
		func(string) string { return key }, c, "/s", env)
	if b != nil || len(argv) == 0 || argv[0] != "/bin/codex" || strings.Contains(strings.Join(append(argv, got...), " "), key) {
		t.Fatalf("planned: %v %v %+v", argv, got, b)
	}
}
