package fakecase

import (
	ctoharness "github.com/cto-harness/cto-harness"
)

// HostileEventScenarios make the canned change but report it with an event
// stream that breaks the adapter contract's grammar or types. The harness
// must block each one; none may pass.
func HostileEventScenarios() []Scenario {
	return []Scenario{
		{"events-finished-first", "emit case.finished before case.started, then make the change", func(c *caseRun) error {
			c.skipFinished = true
			c.emit(ctoharness.EvCaseFinished, map[string]any{"status": "ok"})
			c.emit(ctoharness.EvCaseStarted, map[string]any{"scenario": "events-finished-first"})
			return c.edit()
		}},
		{"events-after-finished", "make the change, emit case.finished, then keep emitting events", func(c *caseRun) error {
			c.skipFinished = true
			if err := c.edit(); err != nil {
				return err
			}
			c.emit(ctoharness.EvCaseFinished, map[string]any{"status": "ok"})
			c.emit(ctoharness.EvCaseLog, map[string]any{"message": "after the end"})
			return nil
		}},
		{"events-duplicate-started", "emit case.started twice", func(c *caseRun) error {
			c.emit(ctoharness.EvCaseStarted, map[string]any{"scenario": "events-duplicate-started"})
			return c.edit()
		}},
		{"events-duplicate-finished", "emit case.finished twice", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			c.emit(ctoharness.EvCaseFinished, map[string]any{"status": "ok"})
			return nil
		}},
		{"events-bad-field", "report a changed file whose path is a number", func(c *caseRun) error {
			c.emit(ctoharness.EvCaseFileChanged, map[string]any{"path": 123})
			return c.edit()
		}},
	}
}

// emitsOwnStart names the scenarios that write their own case.started at a
// point of their choosing instead of getting it first.
func emitsOwnStart(name string) bool { return name == "events-finished-first" }
