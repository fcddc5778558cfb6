package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// A container-style task names absolute paths: the repository at /app,
// the tests at /tests, the verifier's reward at /logs/verifier. Its layout
// links them into the sandbox's views, and the reward is the one graded
// test: a fix passes (the reward failing on the base), a wrong change
// fails, and a verifier that rewards anything makes the task invalid.
func TestLayoutRewardTask(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	base, _ := sharedStage3(t, set)
	aside := t.TempDir()
	const judge = `#!/bin/sh
set -eu
mkdir -p /logs/verifier
cd /app || exit 3
if [ "$(sh greet.sh)" = hello ] && [ -x /tests/test.sh ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
`
	const fix = "diff --git a/greet.sh b/greet.sh\n--- a/greet.sh\n+++ b/greet.sh\n@@ -1 +1 @@\n-echo helo\n+echo hello\n"
	// A result that plants a passing reward and a link where the tests go:
	// the report path is cleared and the link replaced before the verifier
	// (which writes a reward only on success) runs.
	const planted = "diff --git a/greet.sh b/greet.sh\n--- a/greet.sh\n+++ b/greet.sh\n@@ -1 +1 @@\n-echo helo\n+echo hullo\n" +
		"diff --git a/.cto-harness/logs/reward.txt b/.cto-harness/logs/reward.txt\nnew file mode 100644\n--- /dev/null\n+++ b/.cto-harness/logs/reward.txt\n@@ -0,0 +1 @@\n+1\n" +
		"diff --git a/.cto-harness/tests b/.cto-harness/tests\nnew file mode 120000\n--- /dev/null\n+++ b/.cto-harness/tests\n@@ -0,0 +1 @@\n+/\n\\ No newline at end of file\n"
	const onlyOnSuccess = "#!/bin/sh\nfor f in /tests/*.sh; do [ \"$f\" = /tests/test.sh ] || . \"$f\"; done\ncd /app && [ \"$(sh greet.sh)\" = hello ] && echo 1 > /logs/verifier/reward.txt\nexit 0\n"
	// A result that plants a helper beside the tests, which a verifier that
	// sources every script there would run: the directory is emptied first.
	const besideTests = "diff --git a/greet.sh b/greet.sh\n--- a/greet.sh\n+++ b/greet.sh\n@@ -1 +1 @@\n-echo helo\n+echo hullo\n" +
		"diff --git a/.cto-harness/tests/zz.sh b/.cto-harness/tests/zz.sh\nnew file mode 100644\n--- /dev/null\n+++ b/.cto-harness/tests/zz.sh\n@@ -0,0 +1,2 @@\n+echo 1 > /logs/verifier/reward.txt\n+exit 0\n"
	const wrong = "diff --git a/greet.sh b/greet.sh\n--- a/greet.sh\n+++ b/greet.sh\n@@ -1 +1 @@\n-echo helo\n+echo hullo\n"
	for _, c := range []struct {
		name, test, patch string
		want              ctoharness.Status
		code              ctoharness.BlockerCode
	}{
		{"fix", judge, fix, ctoharness.StatusPass, ""},
		{"wrong", judge, wrong, ctoharness.StatusFailed, ctoharness.BlockTestsFailed},
		{"rewards-anything", "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n", fix, ctoharness.StatusBlocked, ctoharness.BlockTaskInvalid},
		{"planted", onlyOnSuccess, planted, ctoharness.StatusBlocked, ctoharness.BlockTestNotRun},
		{"beside-tests", onlyOnSuccess, besideTests, ctoharness.StatusBlocked, ctoharness.BlockTestNotRun},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := recipeRepo(t, map[string]string{"greet.sh": "echo helo\n", "README": "greets\n"})
			hidden := filepath.Join(aside, c.name, "hidden")
			writeFile(t, filepath.Join(hidden, ".cto-harness", "tests", "test.sh"), c.test)
			if err := os.Chmod(filepath.Join(hidden, ".cto-harness", "tests", "test.sh"), 0o755); err != nil {
				t.Fatal(err)
			}
			patch := filepath.Join(aside, c.name, "patch", "change.patch")
			writeFile(t, patch, c.patch)
			spec, err := task.Parse([]byte(`{"task": "Fix the greeting in /app/greet.sh.", "allowed_paths": ["**"], "hidden_tests": "`+hidden+`",
				"layout": {"workdir": "/app", "links": {"/tests": ".cto-harness/tests", "/logs/verifier": ".cto-harness/logs"}},
				"test_results": {"format": "reward", "path": ".cto-harness/logs/reward.txt"}, "fail_to_pass": ["reward"],
				"verification": {"command": "sh /tests/test.sh", "timeout_seconds": 60}}`), "layout", set.Validator(schemas.TaskSpec))
			if err != nil {
				t.Fatal(err)
			}
			o := base
			o.Source, o.Spec = src, &spec
			o.Config = config.Config{OwnedSources: []string{src}, Sandbox: &config.Sandbox{ViewPaths: config.ViewPaths{ReadPaths: []string{filepath.Dir(patch)}}}}
			o.Lane, o.Scenario = ctoharness.LaneFake, "apply-patch="+patch
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "test.log"))
			if rep.Status != c.want || (c.code != "" && (len(rep.Blockers) == 0 || rep.Blockers[0].Code != c.code)) {
				t.Fatalf("status %s, blockers %+v; want %s %s\ntest.log:\n%s", rep.Status, rep.Blockers, c.want, c.code, log)
			}
			links := map[string]string{}
			for _, m := range rep.Sandbox.VerificationView.Mounts {
				if m.Kind == ctoharness.ViewSymlink && (m.Path == "/app" || m.Path == "/tests" || m.Path == "/logs/verifier") {
					links[m.Path] = m.Source
				}
			}
			if len(links) != 3 || links["/tests"] != filepath.Join(links["/app"], ".cto-harness/tests") || links["/logs/verifier"] != filepath.Join(links["/app"], ".cto-harness/logs") {
				t.Errorf("the verification's view links %v, want /app, /tests and /logs/verifier into its checkout", links)
			}
			caseLinks := 0
			for _, m := range rep.Sandbox.View.Mounts {
				if m.Kind == ctoharness.ViewSymlink && m.Path == "/app" && m.Source == rep.FixturePath {
					caseLinks++
				}
			}
			if caseLinks != 1 {
				t.Errorf("Case's view does not link /app to its fixture %s", rep.FixturePath)
			}
			if c.want == ctoharness.StatusPass {
				g := rep.Tests.Results.Grading
				if g == nil || g.Baseline == nil || !g.Baseline.Ran || len(g.Baseline.FailToPass) != 1 || g.Baseline.FailToPass[0].Outcome != "fail" {
					js, _ := json.Marshal(g)
					t.Errorf("the reward was not held to failing on the base: %s", js)
				}
			}
			if c.name == "planted" && (rep.Tests.Results == nil || !rep.Tests.Results.Planted || rep.Tests.Classification == ctoharness.TestPass) {
				t.Errorf("the planted reward was not removed unread: %+v", rep.Tests)
			}
			mustValidate(t, set, rep, c.want == ctoharness.StatusPass)
		})
	}
}

// A layout needs the sandbox's view; a spec whose layout takes a path the
// view needs, or links out of the checkout, is refused when it is read.
func TestLayoutRefused(t *testing.T) {
	set := compile(t)
	for _, l := range []string{`{"workdir": "/usr/app"}`, `{"workdir": "/"}`, `{"workdir": "/app", "links": {"/app/tests": "t"}}`,
		`{"workdir": "/app", "links": {"/tests": "../x"}}`, `{"workdir": "/app", "links": {"/tests": ".git/hooks"}}`, `{"workdir": "/tmp/app"}`, `{"workdir": "/app/"}`} {
		if _, err := task.Parse([]byte(`{"task": "t", "allowed_paths": ["**"], "layout": `+l+`, "verification": {"command": "true"}}`), "layout", set.Validator(schemas.TaskSpec)); err == nil {
			t.Errorf("the layout %s was accepted", l)
		}
	}
}
