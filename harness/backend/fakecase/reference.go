package fakecase

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// applyPatch is the Case of a task check: it applies the task's reference
// patch (PATH, a file the harness shows in the view) to the fixture with
// git apply, reports every path it touched, and changes nothing else. A
// patch that does not apply fails the scenario: the reference does not fit
// the task's base.
func applyPatch(path string) func(*caseRun) error {
	return func(c *caseRun) error {
		bin, err := exec.LookPath("git")
		if err != nil {
			return fmt.Errorf("applying the reference needs git in the view: %w", err)
		}
		var names, errs bytes.Buffer
		list := exec.Command(bin, "apply", "--numstat", "-z", path)
		list.Dir, list.Stdout, list.Stderr = c.root, &names, &errs
		if err := list.Run(); err != nil {
			return fmt.Errorf("the reference patch %s cannot be read by git apply: %v: %s", path, err, strings.TrimSpace(errs.String()))
		}
		apply := exec.Command(bin, "apply", "--whitespace=nowarn", path)
		apply.Dir = c.root
		if out, err := apply.CombinedOutput(); err != nil {
			return fmt.Errorf("the reference patch %s does not apply to the task's base: %v: %s", path, err, strings.TrimSpace(string(out)))
		}
		for _, rec := range strings.Split(names.String(), "\x00") {
			// numstat -z: "added\tdeleted\tpath" per record (a rename adds
			// the two paths as records of their own).
			f := strings.SplitN(rec, "\t", 3)
			if p := f[len(f)-1]; p != "" {
				c.emit(ctoharness.EvCaseFileChanged, map[string]any{"path": p})
			}
		}
		return nil
	}
}

// runScript is the Case of a task check whose reference is a script (a
// container task's solution/solve.sh): it runs PATH in the fixture with
// the interpreter its #! line names (a Harbor solver is a bash script),
// as the task's own solver would, and reports every path git then sees
// changed or added. A script that fails fails the scenario.
func runScript(path string) func(*caseRun) error {
	return func(c *caseRun) error {
		bin, err := exec.LookPath("git")
		if err != nil {
			return fmt.Errorf("listing what the reference script changed needs git in the view: %w", err)
		}
		argv, err := interpreter(path)
		if err != nil {
			return err
		}
		run := exec.Command(argv[0], argv[1:]...)
		run.Dir = c.root
		if out, err := run.CombinedOutput(); err != nil {
			return fmt.Errorf("the reference script %s failed in the task's base: %v: %s", path, err, strings.TrimSpace(lastLines(string(out), 20)))
		}
		var names, errs bytes.Buffer
		st := exec.Command(bin, "-c", "core.fsmonitor=false", "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames")
		st.Dir, st.Stdout, st.Stderr = c.root, &names, &errs
		if err := st.Run(); err != nil {
			return fmt.Errorf("list what the reference script changed: %v: %s", err, strings.TrimSpace(errs.String()))
		}
		for _, rec := range strings.Split(names.String(), "\x00") {
			if len(rec) > 3 {
				c.emit(ctoharness.EvCaseFileChanged, map[string]any{"path": rec[3:]})
			}
		}
		return nil
	}
}

// interpreter is the command that runs the script at path: its #! line's
// interpreter and argument (#!/usr/bin/env bash), else /bin/sh.
func interpreter(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the reference script %s: %w", path, err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if rest, ok := strings.CutPrefix(line, "#!"); ok {
		if f := strings.Fields(rest); len(f) > 0 {
			return append(f, path), nil
		}
	}
	return []string{"/bin/sh", path}, nil
}

// lastLines is the end of out, n lines at most.
func lastLines(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
