package evidence

import (
	"encoding/json"
	"fmt"
	"sync"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/schemas"
)

// Trace is the ctoharness.Tracer that writes trace.jsonl. Entries are kept in
// memory and flushed at the end: the trace is written even when the run fails,
// and paths are recorded before the directory exists.
type Trace struct {
	mu      sync.Mutex
	runID   string
	step    ctoharness.Step
	entries []ctoharness.TraceEntry
}

// NewTrace starts an empty trace.
func NewTrace(runID string) *Trace { return &Trace{runID: runID, step: ctoharness.StepGate} }

// SetStep tags later entries with the pipeline step.
func (t *Trace) SetStep(s ctoharness.Step) {
	t.mu.Lock()
	t.step = s
	t.mu.Unlock()
}

// Trace implements ctoharness.Tracer.
func (t *Trace) Trace(op ctoharness.TraceOp, path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, ctoharness.TraceEntry{Seq: len(t.entries) + 1, RunID: t.runID, Op: op, Path: path, Step: t.step})
}

// TraceExec implements ctoharness.Tracer.
func (t *Trace) TraceExec(argv []string, dir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, ctoharness.TraceEntry{Seq: len(t.entries) + 1, RunID: t.runID, Op: ctoharness.TraceExec,
		Path: dir, Argv: append([]string(nil), argv...), Step: t.step})
}

// Entries returns a copy of the entries so far.
func (t *Trace) Entries() []ctoharness.TraceEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]ctoharness.TraceEntry(nil), t.entries...)
}

// Flush writes trace.jsonl atomically, checking each line against its schema.
func (t *Trace) Flush(d *Dir) error {
	entries := t.Entries()
	var buf []byte
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("%w: encode trace entry: %v", ErrWrite, err)
		}
		if err := d.schemas.Validate(schemas.Trace, line); err != nil {
			return fmt.Errorf("%w: trace entry %d would not match its schema: %v", ErrWrite, e.Seq, err)
		}
		buf = append(append(buf, line...), '\n')
	}
	// The write of trace.jsonl itself is not traced: it would change what it records.
	return d.put(TraceFile, buf)
}
