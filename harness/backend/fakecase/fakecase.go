// Package fakecase is the harness's own deterministic Case stand-in. It runs
// as a real child process (the harness binary re-executed with a hidden
// subcommand), reads the task contract like a real Case, makes a scripted
// change and reports it as events, so the whole pipeline is exercised
// without an AI agent. Stage 1 applies the same change in-process.
package fakecase

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/go-git/go-git/v5"
)

// NoteLine is the line the canned change appends; sample verification
// scripts look for it.
const NoteLine = "- note added by the fake Case"

// NoteFile is the file name the canned change writes inside the first
// allowed directory.
const NoteFile = "CASE_NOTES.md"

// Scenario is one scripted behaviour.
type Scenario struct {
	Name        string
	Description string
	run         func(c *caseRun) error
}

// Scenarios lists every scenario, by name.
func Scenarios() []Scenario {
	return []Scenario{
		{"pass", "append a note to the first allowed path and finish", func(c *caseRun) error { return c.edit() }},
		{"disallowed", "change an allowed file and also a file outside the allowed paths", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			return c.write("OUTSIDE_ALLOWED.txt", "written outside the allowed paths\n")
		}},
		{"omit-finished", "make the change but never emit case.finished", func(c *caseRun) error {
			c.skipFinished = true
			return c.edit()
		}},
		{"hang", "start and then never exit", func(c *caseRun) error {
			for {
				time.Sleep(time.Hour)
			}
		}},
		{"exit-nonzero", "make the change and exit with status 3", func(c *caseRun) error {
			c.exitCode = 3
			return c.edit()
		}},
		{"break-verification", "make a change the verification command rejects", func(c *caseRun) error {
			return c.writeNote("- a note the verification check does not accept\n")
		}},
		{"run-commands", "report and run 40 shell commands, more than the fast profile's budget", func(c *caseRun) error {
			for i := 1; i <= 40; i++ {
				c.runAll(1, true, "sh", "-c", fmt.Sprintf("echo step %d", i))
			}
			return c.edit()
		}},
		{"install", "report and run a package install, which the fast profile refuses", func(c *caseRun) error {
			c.runAll(1, true, "sh", "-c", "pip install requests")
			return c.edit()
		}},
		{"nested-repo", "make the change and create a nested git repository under the first allowed path", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			rel, err := Target(c.contract.AllowedPaths)
			if err != nil {
				return err
			}
			dir := filepath.Join(c.root, filepath.Dir(filepath.FromSlash(rel)), "nested")
			if _, err := git.PlainInit(dir, false); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "inner.txt"), []byte("inside a nested repository\n"), 0o644)
		}},
		{"touch-git", "make the change and plant a hook inside the fixture's .git", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			p := filepath.Join(c.root, ".git", "hooks", "post-commit")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p, []byte("#!/bin/sh\necho planted\n"), 0o755)
		}},
	}
}

// Lookup finds a scenario. "mutate-source=PATH" is the one parameterised
// scenario: it writes to PATH, which the failure machinery hands it so that
// detection of source mutation can be proven.
func Lookup(name string) (Scenario, error) {
	if s, ok := LookupAdversarial(name); ok {
		return s, nil
	}
	if s, ok, err := lookupFault(name); ok {
		return s, err
	}
	if p, ok := strings.CutPrefix(name, "mutate-source="); ok {
		return Scenario{Name: "mutate-source", Description: "write a file at an absolute path outside the fixture",
			run: func(c *caseRun) error {
				if err := c.edit(); err != nil {
					return err
				}
				return os.WriteFile(p, []byte("written by the fake Case\n"), 0o644)
			}}, nil
	}
	var names []string
	for _, s := range allScenarios() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return Scenario{}, fmt.Errorf("unknown fake Case scenario %q; known: %s", name, strings.Join(names, ", "))
}

// allScenarios is every named scenario, in groups.
func allScenarios() []Scenario {
	var all []Scenario
	for _, g := range [][]Scenario{Scenarios(), HostileEventScenarios(), StrictEventScenarios(), UntrustedWorldScenarios(), NameScenarios(), ProcScenarios(), SizeScenarios()} {
		all = append(all, g...)
	}
	return all
}

type caseRun struct {
	root         string
	contract     task.Contract
	out          *json.Encoder
	stdout       io.Writer // what out writes to, for scenarios that write raw lines
	skipFinished bool
	exitCode     int
}

func (c *caseRun) emit(t ctoharness.EventType, fields map[string]any) {
	ev := map[string]any{"type": t}
	for k, v := range fields {
		ev[k] = v
	}
	_ = c.out.Encode(ev)
}

func (c *caseRun) edit() error { return c.writeNote(NoteLine + "\n") }

func (c *caseRun) writeNote(line string) error {
	rel, err := Target(c.contract.AllowedPaths)
	if err != nil {
		return err
	}
	p := filepath.Join(c.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, line); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	c.emit(ctoharness.EvCaseFileChanged, map[string]any{"path": rel})
	return nil
}

func (c *caseRun) write(rel, content string) error {
	if err := os.WriteFile(filepath.Join(c.root, filepath.FromSlash(rel)), []byte(content), 0o644); err != nil {
		return err
	}
	c.emit(ctoharness.EvCaseFileChanged, map[string]any{"path": rel})
	return nil
}

// Target is the file the canned change writes: the first allowed pattern
// itself when it has no glob characters, otherwise NoteFile inside the
// pattern's fixed leading directory.
func Target(allowed []string) (string, error) {
	if len(allowed) == 0 {
		return "", errors.New("the task contract allows no paths")
	}
	pat := allowed[0]
	if !strings.ContainsAny(pat, "*?[") {
		return pat, nil
	}
	var fixed []string
	for _, seg := range strings.Split(pat, "/") {
		if strings.ContainsAny(seg, "*?[") {
			break
		}
		fixed = append(fixed, seg)
	}
	return strings.Join(append(fixed, NoteFile), "/"), nil
}

// Apply makes the canned change directly (stage 1: no Case process).
func Apply(contract task.Contract, root string) (string, error) {
	c := &caseRun{root: root, contract: contract, out: json.NewEncoder(io.Discard)}
	if err := c.edit(); err != nil {
		return "", err
	}
	return Target(contract.AllowedPaths)
}

// Main is the fake Case process: argv is the scenario name; the contract comes
// from CASE_TASK_FILE and the fixture is the working directory.
func Main(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == AgentScenario {
		return agentMain(stdout, stderr, getenv) // started as an agent, with the agent's own arguments
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "fake case: usage: __case-fake SCENARIO")
		return 2
	}
	sc, err := Lookup(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "fake case:", err)
		return 2
	}
	return runScenario(sc, stdout, stderr, getenv)
}
