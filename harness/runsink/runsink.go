// Package runsink is the one piece of state every step of a run shares:
// where its evidence goes. A step gets the sink beside its own inputs and
// writes through it (events, trace entries, artifacts, blockers), so no step
// needs another step's state to say what happened. The sink also knows the
// two things every write depends on: whether the run was interrupted (a
// cancelled step is INTERRUPTED, not its own failure) and whether the disk
// filled up (every step's write failure is then ARTIFACT_WRITE_FAILED), and
// it redacts the run's secrets from whatever it is given.
package runsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// Sink is a run's evidence sink.
type Sink struct {
	RunID, Nonce string
	Dir          *evidence.Dir
	Events       *evidence.Events // nil when the event log could not be opened
	Trace        *evidence.Trace
	Report       *ctoharness.Report
	Clock        func() time.Time

	cur      ctoharness.Step
	stopped  func() error
	proven   bool // the source was proven before the run changed anything
	diskFull bool
	red      Redactor
	bulk     func() []string // what FreeSpace may remove (SetBulk)
	freed    bool
}

// Redactor hides the run's secrets (agent keys) in what the sink writes.
type Redactor interface {
	Data(any) any
	String(string) string
}

// New is the sink of a run whose directory and trace exist; stopped says
// why the run was cancelled (nil while it is not).
func New(runID, nonce string, dir *evidence.Dir, tr *evidence.Trace, rep *ctoharness.Report, clock func() time.Time, stopped func() error) *Sink {
	if stopped == nil {
		stopped = func() error { return nil }
	}
	return &Sink{RunID: runID, Nonce: nonce, Dir: dir, Trace: tr, Report: rep, Clock: clock, stopped: stopped}
}

// StopCause returns why ctx was cancelled, or nil while it is not.
func StopCause(ctx context.Context) func() error {
	return func() error {
		if ctx.Err() == nil {
			return nil
		}
		if c := context.Cause(ctx); c != nil {
			return c
		}
		return ctx.Err()
	}
}

// SetRedactor makes every later event and blocker message pass through r.
func (s *Sink) SetRedactor(r Redactor) { s.red = r }

// SetStep is the step now running; trace entries and INTERRUPTED name it.
func (s *Sink) SetStep(st ctoharness.Step) {
	s.cur = st
	if s.Trace != nil {
		s.Trace.SetStep(st)
	}
}

// Step is the step now running.
func (s *Sink) Step() ctoharness.Step { return s.cur }

// SourceProven records that the source's before-proof was taken: an
// interruption from now on still leaves the proofs to be taken.
func (s *Sink) SourceProven() { s.proven = true }

// OK says whether nothing blocks the run yet.
func (s *Sink) OK() bool { return len(s.Report.Blockers) == 0 }

// Has says whether a blocker with code was raised.
func (s *Sink) Has(code ctoharness.BlockerCode) bool {
	for _, b := range s.Report.Blockers {
		if b.Code == code {
			return true
		}
	}
	return false
}

// Emit appends an event; a failing event log is itself a blocker.
func (s *Sink) Emit(ctx context.Context, t ctoharness.EventType, data any) {
	if s.Events == nil {
		return
	}
	if s.red != nil {
		data = s.red.Data(data)
	}
	if err := s.Events.Emit(ctx, t, data); err != nil && s.Events.Count() > 0 {
		s.BlockWrite(err, ctoharness.StepReport)
	}
}

// Block records a blocker (once) and emits run_blocked for it.
func (s *Sink) Block(b ctoharness.Blocker) {
	if s.red != nil {
		b.Message = s.red.String(b.Message)
	}
	for _, have := range s.Report.Blockers {
		if have == b {
			return
		}
	}
	s.Report.Blockers = append(s.Report.Blockers, b)
	if s.Events != nil && s.Events.Err() == nil {
		_ = s.Events.Emit(context.Background(), ctoharness.EvRunBlocked, b)
	}
}

// BlockErr records a step's failure: a full disk as ARTIFACT_WRITE_FAILED,
// the run's own cancellation as INTERRUPTED, anything else by its code.
func (s *Sink) BlockErr(err error, step ctoharness.Step) {
	s.NoteNoSpace(err, step)
	if s.Cancelled(err) {
		s.Interrupted()
		return
	}
	s.Block(ctoharness.AsBlocker(err, step))
}

// BlockWrite records that evidence could not be written (once): the event
// log may be the thing that failed, so no event is emitted for it.
func (s *Sink) BlockWrite(err error, step ctoharness.Step) {
	s.diskFull = s.diskFull || NoSpace(err)
	if s.Has(ctoharness.BlockArtifactWriteFailed) {
		return
	}
	s.Report.Blockers = append(s.Report.Blockers, ctoharness.Blocker{Code: ctoharness.BlockArtifactWriteFailed, Step: step, Message: err.Error()})
}

// WriteJSON writes a schema-checked artifact; a failure blocks the run.
func (s *Sink) WriteJSON(ctx context.Context, name string, kind schemas.Kind, v any, step ctoharness.Step) bool {
	if err := s.Dir.WriteJSON(ctx, name, kind, v); err != nil {
		s.BlockWrite(err, step)
		return false
	}
	return true
}

// WriteJSONItems is WriteJSON for a document with one large top-level
// array, written item by item (evidence.Dir.WriteJSONItems).
func (s *Sink) WriteJSONItems(ctx context.Context, name string, kind schemas.Kind, doc any, key string, n int, item func(int) any, step ctoharness.Step) bool {
	if err := s.Dir.WriteJSONItems(ctx, name, kind, doc, key, n, item); err != nil {
		s.BlockWrite(err, step)
		return false
	}
	return true
}

// NoSpace reports whether err says the filesystem is full. Some layers keep
// only the message of the system error, so the message counts too.
func NoSpace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// NoteNoSpace marks the run as having hit a full disk; it always carries
// ARTIFACT_WRITE_FAILED then, whichever step noticed.
func (s *Sink) NoteNoSpace(err error, step ctoharness.Step) {
	if !NoSpace(err) {
		return
	}
	s.diskFull = true
	s.BlockWrite(err, step)
}

// DiskFull says whether a write of the run failed for lack of space.
func (s *Sink) DiskFull() bool { return s.diskFull }

// Interrupted records INTERRUPTED (once) at the current step if the run was
// cancelled, and reports whether it was.
func (s *Sink) Interrupted() bool {
	cause := s.stopped()
	if cause == nil {
		return false
	}
	if s.Has(ctoharness.BlockInterrupted) {
		return true
	}
	why := "the run was cancelled"
	if cause != context.Canceled { // a signal's cause also matches context.Canceled with errors.Is
		why = cause.Error()
	}
	after := "nothing had been copied yet"
	if s.proven {
		after = "what was running was stopped, and the fixture and source proofs were still taken"
	}
	s.Block(ctoharness.Blocker{Code: ctoharness.BlockInterrupted, Step: s.cur,
		Message: fmt.Sprintf("interrupted during %s (%s); %s", s.cur, why, after)})
	return true
}

// Cancelled reports whether err is the run's own cancellation rather than a
// failure of the step that returned it.
func (s *Sink) Cancelled(err error) bool {
	return s.stopped() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
