package harness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// A graded task on a small real Go module: a hidden test, which Case never
// sees, is the judge, and the verdict is read test by test from `go test
// -json`. The visible test passes on the bug and on the fix; the hidden
// one fails on the bug (the run fails and names it) and passes on the fix.
// Both runs read the host's warm Go caches (caches.go), so the standard
// library is not compiled again per run; a Go module built and tested in a
// cold build cache inside the sandbox is the matrix row sandbox-view-go-test.
func TestGradedGoTaskWithHiddenTests(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	set := compile(t)
	base, _ := stage3(t, set)
	hidden := filepath.Join(t.TempDir(), "hidden")
	writeFile(t, filepath.Join(hidden, "sum_hidden_test.go"), `package sum

import "testing"

func TestSumNegatives(t *testing.T) {
	if got := Sum(-1, -2); got != -3 {
		t.Fatalf("Sum(-1, -2) = %d, want -3", got)
	}
}
`)
	for _, c := range []struct {
		name, body string
		want       ctoharness.Status
		failing    []string
	}{
		{"bug", "if a < 0 {\n\t\ta = -a\n\t}\n\tif b < 0 {\n\t\tb = -b\n\t}\n\treturn a + b", ctoharness.StatusFailed, []string{"example.com/sum.TestSumNegatives"}},
		{"fix", "return a + b", ctoharness.StatusPass, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := recipeRepo(t, map[string]string{
				"go.mod":      "module example.com/sum\n\ngo 1.21\n",
				"sum.go":      "package sum\n\n// Sum adds two integers.\nfunc Sum(a, b int) int {\n\t" + c.body + "\n}\n",
				"sum_test.go": "package sum\n\nimport \"testing\"\n\nfunc TestSumPositive(t *testing.T) {\n\tif Sum(1, 2) != 3 {\n\t\tt.Fatal(\"1+2\")\n\t}\n}\n",
				"docs/README": "notes\n",
			})
			o := base
			o.Source = src
			o.Config = config.Config{OwnedSources: []string{src}, Caches: &config.Caches{Go: true}}
			o.Getenv = newGoRepo(t).getenv(o.Getenv)
			s, err := task.Parse([]byte(fmt.Sprintf(`{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"], "hidden_tests": %q,
				"test_results": {"format": "go-test-json", "path": "results.json"},
				"verification": {"command": "go test -count=1 -json ./... > results.json", "timeout_seconds": 300}}`, hidden)), "graded", set.Validator(schemas.TaskSpec))
			if err != nil {
				t.Fatal(err)
			}
			o.Spec = &s
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "test.log"))
			if rep.Status != c.want {
				t.Fatalf("status %s, blockers %v, want %s\ntest.log:\n%s", rep.Status, rep.Blockers, c.want, log)
			}
			r := rep.Tests.Results
			if r == nil || r.Total != 2 || r.Artifact != "tests.json" || strings.Join(r.Failing, ",") != strings.Join(c.failing, ",") {
				t.Fatalf("results %+v, want 2 tests failing %v", r, c.failing)
			}
			if h := rep.HiddenTests; h == nil || h.Files != 1 || h.Archive == "" {
				t.Errorf("hidden tests %+v", h)
			}
			data, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "tests.json"))
			if !strings.Contains(string(data), `"id": "example.com/sum.TestSumNegatives"`) || !strings.Contains(string(data), `"id": "example.com/sum.TestSumPositive"`) {
				t.Errorf("tests.json does not list both tests:\n%s", data)
			}
			contract, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "task.json"))
			if strings.Contains(string(contract), hidden) || !strings.Contains(string(contract), `"hidden_tests": true`) {
				t.Errorf("the contract names the hidden tests' place, or does not say they exist:\n%s", contract)
			}
			if rep.Sandbox.KeptBuildCache == nil {
				t.Error("the run read the warm Go caches but recorded no kept build cache")
			}
			mustValidate(t, set, rep, c.want == ctoharness.StatusPass)
		})
	}
}
