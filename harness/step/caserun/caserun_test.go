package caserun

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
)

func event(t *testing.T, typ ctoharness.EventType, fields map[string]any) backend.CaseEvent {
	t.Helper()
	m := map[string]any{"type": string(typ)}
	for k, v := range fields {
		m[k] = v
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return backend.CaseEvent{Type: typ, Raw: raw}
}

// TestWatchBudgetStopsOnce: claimed commands are accounted until the
// budget is spent; Case is stopped once, with the first command that spent
// it, and every event is still recorded without its type field.
func TestWatchBudgetStopsOnce(t *testing.T) {
	var emitted []map[string]any
	var types []ctoharness.EventType
	claims, stops, started := 0, 0, 0
	w := &Watch{Lock: &sync.Mutex{}, Profile: "strict",
		Emit: func(typ ctoharness.EventType, d map[string]any) {
			types = append(types, typ)
			emitted = append(emitted, d)
		},
		Started: func() { started++ },
		Claim: func(cmd string) string {
			claims++
			if claims >= 2 {
				return "the command budget of 1 is spent"
			}
			return ""
		},
		Stop: func() { stops++ }}
	w.OnEvent(event(t, ctoharness.EvCaseStarted, nil))
	w.OnEvent(event(t, ctoharness.EvCaseCommand, map[string]any{"command": "go test ./..."}))
	if w.BudgetStop() != "" || stops != 0 {
		t.Fatalf("stopped after one claim: %q, %d stops", w.BudgetStop(), stops)
	}
	w.OnEvent(event(t, ctoharness.EvCaseCommand, map[string]any{"command": "make"}))
	w.OnEvent(event(t, ctoharness.EvCaseCommand, map[string]any{"command": "make again"}))
	if stops != 1 || claims != 2 {
		t.Fatalf("stops %d, claims %d; want 1 stop after 2 claims (no claim once stopped)", stops, claims)
	}
	want := `the command budget of 1 is spent (command "make", profile strict)`
	if got := w.BudgetStop(); got != want {
		t.Fatalf("budget stop %q, want %q", got, want)
	}
	if started != 1 || len(emitted) != 4 {
		t.Fatalf("started %d, emitted %d; want 1 and 4", started, len(emitted))
	}
	for i, d := range emitted {
		if _, ok := d["type"]; ok {
			t.Errorf("event %d (%s) kept its type field: %v", i, types[i], d)
		}
	}
	if emitted[2]["command"] != "make" {
		t.Errorf("third event's command %v, want make", emitted[2]["command"])
	}
}

func exited(code int) backend.Outcome {
	o := backend.Outcome{Types: map[ctoharness.EventType]bool{}}
	for _, t := range ctoharness.RequiredCaseEvents() {
		o.Types[t] = true
	}
	o.ExitCode = &code
	return o
}

func codes(v Verdict) string {
	var s []string
	for _, b := range v.Blockers {
		s = append(s, string(b.Code))
	}
	return strings.Join(s, ",")
}

// TestJudge holds each way Case can end to the blockers it gives, in order.
func TestJudge(t *testing.T) {
	writeErr := errors.New("no space left on device")
	model := &ctoharness.Blocker{Code: ctoharness.BlockModelRateLimited, Step: ctoharness.StepCase, Message: "rate limited"}
	modelErr := &ctoharness.Blocker{Code: ctoharness.BlockAgentModelError, Step: ctoharness.StepCase, Message: "model error"}
	killed := exited(0)
	killed.ExitCode, killed.Signal = nil, "killed"
	broken := exited(3)
	broken.MalformedN, broken.Malformed = 2, []string{"line 1: not JSON"}
	broken.OrderViolations = []string{"case.finished before case.started"}
	broken.Types = map[ctoharness.EventType]bool{}
	limit := exited(0)
	limit.Usage.Hit, limit.Usage.Dropped = "10 events", 4
	timedOut := exited(0)
	timedOut.ExitCode, timedOut.TimedOut = nil, true
	setup := exited(sandbox.ExitSetupFailed)
	setup.StderrInline = "noise\n" + sandbox.StderrPrefix + " landlock: not supported\n"
	start := exited(sandbox.ExitStartFailed)
	start.StderrInline = sandbox.StderrPrefix + " exec: no such file\n"
	superv := exited(supervise.ExitSetupFailed)
	superv.StderrInline = supervise.StderrPrefix + " cannot hold the process tree\n"
	cases := []struct {
		name      string
		e         Ended
		codes     string
		writeErr  bool
		startErr  bool
		inMessage string
	}{
		{name: "clean exit", e: Ended{Out: exited(0), Sandboxed: true}},
		{name: "interrupted ignores the exit", e: Ended{Out: exited(1), Interrupted: true}},
		{name: "interrupted keeps a log write failure", e: Ended{Out: exited(1), Err: writeErr, Interrupted: true}, writeErr: true},
		{name: "could not run", e: Ended{Out: backend.Outcome{}, Err: errors.New("fork/exec: permission denied"), WatchErr: errors.New("x")}, startErr: true},
		{name: "write failure and exit", e: Ended{Out: exited(2), Err: writeErr, Sandboxed: true}, writeErr: true, codes: "CASE_EXIT_NONZERO"},
		{name: "watch failure then exit", e: Ended{Out: exited(2), WatchErr: errors.New("listener closed"), Sandboxed: true},
			codes: "SANDBOX_UNAVAILABLE,CASE_EXIT_NONZERO", inMessage: "listener closed"},
		{name: "event limit ends the judgement", e: Ended{Out: limit, Profile: "strict", MaxEvents: 10, ModelStopped: model, BudgetStop: "x"},
			codes: "CASE_EVENT_LIMIT", inMessage: "4 further event(s)"},
		{name: "model stop before budget", e: Ended{Out: exited(1), ModelStopped: model, BudgetStop: "x"}, codes: "MODEL_RATE_LIMITED"},
		{name: "budget", e: Ended{Out: killed, BudgetStop: "spent (command \"make\", profile strict)"}, codes: "BUDGET_EXCEEDED", inMessage: "command \"make\""},
		{name: "sandbox setup", e: Ended{Out: setup, Sandboxed: true}, codes: "SANDBOX_UNAVAILABLE", inMessage: "landlock"},
		{name: "sandbox start", e: Ended{Out: start, Sandboxed: true}, codes: "CASE_START_FAILED", inMessage: "exec: no such file"},
		{name: "sandbox marker without the sandbox", e: Ended{Out: setup}, codes: "CASE_EXIT_NONZERO"},
		{name: "supervisor setup", e: Ended{Out: superv}, codes: "CASE_START_FAILED", inMessage: "process tree"},
		{name: "timeout", e: Ended{Out: timedOut, TimeoutSeconds: 30, ModelError: modelErr}, codes: "TIMEOUT", inMessage: "30s"},
		{name: "model error whatever the exit", e: Ended{Out: exited(0), ModelError: modelErr}, codes: "AGENT_MODEL_ERROR"},
		{name: "killed by a signal", e: Ended{Out: killed, Sandboxed: true}, codes: "CASE_EXIT_NONZERO", inMessage: "killed by killed"},
		{name: "every breach of the contract", e: Ended{Out: broken, Sandboxed: true},
			codes: "CASE_EXIT_NONZERO,CASE_EVENT_MALFORMED,CASE_EVENT_ORDER,MISSING_REQUIRED_EVENT", inMessage: "line 1: not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Judge(c.e)
			if got := codes(v); got != c.codes {
				t.Errorf("blockers %q, want %q (%+v)", got, c.codes, v.Blockers)
			}
			if (v.WriteErr != nil) != c.writeErr || (v.StartErr != nil) != c.startErr {
				t.Errorf("write error %v, start error %v; want %v, %v", v.WriteErr, v.StartErr, c.writeErr, c.startErr)
			}
			if c.startErr {
				if b := ctoharness.AsBlocker(v.StartErr, ctoharness.StepCase); b.Code != ctoharness.BlockCaseStartFailed {
					t.Errorf("start error is %s, want CASE_START_FAILED", b.Code)
				}
			}
			var all []string
			for _, b := range v.Blockers {
				if b.Step != ctoharness.StepCase {
					t.Errorf("blocker %s at %s, want the case step", b.Code, b.Step)
				}
				all = append(all, b.Message)
			}
			if c.inMessage != "" && !strings.Contains(strings.Join(all, "\n"), c.inMessage) {
				t.Errorf("no blocker message holds %q: %q", c.inMessage, all)
			}
		})
	}
}

func TestMergeKeys(t *testing.T) {
	for _, tc := range []struct {
		have, add, want []string
	}{
		{nil, nil, nil},
		{[]string{"PATH", "HOME"}, nil, []string{"HOME", "PATH"}},
		{[]string{"HOME", "PATH"}, []string{"OPENAI_API_KEY", "PATH", "HOME"}, []string{"HOME", "OPENAI_API_KEY", "PATH"}},
	} {
		have := append([]string(nil), tc.have...)
		if got := mergeKeys(tc.have, tc.add); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("mergeKeys(%v, %v) = %v, want %v", tc.have, tc.add, got, tc.want)
		}
		if !reflect.DeepEqual(have, tc.have) {
			t.Errorf("mergeKeys changed its input: %v", tc.have)
		}
	}
}
