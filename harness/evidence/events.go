package evidence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/schemas"
)

// GenesisHash is the Prev of the first event: it binds the chain to the run
// id and nonce, so a chain cannot be moved to another run.
func GenesisHash(runID, nonce string) string {
	sum := sha256.Sum256([]byte("cto-harness events\n" + runID + "\n" + nonce + "\n"))
	return hex.EncodeToString(sum[:])
}

// LineHash is the chain hash of one event line (without its newline).
func LineHash(line []byte) string {
	sum := sha256.Sum256(bytes.TrimRight(line, "\n"))
	return hex.EncodeToString(sum[:])
}

// Events appends hash-chained events to events.normalized.jsonl.
type Events struct {
	f       *os.File
	runID   string
	clock   func() time.Time
	schemas *schemas.Set
	seq     int
	prev    string
	types   map[ctoharness.EventType]bool // a set: the log itself may be long
	err     error
}

// OpenEvents starts the event log.
func (d *Dir) OpenEvents(runID, nonce string, clock func() time.Time) (*Events, error) {
	f, err := d.OpenAppend(EventsFile)
	if err != nil {
		return nil, err
	}
	return &Events{f: f, runID: runID, clock: clock, schemas: d.schemas, prev: GenesisHash(runID, nonce)}, nil
}

// Emit appends one event. After the first failure every later Emit fails too,
// so a broken log is never silently continued.
func (e *Events) Emit(ctx context.Context, typ ctoharness.EventType, data any) error {
	if e.err != nil {
		return e.err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		e.err = fmt.Errorf("%w: encode %s event: %v", ErrWrite, typ, err)
		return e.err
	}
	if data == nil || string(raw) == "null" {
		raw = []byte("{}")
	}
	ev := ctoharness.Event{Seq: e.seq + 1, Time: e.clock().UTC(), RunID: e.runID, Type: typ, Data: raw, Prev: e.prev}
	line, err := json.Marshal(ev)
	if err != nil {
		e.err = fmt.Errorf("%w: encode %s event: %v", ErrWrite, typ, err)
		return e.err
	}
	if err := e.schemas.Validate(schemas.Event, line); err != nil {
		e.err = fmt.Errorf("%w: %s event would not match its schema: %v", ErrWrite, typ, err)
		return e.err
	}
	if _, err := e.f.Write(append(line, '\n')); err != nil {
		e.err = fmt.Errorf("%w: %s: %v", ErrWrite, e.f.Name(), err)
		return e.err
	}
	e.seq++
	e.prev = LineHash(line)
	if e.types == nil {
		e.types = map[ctoharness.EventType]bool{}
	}
	e.types[typ] = true
	return nil
}

// Has reports whether an event of type typ was emitted.
func (e *Events) Has(typ ctoharness.EventType) bool { return e.types[typ] }

// Head is the hash of the last line written (the chain head).
func (e *Events) Head() string { return e.prev }

// Count is the number of events written.
func (e *Events) Count() int { return e.seq }

// Err is the first write error, if any.
func (e *Events) Err() error { return e.err }

// Close syncs and closes the log.
func (e *Events) Close() error {
	if err := e.f.Sync(); err != nil {
		e.f.Close()
		return fmt.Errorf("%w: %v", ErrWrite, err)
	}
	if err := e.f.Close(); err != nil {
		return fmt.Errorf("%w: %v", ErrWrite, err)
	}
	return e.err
}
