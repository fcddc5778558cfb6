package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/task"
)

// adversaryStandIn is an executable that behaves like an agent as far as
// the adversary's step can tell: it asks its model once, through the base
// URL it was given (the harness's meter), then writes a TAP test into its
// working directory and prints the key it was given.
func adversaryStandIn(t *testing.T) []string {
	t.Helper()
	script := `#!/bin/sh
code=$(curl -s -o /dev/null -w '%{http_code}' "$OPENAI_BASE_URL/chat/completions" -H 'content-type: application/json' \
  -d '{"model":"scripted-model","messages":[{"role":"user","content":"write the tests"}]}')
echo "the model answered $code"
# Nothing but the meter is reachable.
if curl -sf -m 2 -o /dev/null http://1.1.1.1/ ; then echo "reached the internet"; fi
mkdir -p adv
printf '%s\n' "printf '1..1\\n'" "if grep -rq 'note added by the fake Case' docs; then echo 'ok 1 - the note'; else echo 'not ok 1 - the note'; fi" > adv/run.sh
echo "stand-in adversary: my key is $OPENAI_API_KEY"
`
	p := filepath.Join(t.TempDir(), "adversary-agent")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{p}
}

// An adversary that is a coding agent (here a stand-in for qwen-code)
// runs in its own sandbox with its model meter as its only endpoint: its
// request is metered and recorded, its key never reaches the evidence,
// and its test counts.
func TestAdversaryAgent(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	base, _ := sharedStage3(t, set)
	srv, err := modelserver.Start(modelserver.Options{Script: modelserver.Script{Turns: []modelserver.Turn{{Action: modelserver.ActionText, Text: "tests written"}}}}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	o := base
	spec := *o.Spec
	spec.Adversary = &task.SpecAdversary{Agent: &task.AdversaryAgent{Name: "qwen-code", Model: "scripted-model", BaseURL: srv.URL() + "/v1", APIKeyEnv: agentKeyVar},
		TestCommand: "sh adv/run.sh > adv.tap", TestResults: task.TestResults{Format: "tap", Path: "adv.tap"}}
	o.Spec = &spec
	o.AutoConfirm = true
	o.AdversaryCommand = adversaryStandIn(t)
	get := o.Getenv
	o.Getenv = func(k string) string {
		if k == agentKeyVar {
			return agentKey
		}
		return get(k)
	}
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.AdversaryLog))
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s, blockers %v\nadversary.log:\n%s", rep.Status, rep.Blockers, log)
	}
	a := rep.Adversarial
	if a == nil || a.Agent == nil || a.Discriminating != 1 {
		t.Fatalf("adversarial record %+v", a)
	}
	if u := a.Agent.Usage; u == nil || u.Requests != 1 || a.Agent.Name != "qwen-code" || a.Agent.Model != "scripted-model" || a.Agent.Requests == "" {
		t.Fatalf("the adversary agent's record %+v (usage %+v)", a.Agent, a.Agent.Usage)
	}
	if a.Agent.SameAsCase {
		t.Error("the fake Case is not the adversary's agent")
	}
	if !strings.Contains(string(log), "the model answered 200") || strings.Contains(string(log), "reached the internet") {
		t.Errorf("the adversary's network was not its meter alone:\n%s", log)
	}
	if !strings.Contains(string(log), "stand-in adversary: my key is") {
		t.Errorf("adversary.log lacks the stand-in's output:\n%s", log)
	}
	if n := rep.Network; n == nil || len(n.Policy.Adversary) != 1 {
		t.Errorf("the network policy does not list the adversary's meter: %+v", n)
	}
	if noKeyInEvidence(t, rep.RunArtifactDir); t.Failed() {
		return
	}
	netlog, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.NetworkLog))
	if !strings.Contains(string(netlog), `"command":"adversary"`) || !strings.Contains(string(netlog), "1.1.1.1") {
		t.Errorf("network.jsonl does not record the adversary's connections (its meter, and 1.1.1.1 denied):\n%s", netlog)
	}
	data, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, a.Agent.Requests))
	if !strings.Contains(string(data), `"api":"openai-chat"`) {
		t.Errorf("%s: %s", a.Agent.Requests, data)
	}
	page, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.ReportHTML))
	for _, frag := range []string{`id="adversary-agent"`, "qwen-code", `id="adversary-log"`, "the model answered 200"} {
		if !strings.Contains(string(page), frag) {
			t.Errorf("report.html lacks %q", frag)
		}
	}
	md, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.ReportMD))
	if !strings.Contains(string(md), "the adversary is the agent qwen-code") {
		t.Errorf("report.md does not name the adversary's agent:\n%s", md)
	}
	mustValidate(t, set, rep, true)
}
