package adversary

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/qwen"
	"github.com/cto-harness/cto-harness/harness/caseworld"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
)

func TestScreen(t *testing.T) {
	for _, tc := range []struct {
		path, data string
		excluded   bool
	}{
		{"t/test_a.py", "@mock.patch('subprocess.run')\ndef test_a(run): ...\n", true},
		{"t/test_b.py", "def test_b(monkeypatch):\n    monkeypatch.setattr(requests, 'get', fake)\n", true},
		{"t/test_c.py", "import subprocess\nsubprocess.run = lambda *a: None\n", true},
		{"t/test_d.py", "import subprocess\ndef test_d():\n    assert subprocess.run(['true']).returncode == 0\n", false},
		{"t/a.test.js", "jest.mock('child_process')\n", true},
		{"t/b.test.js", "const cp = require('child_process')\n", false},
		{"x_test.go", "var execCommand = exec.Command\nfunc init() { execCommand = func(string, ...string) *exec.Cmd { return nil } }\n", true},
		{"README.md", "mock.patch('subprocess.run')", false}, // only test sources are read
	} {
		if got := Screen(tc.path, []byte(tc.data)) != ""; got != tc.excluded {
			t.Errorf("%s: excluded %v, want %v", tc.path, got, tc.excluded)
		}
	}
}

func TestClassify(t *testing.T) {
	base := []testresults.Result{{ID: "counts", Outcome: testresults.Fail}, {ID: "tells nothing", Outcome: testresults.Pass},
		{ID: "skipped", Outcome: testresults.Skip}, {ID: "does not load", Outcome: testresults.Error}, {ID: "vanishes", Outcome: testresults.Fail}}
	res := []testresults.Result{{ID: "counts", Outcome: testresults.Pass}, {ID: "tells nothing", Outcome: testresults.Fail}}
	tests, disc, failed := Classify(base, res)
	if disc != 2 || failed != 1 {
		t.Fatalf("discriminating %d failed %d, want 2 and 1: %+v", disc, failed, tests)
	}
	want := map[string]string{"counts": ctoharness.AdversaryDiscriminating, "tells nothing": ctoharness.AdversaryNotDiscriminating,
		"skipped": ctoharness.AdversaryNotDiscriminating, "does not load": ctoharness.AdversaryFailedImport, "vanishes": ctoharness.AdversaryDiscriminating}
	for _, x := range tests {
		if x.Class != want[x.ID] {
			t.Errorf("%s: class %s, want %s", x.ID, x.Class, want[x.ID])
		}
		if x.ID == "vanishes" && (x.OK || x.Result != "missing") {
			t.Errorf("a counted test missing on the result: %+v", x)
		}
		if x.ID == "tells nothing" && !x.OK {
			t.Errorf("a test that does not count failed the run: %+v", x)
		}
	}
}

// Claims are read as hostile input: a link is not followed (in any
// component), an oversized file is refused, and each refusal is a problem
// recorded, never an error.
func TestReadClaims(t *testing.T) {
	if err := caseworld.Available(); err != nil {
		t.Skip(err)
	}
	ok := func([]byte) error { return nil }
	scratch := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(outside, []byte(`{"claims": [{"claim": "from outside"}]}`), 0o644)
	os.MkdirAll(filepath.Join(scratch, "home"), 0o755)
	if _, _, problem := ReadClaims(scratch, "home/claims.json", ok); !strings.Contains(problem, "wrote no claims") {
		t.Errorf("no file: %q", problem)
	}
	os.Symlink(outside, filepath.Join(scratch, "home", "claims.json"))
	if data, _, problem := ReadClaims(scratch, "home/claims.json", ok); data != nil || problem == "" {
		t.Errorf("a link was followed: %q %q", data, problem)
	}
	os.Remove(filepath.Join(scratch, "home", "claims.json"))
	os.WriteFile(filepath.Join(scratch, "home", "claims.json"), make([]byte, MaxClaims+1), 0o644)
	if _, _, problem := ReadClaims(scratch, "home/claims.json", ok); !strings.Contains(problem, "over") {
		t.Errorf("an oversized file: %q", problem)
	}
	os.WriteFile(filepath.Join(scratch, "home", "claims.json"), []byte(`{"claims": [{"claim": "x"}, {"claim": "y"}]}`), 0o644)
	if _, n, problem := ReadClaims(scratch, "home/claims.json", ok); n != 2 || problem != "" {
		t.Errorf("two claims: %d %q", n, problem)
	}
}

// The adversary's kept files run only once someone lets them: the flag,
// or a person shown their summary. Nobody to ask, a person who says no,
// or a question that cannot be asked runs nothing, and each is told apart.
func TestRunConfirmation(t *testing.T) {
	gen := Generated{Files: []File{
		{Path: "adv/run.sh", Data: []byte("echo '1..1'\necho 'ok 1 - \x1b[2Jcleared'\n")},
		{Path: "adv/mock_test.py", Data: []byte("from unittest import mock\nmock.patch('subprocess.run')\n")},
	}}
	for _, c := range []struct {
		name      string
		auto      bool
		ask       func(ctx context.Context, s Summary) (bool, error)
		code      ctoharness.BlockerCode
		confirmed string
		ran       bool
	}{
		{"auto", true, nil, "", ctoharness.ConfirmedAuto, true},
		{"nobody", false, nil, ctoharness.BlockAdversaryNotConfirmed, "", false},
		{"declined", false, func(context.Context, Summary) (bool, error) { return false, nil }, ctoharness.BlockAdversaryNotConfirmed, ctoharness.ConfirmedDeclined, false},
		{"cannot-ask", false, func(context.Context, Summary) (bool, error) { return false, errors.New("stdin closed") }, ctoharness.BlockAdversaryFailed, "", false},
		{"confirmed", false, func(_ context.Context, s Summary) (bool, error) {
			txt := s.Text()
			if len(s.Kept) != 1 || s.Kept[0].Path != "adv/run.sh" || len(s.Excluded) != 1 || strings.Contains(txt, "\x1b") ||
				!strings.Contains(txt, `\x1b[2Jcleared`) || !strings.Contains(txt, "sh adv/run.sh") || !strings.Contains(txt, "adv/mock_test.py") {
				return false, fmt.Errorf("summary %+v:\n%s", s, txt)
			}
			return true, nil
		}, "", ctoharness.ConfirmedTerminal, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ran := false
			rec, b := Run(context.Background(), Input{Command: []string{"adv"}, TestCommand: "sh adv/run.sh > adv.tap", AutoConfirm: c.auto, Ask: c.ask,
				Generate: func(context.Context) (Generated, error) { return gen, nil },
				Tests: func(_ context.Context, onResult bool, kept []string) ([]testresults.Result, string, error) {
					ran = true
					if len(kept) != 1 || kept[0] != "adv/run.sh" {
						t.Errorf("kept %v", kept)
					}
					return []testresults.Result{{ID: "the note", Outcome: testresults.Pass}}, "adv.log", nil
				}})
			var code ctoharness.BlockerCode
			if b != nil {
				code = b.Code
			}
			if code != c.code || rec.Confirmed != c.confirmed || ran != c.ran {
				t.Fatalf("blocker %v, confirmed %q, tests ran %v; want %q, %q, %v", b, rec.Confirmed, ran, c.code, c.confirmed, c.ran)
			}
			if c.code == ctoharness.BlockAdversaryNotConfirmed && !strings.Contains(b.Message, "--auto-confirm") {
				t.Errorf("the blocker does not say how to let the tests run: %s", b.Message)
			}
			if (rec.Problem != "") != (c.code == ctoharness.BlockAdversaryFailed) {
				t.Errorf("problem %q with blocker %v", rec.Problem, b)
			}
		})
	}
}

// The adversary's agent is checked before Case: a missing key, a bad URL
// and an endpoint that is down are told apart; a started one's record
// warns when it is Case's agent and model too.
func TestStartAgent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	up := "http://" + ln.Addr().String() + "/v1"
	env := func(k string) string {
		if k == "ADV_KEY" {
			return "sk-adv-0123456789"
		}
		return ""
	}
	in := func(want task.AdversaryAgent) AgentInput {
		return AgentInput{Want: want, Getenv: env, Command: []string{"/bin/true"}, Adapter: func(s agent.Spec) agent.Adapter { return qwen.Adapter{Spec: s} }, Clock: time.Now}
	}
	for _, c := range []struct {
		name string
		want task.AdversaryAgent
		code ctoharness.BlockerCode
	}{
		{"no-key", task.AdversaryAgent{Name: "qwen-code", Model: "m", BaseURL: up, APIKeyEnv: "NO_SUCH_KEY"}, ctoharness.BlockAgentConfigInvalid},
		{"bad-url", task.AdversaryAgent{Name: "qwen-code", Model: "m", BaseURL: "ftp://x", APIKeyEnv: "ADV_KEY"}, ctoharness.BlockAgentConfigInvalid},
		{"unknown", task.AdversaryAgent{Name: "nobody", Model: "m", BaseURL: up, APIKeyEnv: "ADV_KEY"}, ctoharness.BlockAgentConfigInvalid},
		{"down", task.AdversaryAgent{Name: "qwen-code", Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "ADV_KEY"}, ctoharness.BlockModelEndpointUnreachable},
	} {
		_, err := StartAgent(context.Background(), in(c.want))
		var ae *AgentError
		if !errors.As(err, &ae) || ae.Code != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	a, err := StartAgent(context.Background(), in(task.AdversaryAgent{Name: "qwen-code", Model: "m", BaseURL: up, APIKeyEnv: "ADV_KEY"}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if rec, _ := a.Record(nil, "codex", "m"); rec.SameAsCase || rec.Warning != "" || rec.Usage == nil || rec.Usage.Requests != 0 {
		t.Errorf("another agent: %+v", rec)
	}
	if rec, _ := a.Record(nil, "qwen-code", "m"); !rec.SameAsCase || !strings.Contains(rec.Warning, "same agent and model as Case") {
		t.Errorf("the same agent and model: %+v", rec)
	}
	cmd, err := a.Command(Launch{WorkDir: "/cto-harness/adversary", State: t.TempDir(), Brief: Brief{Task: "Fix Sum.", Checkout: "/cto-harness/result", TestCommand: "go test ./...", TestResults: task.TestResults{Format: "go-test-json", Path: "r.json"}}})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(cmd.Argv, " ")
	if !strings.Contains(joined, "Fix Sum.") || !strings.Contains(joined, "Do not mock") || !strings.Contains(strings.Join(cmd.Env, " "), "OPENAI_BASE_URL=http://"+a.Endpoint()) {
		t.Errorf("the agent is not told the task and the rules, or not pointed at its meter: %v %v", cmd.Argv, cmd.Env)
	}
}
