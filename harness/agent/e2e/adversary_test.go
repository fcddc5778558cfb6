package e2e

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// adversaryScript is one of the scripted model server's adversary scripts.
func adversaryScript(t *testing.T, name string) modelserver.Script {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	s, err := modelserver.LoadScript(filepath.Join(filepath.Dir(file), "..", "modelserver", "testdata", "adversary", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A real agent (qwen-code) is the adversary, against the scripted model
// server, sandboxed, with its meter as its only endpoint. Case is the fake
// Case; the task's own verification is weak (it accepts any note), so a
// wrong note passes it. The adversary's discriminating test rejects the
// wrong note and accepts the right one; a test that tells nothing does
// not count; a test that mocks subprocess and one that does not load are
// excluded with their reasons.
func TestAdversaryQwenCode(t *testing.T) {
	_, dir := requireAgent(t, agent.QwenCode)
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	base := stage3(t, set)
	tap := task.TestResults{Format: "tap", Path: "adv.tap"}
	for _, c := range []struct {
		name, script, scenario string
		results                task.TestResults
		command                string
		code                   ctoharness.BlockerCode
		discriminating         int
		excluded, imports      int
	}{
		{"right-patch", "discriminating", "pass", tap, "sh adv/run.sh > adv.tap", "", 1, 0, 0},
		{"wrong-patch", "discriminating", "break-verification", tap, "sh adv/run.sh > adv.tap", ctoharness.BlockAdversarialFailed, 1, 0, 0},
		{"not-discriminating", "not-discriminating", "break-verification", tap, "sh adv/run.sh > adv.tap", "", 0, 0, 0},
		{"mocks", "mocks", "pass", tap, "sh adv/run.sh > adv.tap", "", 1, 1, 0},
		{"no-compile", "no-compile", "pass", task.TestResults{Format: "go-test-json", Path: "adv.json"}, "cd adv && GOTOOLCHAIN=local go test -count=1 -json ./... > ../adv.json", "", 1, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := modelserver.Start(modelserver.Options{Script: adversaryScript(t, c.script)}, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			o := base
			spec := *o.Spec
			spec.Verification.Command = "test -d docs" // weak: any note passes it
			spec.Adversary = &task.SpecAdversary{Agent: &task.AdversaryAgent{Name: string(agent.QwenCode), Model: "scripted-model",
				BaseURL: baseURL(agent.QwenCode, srv), APIKeyEnv: keyVar}, TimeoutSeconds: 240, TestCommand: c.command, TestResults: c.results}
			o.Spec, o.Scenario, o.AutoConfirm = &spec, c.scenario, true
			o.Agent.Dir = dir
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.AdversaryLog))
			hasCode := c.code == ""
			for _, b := range rep.Blockers {
				hasCode = hasCode || b.Code == c.code
			}
			if !hasCode || (c.code == "" && len(rep.Blockers) > 0) {
				t.Fatalf("blockers %+v, want %q (evidence %s)\nadversary.log:\n%s", rep.Blockers, c.code, rep.RunArtifactDir, log)
			}
			a := rep.Adversarial
			if a == nil || a.Agent == nil || a.Agent.Usage == nil || a.Agent.Usage.Requests == 0 {
				t.Fatalf("the adversary agent's record: %+v", a)
			}
			imports := 0
			for _, tt := range a.Tests {
				if tt.Class == ctoharness.AdversaryFailedImport {
					imports++
				}
			}
			if a.Discriminating != c.discriminating || len(a.Excluded) != c.excluded || imports != c.imports {
				t.Fatalf("discriminating %d, excluded %+v, failed imports %d; want %d, %d, %d\ntests %+v\nadversary.log:\n%s",
					a.Discriminating, a.Excluded, imports, c.discriminating, c.excluded, c.imports, a.Tests, log)
			}
			if c.excluded > 0 && !strings.Contains(a.Excluded[0].Reason, "subprocess") {
				t.Errorf("the mocking file's reason: %+v", a.Excluded)
			}
			if rep.Network == nil || len(rep.Network.Policy.Adversary) != 1 {
				t.Errorf("the adversary's network policy: %+v", rep.Network)
			}
			page, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.ReportHTML))
			for _, frag := range []string{`id="adversary-agent"`, `id="adversarial-tests"`, `id="adversary-log"`} {
				if !strings.Contains(string(page), frag) {
					t.Errorf("report.html lacks %s", frag)
				}
			}
			res := validators.Run(context.Background(), rep.RunArtifactDir, set, validators.RunOptions{ExpectPass: c.code == ""})
			if !res.OK {
				t.Fatalf("the evidence does not validate: %v", res.Errors)
			}
		})
	}
}
