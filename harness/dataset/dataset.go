// Package dataset turns benchmark tasks into the harness's own: a
// SWE-bench instance file (JSON lines: repo, base commit, problem
// statement, test patch, FAIL_TO_PASS and PASS_TO_PASS, reference patch)
// becomes one task spec per instance, with the test patch as hidden tests
// applied to the base (Case never sees them), the listed tests as the
// graded lists, the base commit as the task's base and the reference patch
// beside it for task check; and one batch spec per repository. Instances
// that cannot be imported are listed with the reason, never guessed at.
package dataset

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Files of an imported task, in its directory.
const (
	TaskFile      = "task.json"
	HiddenDir     = "hidden"
	ReferenceFile = "reference.patch"
	// ResultsFile is where the verification's pytest writes its JUnit
	// report, in the checkout.
	ResultsFile = "cto-harness-results.xml"
)

// Options tune an import.
type Options struct {
	// ReposDir holds each instance's repository as a local owned clone,
	// found by its repo name ("owner/name"): DIR/owner/name,
	// DIR/owner__name or DIR/name.
	ReposDir string
	// OutDir receives one directory per task and the batch specs; it must
	// not be inside a repository (the hidden tests would be in its copy).
	OutDir string
	// Setup is every task's setup command ("" for none): SWE-bench's
	// per-repository installs are not part of an instance.
	Setup string
	// Validate checks a task spec against its schema, Batch a batch spec.
	Validate, Batch func([]byte) error
}

// Imported is one task written.
type Imported struct {
	ID     string `json:"id"`
	Repo   string `json:"repo"`
	Source string `json:"source"`
	Base   string `json:"base_commit"`
	Task   string `json:"task"` // its task spec file
	// Hidden are the test files the test patch gives, laid as hidden tests.
	Hidden    []string `json:"hidden"`
	Reference string   `json:"reference"` // the reference patch file, for task check
	// Notes say what of the instance was not mapped.
	Notes []string `json:"notes,omitempty"`
}

// Skipped is an instance that could not be imported.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Result is what an import did.
type Result struct {
	Imported []Imported `json:"imported"`
	Skipped  []Skipped  `json:"skipped"`
	Batches  []string   `json:"batches"` // one batch spec per repository
}

// instance is the part of a SWE-bench instance the import reads.
type instance struct {
	ID         string          `json:"instance_id"`
	Repo       string          `json:"repo"`
	Base       string          `json:"base_commit"`
	Problem    string          `json:"problem_statement"`
	TestPatch  string          `json:"test_patch"`
	Patch      string          `json:"patch"`
	FailToPass json.RawMessage `json:"FAIL_TO_PASS"`
	PassToPass json.RawMessage `json:"PASS_TO_PASS"`
}

// ErrInput is input the import cannot read at all.
var ErrInput = errors.New("dataset")

var safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// SWEBench imports the instances of r (JSON lines).
func SWEBench(ctx context.Context, r io.Reader, o Options) (Result, error) {
	res := Result{Imported: []Imported{}, Skipped: []Skipped{}, Batches: []string{}}
	if o.OutDir == "" || o.ReposDir == "" {
		return res, fmt.Errorf("%w: give the repositories' directory and the output directory", ErrInput)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return res, fmt.Errorf("%w: make %s: %v", ErrInput, o.OutDir, err)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var in instance
		if err := json.Unmarshal(line, &in); err != nil {
			res.Skipped = append(res.Skipped, Skipped{ID: fmt.Sprintf("line %d", n), Reason: "not a JSON object: " + err.Error()})
			continue
		}
		imp, err := importOne(in, o)
		if err != nil {
			id := in.ID
			if id == "" {
				id = fmt.Sprintf("line %d", n)
			}
			res.Skipped = append(res.Skipped, Skipped{ID: id, Reason: err.Error()})
			continue
		}
		res.Imported = append(res.Imported, imp)
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("%w: read the instances: %v", ErrInput, err)
	}
	batches, err := writeBatches(res.Imported, o)
	res.Batches = batches
	return res, err
}

func importOne(in instance, o Options) (Imported, error) {
	imp := Imported{ID: in.ID, Repo: in.Repo, Base: in.Base, Notes: []string{}}
	switch {
	case !safeID.MatchString(in.ID):
		return imp, fmt.Errorf("instance_id %q is not a safe directory name", in.ID)
	case in.Repo == "" || in.Base == "":
		return imp, errors.New("the instance has no repo or no base_commit")
	case strings.TrimSpace(in.Problem) == "":
		return imp, errors.New("the instance has no problem_statement")
	case strings.TrimSpace(in.TestPatch) == "":
		return imp, errors.New("the instance has no test_patch: there would be no hidden tests to grade with")
	}
	f2p, err := testList(in.FailToPass)
	if err != nil {
		return imp, fmt.Errorf("FAIL_TO_PASS: %v", err)
	}
	p2p, err := testList(in.PassToPass)
	if err != nil {
		return imp, fmt.Errorf("PASS_TO_PASS: %v", err)
	}
	if len(f2p) == 0 {
		return imp, errors.New("FAIL_TO_PASS is empty: nothing would tell a fix from no change")
	}
	src, err := findRepo(o.ReposDir, in.Repo)
	if err != nil {
		return imp, err
	}
	imp.Source = src
	if out, _ := filepath.Abs(o.OutDir); strings.HasPrefix(out+"/", src+"/") {
		return imp, fmt.Errorf("the output directory %s is inside the repository %s: the hidden tests would be in the copy Case gets", o.OutDir, src)
	}
	repo, err := gitstatus.Open(src, filepath.Join(src, ".git"))
	if err != nil {
		return imp, fmt.Errorf("open %s read-only: %v", src, err)
	}
	base, err := repo.CommitObject(plumbing.NewHash(in.Base))
	if err != nil || base.Hash.String() != in.Base {
		return imp, fmt.Errorf("base_commit %s is not a commit of %s (fetch it there first)", in.Base, src)
	}
	tree, err := base.Tree()
	if err != nil {
		return imp, fmt.Errorf("read the tree of %s: %v", in.Base, err)
	}
	files, err := parsePatch([]byte(in.TestPatch))
	if err != nil {
		return imp, fmt.Errorf("test_patch: %v", err)
	}
	dir := filepath.Join(o.OutDir, in.ID)
	hidden := filepath.Join(dir, HiddenDir)
	if err := os.RemoveAll(dir); err != nil {
		return imp, err
	}
	if err := os.MkdirAll(hidden, 0o755); err != nil {
		return imp, err
	}
	var testFiles []string
	for _, fp := range files {
		switch {
		case fp.binary:
			return imp, fmt.Errorf("test_patch changes %s as a binary file, which hidden tests cannot hold", fp.path())
		case fp.rename:
			return imp, fmt.Errorf("test_patch renames or copies %s, which hidden tests cannot express", fp.path())
		case fp.newPath == "":
			return imp, fmt.Errorf("test_patch deletes %s; hidden tests can add and replace files, not remove them", fp.oldPath)
		case !safeRel(fp.newPath):
			return imp, fmt.Errorf("test_patch names the unsafe path %q", fp.newPath)
		}
		var old []byte
		if fp.oldPath != "" {
			f, err := tree.File(fp.oldPath)
			if err != nil {
				return imp, fmt.Errorf("test_patch changes %s, which the base does not have", fp.oldPath)
			}
			s, err := f.Contents()
			if err != nil {
				return imp, err
			}
			old = []byte(s)
		}
		content, err := fp.apply(old)
		if err != nil {
			return imp, fmt.Errorf("test_patch does not apply to the base: %v", err)
		}
		p := filepath.Join(hidden, filepath.FromSlash(fp.newPath))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return imp, err
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			return imp, err
		}
		imp.Hidden = append(imp.Hidden, fp.newPath)
		if strings.HasSuffix(fp.newPath, ".py") {
			testFiles = append(testFiles, fp.newPath)
		}
	}
	sort.Strings(imp.Hidden)
	if len(testFiles) == 0 {
		return imp, errors.New("test_patch touches no Python file: the import grades with pytest only")
	}
	sort.Strings(testFiles)
	f2pIDs, err := junitIDs(f2p)
	if err != nil {
		return imp, fmt.Errorf("FAIL_TO_PASS: %v", err)
	}
	p2pIDs, err := junitIDs(p2p)
	if err != nil {
		return imp, fmt.Errorf("PASS_TO_PASS: %v", err)
	}
	if strings.TrimSpace(in.Patch) == "" {
		imp.Notes = append(imp.Notes, "no reference patch: task check cannot be run")
	} else {
		imp.Reference = filepath.Join(dir, ReferenceFile)
		if err := os.WriteFile(imp.Reference, []byte(in.Patch), 0o644); err != nil {
			return imp, err
		}
	}
	if o.Setup == "" {
		imp.Notes = append(imp.Notes, "no setup command: SWE-bench's per-repository install is not part of the instance; give --setup")
	}
	spec := task.Spec{
		Task:         in.Problem,
		AllowedPaths: []string{"**"},
		Verification: task.Verification{Command: "python3 -m pytest -p no:cacheprovider -rA --junitxml=" + ResultsFile + " " + strings.Join(testFiles, " "), TimeoutSeconds: 1800},
		TestResults:  &task.TestResults{Format: "junit", Path: ResultsFile},
		FailToPass:   f2pIDs,
		PassToPass:   p2pIDs,
		HiddenTests:  HiddenDir,
		Base:         in.Base,
	}
	if o.Setup != "" {
		spec.Setup = &task.Verification{Command: o.Setup, TimeoutSeconds: 1800}
	}
	return imp, writeSpec(&imp, spec, dir, o)
}

// testList reads FAIL_TO_PASS / PASS_TO_PASS: a JSON list, or a string
// holding one (as the SWE-bench datasets store them).
func testList(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("neither a list of test ids nor a string holding one")
	}
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return nil, fmt.Errorf("the string does not hold a JSON list of test ids: %v", err)
	}
	return list, nil
}

// junitIDs turns pytest node ids (tests/test_x.py::TestC::test_f[1]) into
// the ids pytest's JUnit report gives (tests.test_x.TestC.test_f[1]):
// classname, then name. Ids of other runners (Django's "test_f
// (module.Class)") are not pytest's, and the instance is not imported.
func junitIDs(ids []string) ([]string, error) {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		file, rest, ok := strings.Cut(id, "::")
		if !ok || !strings.HasSuffix(file, ".py") || rest == "" {
			return nil, fmt.Errorf("%q is not a pytest node id (path.py::name); only pytest instances are imported", id)
		}
		mod := strings.ReplaceAll(strings.TrimSuffix(file, ".py"), "/", ".")
		out = append(out, mod+"."+strings.ReplaceAll(rest, "::", "."))
	}
	return out, nil
}

// findRepo finds the clone of repo ("owner/name") under dir.
func findRepo(dir, repo string) (string, error) {
	owner, name, _ := strings.Cut(repo, "/")
	var tried []string
	for _, c := range []string{filepath.Join(dir, owner, name), filepath.Join(dir, owner+"__"+name), filepath.Join(dir, name)} {
		if name == "" || strings.Contains(name, "/") || strings.Contains(owner, "..") || strings.Contains(name, "..") {
			break
		}
		tried = append(tried, c)
		if fi, err := os.Stat(filepath.Join(c, ".git")); err == nil && fi.IsDir() {
			abs, err := filepath.Abs(c)
			if err != nil {
				return "", err
			}
			return filepath.EvalSymlinks(abs)
		}
	}
	return "", fmt.Errorf("no clone of %s found (looked for %s); clone it there, and list it as an owned source", repo, strings.Join(tried, ", "))
}

// writeBatches writes one batch spec per repository: its source and every
// task imported for it, run by the fake Case (name your agents in it).
func writeBatches(imps []Imported, o Options) ([]string, error) {
	by := map[string][]Imported{}
	var repos []string
	for _, imp := range imps {
		if _, ok := by[imp.Repo]; !ok {
			repos = append(repos, imp.Repo)
		}
		by[imp.Repo] = append(by[imp.Repo], imp)
	}
	sort.Strings(repos)
	var out []string
	for _, repo := range repos {
		name := strings.ReplaceAll(repo, "/", "__")
		p := filepath.Join(o.OutDir, "batch-"+name+".json")
		if err := writeBatch(p, "swe-bench-"+name, by[repo][0].Source, by[repo], o); err != nil {
			return out, fmt.Errorf("the batch spec for %s: %w", repo, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// writeBatch writes the batch spec p: source and the imported tasks, run
// by the fake Case (name your agents in it), schema-checked.
func writeBatch(p, name, source string, imps []Imported, o Options) error {
	type taskRef struct {
		Name string `json:"name"`
		Spec string `json:"spec"`
	}
	spec := struct {
		Name    string              `json:"name"`
		Sources []string            `json:"sources"`
		Tasks   []taskRef           `json:"tasks"`
		Agents  []map[string]string `json:"agents"`
		Repeats int                 `json:"repeats"`
	}{Name: name, Sources: []string{source}, Agents: []map[string]string{{"name": "fake"}}, Repeats: 1}
	for _, imp := range imps {
		spec.Tasks = append(spec.Tasks, taskRef{Name: imp.ID, Spec: path.Join(imp.ID, TaskFile)})
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if o.Batch != nil {
		if err := o.Batch(data); err != nil {
			return fmt.Errorf("it would not match its schema: %v", err)
		}
	}
	return os.WriteFile(p, data, 0o644)
}

// safeRel says whether p is a plain relative path inside a checkout: no
// "..", no absolute path, nothing under .git.
func safeRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || path.Clean(p) != p {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." || e == "." || strings.EqualFold(e, ".git") {
			return false
		}
	}
	return true
}
