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

// harborTask writes a Harbor task directory: files by path below dir/name.
func harborTask(t *testing.T, dir, name string, files map[string]string) {
	t.Helper()
	base := map[string]string{
		"task.toml":      "version = \"1.0\"\n[verifier]\ntimeout_sec = 90.0\n[agent]\ntimeout_sec = 200.0\n[environment]\nallow_internet = true\n",
		"instruction.md": "Do the thing in /app.\n",
		"tests/test.sh":  "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\necho 1 > /logs/verifier/reward.txt\n",
	}
	for k, v := range files {
		base[k] = v
	}
	for rel, data := range base {
		if data == "" {
			continue
		}
		p := filepath.Join(dir, name, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHarborImport(t *testing.T) {
	dir := t.TempDir()
	ds, out := filepath.Join(dir, "dataset"), filepath.Join(dir, "out")
	harborTask(t, ds, "copies", map[string]string{
		"environment/Dockerfile": "FROM python:3.13\nWORKDIR /app\nCOPY src/ ./src/\nCOPY [\"cfg.ini\", \"/etc/cfg.ini\"]\nCOPY run.sh .\nENV X=1\n",
		"environment/src/a.py":   "print('a')\n", "environment/src/pkg/b.py": "print('b')\n",
		"environment/cfg.ini": "k=v\n", "environment/run.sh": "#!/bin/sh\n", "environment/.dockerignore": "*.md\n",
		"solution/solve.sh": "sed -i s/a/A/ /app/src/a.py\n",
	})
	harborTask(t, ds, "empty", map[string]string{"environment/Dockerfile": "FROM ubuntu\nWORKDIR /work/space\n",
		"task.toml": "schema_version = \"2.0\"\n[task]\nname = \"x/empty\"\n[environment]\nnetwork_mode = \"public\"\n"})
	for name, df := range map[string]string{
		"clones":     "FROM ubuntu\nWORKDIR /app\nRUN git clone https://github.com/x/y . && git checkout abc\n",
		"stages":     "FROM golang AS build\nFROM ubuntu\nWORKDIR /app\n",
		"noworkdir":  "FROM ubuntu\nCOPY a /a\n",
		"fetches":    "FROM ubuntu\nWORKDIR /app\nADD https://example.com/x.tar.gz /app/\n",
		"wildcard":   "FROM ubuntu\nWORKDIR /app\nCOPY *.py /app/\n",
		"fromstage":  "FROM ubuntu\nWORKDIR /app\nCOPY --from=builder /out /app\n",
		"leaves":     "FROM ubuntu\nWORKDIR /app\nCOPY ../secret /app/\n",
		"rewardjson": "FROM ubuntu\nWORKDIR /app\n",
	} {
		files := map[string]string{"environment/Dockerfile": df}
		if name == "rewardjson" {
			files["tests/test.sh"] = "#!/bin/bash\necho '{\"reward\": 1}' > /logs/verifier/reward.json\n"
		}
		harborTask(t, ds, name, files)
	}
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{OutDir: out, Validate: set.Validator(schemas.TaskSpec), Batch: set.Validator(schemas.BatchSpec)}
	res, err := Harbor(context.Background(), []string{ds}, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"clones": "git clone", "stages": "more than one stage", "noworkdir": "no WORKDIR", "fetches": "network",
		"wildcard": "wildcard", "fromstage": "another image or stage", "leaves": "leaves the build context", "rewardjson": "reward.json"}
	for _, s := range res.Skipped {
		if w, ok := want[s.ID]; !ok || !strings.Contains(s.Reason, w) {
			t.Errorf("skipped %s: %q, want a reason naming %q", s.ID, s.Reason, w)
		}
		delete(want, s.ID)
	}
	if len(want) != 0 || len(res.Imported) != 2 || len(res.Batches) != 1 {
		t.Fatalf("imported %+v, not skipped %v, batches %v", res.Imported, want, res.Batches)
	}
	var copies, empty Imported
	for _, imp := range res.Imported {
		switch imp.ID {
		case "copies":
			copies = imp
		case "empty":
			empty = imp
		}
	}
	if !strings.Contains(strings.Join(empty.Notes, "\n"), "allows the internet") || gitTree(t, empty.Source, empty.Base) != ".gitkeep" {
		t.Errorf("the task with an empty workdir and a public network: notes %v, tree %q", empty.Notes, gitTree(t, empty.Source, empty.Base))
	}
	if spec, _ := os.ReadFile(empty.Task); !strings.Contains(string(spec), `"workdir": "/work/space"`) || !strings.Contains(string(spec), `"timeout_seconds": 600`) {
		t.Errorf("the task without timeouts in a nested workdir:\n%s", spec)
	}
	spec, _ := os.ReadFile(copies.Task)
	for _, w := range []string{`"workdir": "/app"`, `"/tests": ".cto-harness/tests"`, `"format": "reward"`, `"fail_to_pass": [`, `"base": "` + copies.Base, `"timeout_seconds": 90`, `"case_timeout_seconds": 200`, `"command": "bash /tests/test.sh"`} {
		if !strings.Contains(string(spec), w) {
			t.Errorf("the task spec lacks %s:\n%s", w, spec)
		}
	}
	notes := strings.Join(copies.Notes, "\n")
	for _, w := range []string{"FROM python:3.13", "outside the workdir /app", "ENV X=1", "fetches or installs tools", "allows the internet", ".dockerignore is not read"} {
		if !strings.Contains(notes, w) {
			t.Errorf("the notes do not say %q:\n%s", w, notes)
		}
	}
	solver, _ := os.ReadFile(copies.Reference)
	if !strings.HasPrefix(string(solver), "#!/bin/bash\n") {
		t.Errorf("the solver has no shebang: %q", solver)
	}
	tree := gitTree(t, copies.Source, copies.Base)
	if tree != "run.sh src/a.py src/pkg/b.py" {
		t.Errorf("the starting state holds %q, want run.sh src/a.py src/pkg/b.py", tree)
	}
	// Importing again gives the same bases: the commits are made with a
	// fixed author and time.
	again, err := Harbor(context.Background(), []string{filepath.Join(ds, "copies")}, o)
	if err != nil || len(again.Imported) != 1 || again.Imported[0].Base != copies.Base {
		t.Fatalf("a second import: %+v %v, want base %s", again.Imported, err, copies.Base)
	}
	if _, err := Harbor(context.Background(), []string{ds}, Options{OutDir: filepath.Join(dir, "notours", "x")}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notours", "x", "source", "README"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Harbor(context.Background(), []string{ds}, Options{OutDir: filepath.Join(dir, "notours", "x")}); err == nil || !strings.Contains(err.Error(), "did not write") {
		t.Errorf("an import into a repository it did not write: %v", err)
	}
}

// gitTree lists the files of commit in the repository at dir, space separated.
func gitTree(t *testing.T, dir, commit string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "ls-tree", "-r", "--name-only", commit).Output()
	if err != nil {
		t.Fatalf("git ls-tree %s: %v", commit, err)
	}
	return strings.Join(strings.Fields(string(out)), " ")
}
