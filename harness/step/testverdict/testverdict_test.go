package testverdict

import (
	"errors"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// TestJudge holds each verification record to the blocker it calls for.
func TestJudge(t *testing.T) {
	code := func(n int) *int { return &n }
	rec := func(class ctoharness.TestClass, exit *int) ctoharness.TestsRecord {
		return ctoharness.TestsRecord{Command: "go test ./...", Classification: class, ExitCode: exit, Reason: "exit status 1"}
	}
	setup := rec(ctoharness.TestFailure, code(sandbox.ExitSetupFailed))
	setup.StderrInline = sandbox.StderrPrefix + " cannot mount the view\n"
	refused := func(r verify.Refusal) ctoharness.TestsRecord {
		x := rec(ctoharness.TestNotRun, nil)
		x.Refusal, x.ScopeReason = string(r), "../other"
		return x
	}
	cases := []struct {
		name      string
		in        Input
		code      ctoharness.BlockerCode // "" for no blocker
		inMessage string
	}{
		{name: "pass", in: Input{Rec: rec(ctoharness.TestPass, code(0)), Sandboxed: true}},
		{name: "failure names the log and the unreached endpoint", in: Input{Rec: rec(ctoharness.TestFailure, code(1)), Log: "/nonexistent/test.log", Unreached: " (proxy.golang.org:443 was not reached)"},
			code: ctoharness.BlockTestsFailed, inMessage: "(exit status 1) (proxy.golang.org:443 was not reached); full log: /nonexistent/test.log"},
		{name: "sandbox setup failure", in: Input{Rec: setup, Sandboxed: true}, code: ctoharness.BlockSandboxUnavailable, inMessage: "cannot mount the view"},
		{name: "setup marker without the sandbox is a failure", in: Input{Rec: setup}, code: ctoharness.BlockTestsFailed},
		{name: "dangerous", in: Input{Rec: refused(verify.RefusedDangerous)}, code: ctoharness.BlockDangerousScript, inMessage: "--allow-dangerous"},
		{name: "scope", in: Input{Rec: refused(verify.RefusedScope)}, code: ctoharness.BlockTestScope, inMessage: "../other"},
		{name: "budget", in: Input{Rec: refused(verify.RefusedBudget), Profile: "strict"}, code: ctoharness.BlockTestBudget, inMessage: "strict profile"},
		{name: "smoke profile runs no tests", in: Input{Rec: refused(verify.RefusedProfile)}},
		{name: "timeout", in: Input{Rec: rec(ctoharness.TestTimeout, nil)}, code: ctoharness.BlockTestTimeout},
		{name: "flake", in: Input{Rec: rec(ctoharness.TestFlake, code(0))}, code: ctoharness.BlockTestFlake, inMessage: "flaky"},
		{name: "governance", in: Input{Rec: rec(ctoharness.TestGovUnav, nil)}, code: ctoharness.BlockGovernanceUnavailable},
		{name: "not run", in: Input{Rec: rec(ctoharness.TestNotRun, nil)}, code: ctoharness.BlockTestNotRun, inMessage: "did not run"},
		{name: "not run for a start error is blocked once", in: Input{Rec: rec(ctoharness.TestNotRun, nil), Err: errors.New("fork")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := Judge(c.in)
			switch {
			case c.code == "" && b != nil:
				t.Fatalf("blocked %s: %s; want no blocker", b.Code, b.Message)
			case c.code == "":
				return
			case b == nil:
				t.Fatalf("no blocker, want %s", c.code)
			}
			if b.Code != c.code || b.Step != ctoharness.StepVerify {
				t.Errorf("blocker %s at %s, want %s at verify", b.Code, b.Step, c.code)
			}
			if !strings.Contains(b.Message, c.inMessage) {
				t.Errorf("message %q lacks %q", b.Message, c.inMessage)
			}
		})
	}
}
