package harness_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// gradedModule is a small Go module with a bug in Sum; sumFix is the
// patch that fixes it, which the fake Case applies.
var gradedModule = map[string]string{
	"go.mod":      "module example.com/sum\n\ngo 1.21\n",
	"sum.go":      "package sum\n\n// Sum adds two integers.\nfunc Sum(a, b int) int {\n\tif a < 0 {\n\t\ta = -a\n\t}\n\treturn a + b\n}\n",
	"sum_test.go": "package sum\n\nimport \"testing\"\n\nfunc TestSumPositive(t *testing.T) {\n\tif Sum(1, 2) != 3 {\n\t\tt.Fatal(\"1+2\")\n\t}\n}\n",
}

const sumFix = `--- a/sum.go
+++ b/sum.go
@@ -2,8 +2,5 @@ package sum
 
 // Sum adds two integers.
 func Sum(a, b int) int {
-	if a < 0 {
-		a = -a
-	}
 	return a + b
 }
`

// gradedBench is a benchmark's runs directory with stage 2 validated and
// an owned git repository of gradedModule.
func gradedBench(b *testing.B) (*schemas.Set, string, string, attest.Keys, string) {
	set := compileB(b)
	runs := b.TempDir()
	exe, _ := os.Executable()
	keys := testKeys(b)
	if res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys}); !res.OK {
		b.Fatalf("stage 2: %v", res.Errors)
	}
	src := filepath.Join(b.TempDir(), "owned", "sum")
	for name, data := range gradedModule {
		writeFile(b, filepath.Join(src, name), data)
	}
	run(b, src, "git", "init", "-q", "-b", "main")
	run(b, src, "git", "add", "-A")
	run(b, src, "git", "-c", "user.name=bench", "-c", "user.email=bench@invalid", "commit", "-q", "-m", "sum")
	return set, runs, exe, keys, src
}

// BenchmarkGradedBaseline measures what grading against the baseline
// costs: a graded Go task (a hidden fail-to-pass test, a pass-to-pass
// test, go test -json) whose Case applies the fix. It reports the baseline
// step's time as a ratio to the result's verification command, and the
// harness's own part of it (the baseline step but its command: checkout,
// hidden tests, sandbox, reading the report) as a share of the result's
// verification time, which should be at most 5 %.
func BenchmarkGradedBaseline(b *testing.B) {
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("the go command is not on PATH")
	}
	set, runs, exe, keys, src := gradedBench(b)
	aside := b.TempDir()
	hidden := filepath.Join(aside, "hidden")
	writeFile(b, filepath.Join(hidden, "sum_hidden_test.go"), "package sum\n\nimport \"testing\"\n\nfunc TestSumNegatives(t *testing.T) {\n\tif Sum(-1, -2) != -3 {\n\t\tt.Fatal(\"-1-2\")\n\t}\n}\n")
	patch := filepath.Join(aside, "patch", "fix.patch")
	writeFile(b, patch, sumFix)
	spec, err := task.Parse([]byte(`{"task": "Fix Sum for negative numbers.", "allowed_paths": ["sum.go"], "hidden_tests": "`+hidden+`",
		"test_results": {"format": "go-test-json", "path": "results.json"},
		"fail_to_pass": ["example.com/sum.TestSumNegatives"], "pass_to_pass": ["example.com/sum.TestSumPositive"],
		"verification": {"command": "go test -count=1 -json ./... > results.json", "timeout_seconds": 300}}`), "graded", set.Validator(schemas.TaskSpec))
	if err != nil {
		b.Fatal(err)
	}
	o := harness.Options{Stage: 3, Source: src, Spec: &spec, RunsDir: runs, Schemas: set, SelfExe: exe,
		Config: config.Config{OwnedSources: []string{src}, Sandbox: &config.Sandbox{ViewPaths: config.ViewPaths{ReadPaths: []string{filepath.Dir(patch)}}}},
		Lane:   ctoharness.LaneFake, Scenario: "apply-patch=" + patch,
		Getenv:    env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3", "PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}.get,
		VerifyRun: validators.StageRunVerifier(set), Signing: keys}
	var baseline, command, verification int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := harness.Run(context.Background(), o)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("run: %v %v", err, rep.Blockers)
		}
		bl := rep.Tests.Results.Grading.Baseline
		if bl == nil || !bl.Ran || len(bl.PassToPass) != 1 {
			b.Fatalf("the baseline did not run and hold both lists: %+v", bl)
		}
		baseline, command, verification = baseline+bl.DurationMs, command+bl.CommandMs, verification+rep.Tests.DurationMs
	}
	b.StopTimer()
	ratio := float64(baseline) / float64(verification)
	own := float64(baseline-command) / float64(verification)
	b.ReportMetric(ratio, "x-result-verification")
	b.ReportMetric(100*own, "harness-%-of-verification")
	if own > 0.05 {
		b.Errorf("the baseline step's own work (all but its command) took %.1f %% of the result's verification time; the target is ≤ 5 %%", 100*own)
	}
}

// BenchmarkAdversaryOverhead measures what the adversarial step costs
// besides the adversary's own run and its tests' runs: the result's
// checkout for the adversary, reading and screening its files, the
// baseline's and the result's checkouts for its tests, their sandboxes
// and reading their reports. The adversary is a command that copies one
// TAP test; the target is at most 1 s of the harness's own work per run.
func BenchmarkAdversaryOverhead(b *testing.B) {
	set, runs, exe, keys, src := gradedBench(b)
	tests := filepath.Join(b.TempDir(), "adv")
	writeFile(b, filepath.Join(tests, "adv", "run.sh"), "printf '1..1\\n'; if grep -q 'a < 0' sum.go; then echo 'not ok 1 - fixed'; else echo 'ok 1 - fixed'; fi\n")
	patch := filepath.Join(b.TempDir(), "patch", "fix.patch")
	writeFile(b, patch, sumFix)
	spec := task.Spec{Task: "Fix Sum for negative numbers.", AllowedPaths: []string{"sum.go"}, CaseTimeoutSeconds: 60,
		Verification: task.Verification{Command: "true", TimeoutSeconds: 60},
		Adversary: &task.SpecAdversary{Command: []string{"/bin/cp", "-R", tests + "/.", "."}, TestCommand: "sh adv/run.sh > adv.tap",
			TestResults: task.TestResults{Format: "tap", Path: "adv.tap"}}}
	o := harness.Options{Stage: 3, Source: src, Spec: &spec, RunsDir: runs, Schemas: set, SelfExe: exe, AutoConfirm: true,
		Config: config.Config{OwnedSources: []string{src}, Sandbox: &config.Sandbox{ViewPaths: config.ViewPaths{ReadPaths: []string{filepath.Dir(patch), tests}}}},
		Lane:   ctoharness.LaneFake, Scenario: "apply-patch=" + patch,
		Getenv:    env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3", "PATH": os.Getenv("PATH")}.get,
		VerifyRun: validators.StageRunVerifier(set), Signing: keys}
	var step, own int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := harness.Run(context.Background(), o)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("run: %v %v", err, rep.Blockers)
		}
		a := rep.Adversarial
		if a == nil || a.Discriminating != 1 {
			b.Fatalf("the adversary's test did not count: %+v", a)
		}
		step += a.StepMs
		own += a.StepMs - a.DurationMs - a.TestsMs
	}
	b.StopTimer()
	perRun := float64(own) / float64(b.N)
	b.ReportMetric(perRun, "harness-ms/run")
	b.ReportMetric(float64(own)/float64(step), "harness-share-of-step")
	if perRun > 1000 {
		b.Errorf("the adversarial step's own work took %.0f ms per run; the target is ≤ 1000 ms", perRun)
	}
}
