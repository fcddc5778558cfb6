package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/BurntSushi/toml"

	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
)

// What a Harbor task becomes, in the harness's own terms: its workdir is
// the layout's workdir, its tests are hidden tests laid under
// HarborTestsDir and linked at /tests, its verifier's log directory is
// linked at /logs/verifier, and the reward it writes there is the one
// graded test.
const (
	HarborTestsDir  = ".cto-harness/tests"
	HarborLogsDir   = ".cto-harness/logs"
	HarborReward    = HarborLogsDir + "/reward.txt"
	HarborSolver    = "solve.sh"
	HarborSourceDir = "source"
	// harborVerifyTimeout and harborAgentTimeout are Harbor's defaults
	// when task.toml gives none.
	harborVerifyTimeout = 600
	harborAgentTimeout  = 600
)

// harborToml is the part of task.toml the import reads.
type harborToml struct {
	Verifier struct {
		TimeoutSec float64 `toml:"timeout_sec"`
	} `toml:"verifier"`
	Agent struct {
		TimeoutSec float64 `toml:"timeout_sec"`
	} `toml:"agent"`
	Environment struct {
		AllowInternet *bool  `toml:"allow_internet"`
		NetworkMode   string `toml:"network_mode"`
	} `toml:"environment"`
}

// Harbor imports Harbor (Terminal-Bench) task directories: each dir is a
// task (it holds task.toml) or a dataset whose subdirectories are. Each
// task's starting state, the files its Dockerfile copies into its
// WORKDIR, becomes one root commit of a repository the import writes
// (OUT/source, one ref per task under refs/tasks/), so that one batch
// spec runs every task on one owned source, each from its own base; Case
// sees only its task's commit.
func Harbor(ctx context.Context, dirs []string, o Options) (Result, error) {
	res := Result{Imported: []Imported{}, Skipped: []Skipped{}, Batches: []string{}}
	if o.OutDir == "" || len(dirs) == 0 {
		return res, fmt.Errorf("%w: give the task directories and the output directory", ErrInput)
	}
	var tasks []string
	for _, d := range dirs {
		found, err := harborTasks(d)
		if err != nil {
			return res, err
		}
		tasks = append(tasks, found...)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return res, fmt.Errorf("%w: make %s: %v", ErrInput, o.OutDir, err)
	}
	out, err := filepath.Abs(o.OutDir)
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrInput, err)
	}
	src, err := openStartStates(filepath.Join(out, HarborSourceDir))
	if err != nil {
		return res, err
	}
	for _, dir := range tasks {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		imp, err := importHarbor(dir, out, src, o)
		if err != nil {
			res.Skipped = append(res.Skipped, Skipped{ID: filepath.Base(dir), Reason: err.Error()})
			continue
		}
		res.Imported = append(res.Imported, imp)
	}
	if len(res.Imported) == 0 {
		return res, nil
	}
	if err := src.finish(); err != nil {
		return res, err
	}
	p, err := writeHarborBatch(res.Imported, out, o)
	if err != nil {
		return res, err
	}
	res.Batches = append(res.Batches, p)
	return res, nil
}

// harborTasks are the task directories dir names: itself when it holds
// task.toml, else its subdirectories that do.
func harborTasks(dir string) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if _, err := os.Stat(filepath.Join(abs, "task.toml")); err == nil {
		return []string{abs}, nil
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: read the task directory %s: %v", ErrInput, dir, err)
	}
	var out []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(abs, e.Name(), "task.toml")); e.IsDir() && err == nil {
			out = append(out, filepath.Join(abs, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s holds no task.toml, nor does any directory in it: it is not a Harbor task or dataset", ErrInput, dir)
	}
	return out, nil
}

// importHarbor maps one task directory, or says why it cannot.
func importHarbor(dir, out string, src *startStates, o Options) (Imported, error) {
	id := filepath.Base(dir)
	imp := Imported{ID: id, Repo: "harbor/" + id, Notes: []string{}}
	if !safeID.MatchString(id) || len(id) > 64 {
		return imp, fmt.Errorf("the directory name %q is not a safe task name", id)
	}
	var meta harborToml
	if _, err := toml.DecodeFile(filepath.Join(dir, "task.toml"), &meta); err != nil {
		return imp, fmt.Errorf("task.toml: %v", err)
	}
	instruction, err := os.ReadFile(filepath.Join(dir, "instruction.md"))
	if err != nil || len(bytes.TrimSpace(instruction)) == 0 {
		return imp, errors.New("no instruction.md (or an empty one): there is no task to give Case")
	}
	env, err := readEnvironment(filepath.Join(dir, "environment"))
	if err != nil {
		return imp, err
	}
	imp.Notes = append(imp.Notes, env.notes...)
	tests, notes, err := readHarborTests(filepath.Join(dir, "tests"))
	if err != nil {
		return imp, err
	}
	imp.Notes = append(imp.Notes, notes...)
	if a := meta.Environment.AllowInternet; (a != nil && *a) || meta.Environment.NetworkMode == "public" {
		imp.Notes = append(imp.Notes, "task.toml allows the internet; the harness gives Case and the verification none unless the config or the run grants endpoints")
	}
	taskDir := filepath.Join(out, id)
	if err := os.RemoveAll(taskDir); err != nil {
		return imp, err
	}
	hidden := filepath.Join(taskDir, HiddenDir)
	for rel, f := range tests {
		if err := writeEntry(filepath.Join(hidden, filepath.FromSlash(HarborTestsDir), filepath.FromSlash(rel)), f); err != nil {
			return imp, err
		}
		imp.Hidden = append(imp.Hidden, HarborTestsDir+"/"+rel)
	}
	sort.Strings(imp.Hidden)
	ref, note, err := copySolver(filepath.Join(dir, "solution"), taskDir)
	if err != nil {
		return imp, err
	}
	imp.Reference = ref
	if note != "" {
		imp.Notes = append(imp.Notes, note)
	}
	base, err := src.add(id, env.files)
	if err != nil {
		return imp, err
	}
	imp.Source, imp.Base = src.dir, base
	spec := harborSpec(string(instruction), env.workdir, base, meta, o)
	return imp, writeSpec(&imp, spec, taskDir, o)
}

// harborSpec is the task spec of a Harbor task.
func harborSpec(instruction, workdir, base string, meta harborToml, o Options) task.Spec {
	vt, at := int(meta.Verifier.TimeoutSec), int(meta.Agent.TimeoutSec)
	if vt <= 0 {
		vt = harborVerifyTimeout
	}
	if at <= 0 {
		at = harborAgentTimeout
	}
	spec := task.Spec{
		Task:               instruction,
		AllowedPaths:       []string{"**"},
		Verification:       task.Verification{Command: "bash /tests/test.sh", TimeoutSeconds: vt},
		CaseTimeoutSeconds: at,
		Layout:             &task.Layout{Workdir: workdir, Links: map[string]string{"/tests": HarborTestsDir, "/logs/verifier": HarborLogsDir}},
		TestResults:        &task.TestResults{Format: testresults.Reward, Path: HarborReward},
		FailToPass:         []string{testresults.RewardID},
		HiddenTests:        HiddenDir,
		Base:               base,
	}
	if o.Setup != "" {
		spec.Setup = &task.Verification{Command: o.Setup, TimeoutSeconds: vt}
	}
	return spec
}

// writeSpec checks spec against its schema and writes it as imp's task.
func writeSpec(imp *Imported, spec task.Spec, dir string, o Options) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if o.Validate != nil {
		if err := o.Validate(data); err != nil {
			return fmt.Errorf("the task spec would not match its schema: %v", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	imp.Task = filepath.Join(dir, TaskFile)
	return os.WriteFile(imp.Task, data, 0o644)
}

// entry is one file of a starting state or of the tests.
type entry struct {
	data []byte
	exec bool
}

func writeEntry(p string, f entry) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if f.exec {
		mode = 0o755
	}
	return os.WriteFile(p, f.data, mode)
}

// netTools are what a verifier script runs to fetch or install tools.
var netTools = regexp.MustCompile(`(?m)\b(apt-get|apt|apk|curl|wget|pip3?|uv|uvx|npm|npx|cargo)\s+(install|add|update|-[A-Za-z]|https?://)`)

// readHarborTests reads tests/: every regular file, test.sh among them,
// which must write the reward file the import grades by.
func readHarborTests(dir string) (map[string]entry, []string, error) {
	sh, err := os.ReadFile(filepath.Join(dir, "test.sh"))
	if err != nil {
		return nil, nil, errors.New("no tests/test.sh: there is no verifier to grade with")
	}
	switch {
	case !bytes.Contains(sh, []byte("reward.txt")) && bytes.Contains(sh, []byte("reward.json")):
		return nil, nil, errors.New("tests/test.sh writes reward.json; the import grades by reward.txt only")
	case !bytes.Contains(sh, []byte("reward.txt")):
		return nil, nil, errors.New("tests/test.sh does not write /logs/verifier/reward.txt, the reward the import grades by")
	}
	var notes []string
	if m := netTools.Find(sh); m != nil {
		notes = append(notes, fmt.Sprintf("tests/test.sh fetches or installs tools (%q): the verification has no network unless the config grants it (verify_allow); install them on this machine, or give --setup", string(m)))
	}
	files, err := readTree(dir)
	return files, notes, err
}

// readTree reads every regular file below dir, by slash path; a link or
// anything else is refused.
func readTree(dir string) (map[string]entry, error) {
	files := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (a link?): only regular files are imported", p)
		}
		if !safeRel(rel) {
			return fmt.Errorf("the path %q is not a plain path", rel)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = entry{data: data, exec: fi.Mode()&0o111 != 0}
		return nil
	})
	return files, err
}

// copySolver writes solution/solve.sh as the task's reference (a script
// task check runs in the fixture), with a bash shebang when it has none.
func copySolver(dir, taskDir string) (string, string, error) {
	data, err := os.ReadFile(filepath.Join(dir, HarborSolver))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "no solution/solve.sh: task check cannot be run", nil
	}
	if err != nil {
		return "", "", err
	}
	note := ""
	if ents, _ := os.ReadDir(dir); len(ents) > 1 || bytes.Contains(data, []byte("/solution")) {
		note = "solution/ holds more than solve.sh, or solve.sh names /solution: only solve.sh is the reference, run from the task check's own directory"
	}
	if !bytes.HasPrefix(data, []byte("#!")) {
		data = append([]byte("#!/bin/bash\n"), data...)
	}
	p := filepath.Join(taskDir, HarborSolver)
	return p, note, writeEntry(p, entry{data: data, exec: true})
}

// writeHarborBatch writes one batch spec: the starting states' repository
// as its one source and every imported task.
func writeHarborBatch(imps []Imported, out string, o Options) (string, error) {
	p := filepath.Join(out, "batch-harbor.json")
	if err := writeBatch(p, "harbor", HarborSourceDir, imps, o); err != nil {
		return "", fmt.Errorf("the batch spec: %w", err)
	}
	return p, nil
}
