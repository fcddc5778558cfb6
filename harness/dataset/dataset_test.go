package dataset

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/schemas"
)

func TestSWEBenchImport(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the instance is built by testdata/make_instance.py")
	}
	dir := t.TempDir()
	repos, out := filepath.Join(dir, "repos"), filepath.Join(dir, "tasks")
	instances := filepath.Join(dir, "instances.jsonl")
	if b, err := exec.Command("python3", "testdata/make_instance.py", filepath.Join(repos, "pyrepo"), instances).CombinedOutput(); err != nil {
		t.Fatalf("make_instance.py: %v\n%s", err, b)
	}
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(instances)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := SWEBench(context.Background(), f, Options{ReposDir: repos, OutDir: out, Setup: "true",
		Validate: set.Validator(schemas.TaskSpec), Batch: set.Validator(schemas.BatchSpec)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Imported) != 1 || len(res.Skipped) != 1 || len(res.Batches) != 1 {
		t.Fatalf("imported %+v, skipped %+v, batches %v", res.Imported, res.Skipped, res.Batches)
	}
	if !strings.Contains(res.Skipped[0].Reason, "deletes nope.py") {
		t.Errorf("the instance whose test patch deletes a file: %s", res.Skipped[0].Reason)
	}
	imp := res.Imported[0]
	hidden, err := os.ReadFile(filepath.Join(out, imp.ID, HiddenDir, "tests", "test_calc.py"))
	if err != nil || !strings.Contains(string(hidden), "def test_add():") || !strings.Contains(string(hidden), "def test_neg():") {
		t.Errorf("the hidden test is the base's file with the test patch applied: %q, %v", hidden, err)
	}
	spec, _ := os.ReadFile(imp.Task)
	for _, want := range []string{`"tests.test_calc.test_add"`, `"tests.test_calc.test_neg"`, `"base": "` + imp.Base, `"hidden_tests": "hidden"`, ResultsFile} {
		if !strings.Contains(string(spec), want) {
			t.Errorf("the task spec lacks %s:\n%s", want, spec)
		}
	}
	ref, _ := os.ReadFile(imp.Reference)
	if !strings.Contains(string(ref), "+    return a + b") {
		t.Errorf("the reference patch: %s", ref)
	}
	batch, _ := os.ReadFile(res.Batches[0])
	if !strings.Contains(string(batch), `"spec": "demo__pyrepo-1/task.json"`) {
		t.Errorf("the batch spec: %s", batch)
	}
}

func TestPatchApply(t *testing.T) {
	old := []byte("a\nb\nc\nd\n")
	fps, err := parsePatch([]byte("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,2 +2,3 @@\n b\n-c\n+C\n+c2\n"))
	if err != nil || len(fps) != 1 {
		t.Fatal(err, fps)
	}
	got, err := fps[0].apply(old)
	if err != nil || string(got) != "a\nb\nC\nc2\nd\n" {
		t.Errorf("apply = %q, %v", got, err)
	}
	if _, err := fps[0].apply([]byte("a\nx\nc\nd\n")); err == nil {
		t.Error("a hunk whose context does not match applied")
	}
	fps, _ = parsePatch([]byte("diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n"))
	if got, err := fps[0].apply(nil); err != nil || string(got) != "x\ny" {
		t.Errorf("a new file = %q, %v", got, err)
	}
}
