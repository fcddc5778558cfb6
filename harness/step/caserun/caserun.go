// Package caserun is the Case step's own logic, apart from how the pipeline
// launches the process: the event watch that turns Case's stream into run
// events and holds an unsandboxed Case to its command budget, and the
// judgement of how the process ended. Both are pure over their inputs, so
// each can be tested without starting a Case.
package caserun

import (
	"encoding/json"
	"fmt"
	"sync"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
)

// Watch handles Case's events while it runs. Every field is the pipeline's:
// the watch only decides what to do with each event.
type Watch struct {
	// Lock serialises the event log between this reader and the exec watch.
	Lock sync.Locker
	// Emit appends one run event.
	Emit func(ctoharness.EventType, map[string]any)
	// Started is told of Case's case.started event (the interrupt fault fires on it).
	Started func()
	// Claim accounts one command Case's case.command event claims; a non-empty
	// reason means the profile's budget is spent.
	Claim func(command string) (reason string)
	// Stop stops Case (its context's cancel).
	Stop func()
	// Profile names the execution profile, for the budget message.
	Profile string

	budgetStop string
}

// OnEvent is backend.Input's OnEvent: it records the event, and stops Case
// the first time a claimed command exceeds the budget.
func (w *Watch) OnEvent(e backend.CaseEvent) {
	w.Lock.Lock()
	defer w.Lock.Unlock()
	if e.Type == ctoharness.EvCaseStarted && w.Started != nil {
		w.Started()
	}
	var data map[string]any
	_ = json.Unmarshal(e.Raw, &data) // the backend accepted only objects
	delete(data, "type")
	w.Emit(e.Type, data)
	cmd, _ := data["command"].(string)
	if e.Type != ctoharness.EvCaseCommand || w.budgetStop != "" {
		return
	}
	if reason := w.Claim(cmd); reason != "" {
		w.budgetStop = fmt.Sprintf("%s (command %q, profile %s)", reason, cmd, w.Profile)
		w.Stop()
	}
}

// BudgetStop is why Case was stopped for its command budget ("" if it was not).
func (w *Watch) BudgetStop() string {
	w.Lock.Lock()
	defer w.Lock.Unlock()
	return w.budgetStop
}
