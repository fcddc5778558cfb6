package validators

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseevent"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// The event log is the one artifact whose size Case drives, so it is never
// held in memory: load reads it once (schema, decoding, count, the first and
// last event, the set of types) and each check that needs the events in
// order streams the file again through events. Memory stays constant in the
// log's length, and every pass stops when the context is cancelled.

// maxLine bounds one line of a streamed file.
const maxLine = 64 * 1024 * 1024

// errInterrupted marks a pass that stopped because validation was cancelled.
var errInterrupted = errors.New("validation was interrupted")

// eventRec is one event of the log, with its line as written (for the chain).
type eventRec struct {
	ctoharness.Event
	line []byte
}

// eventLog is what load learned about the event log in its one full pass.
type eventLog struct {
	n     int // well-formed events before the first malformed line
	first *ctoharness.Event
	last  *ctoharness.Event
	types map[ctoharness.EventType]bool
}

// loadEvents is load's pass over the event log.
func (v *runView) loadEvents() {
	v.log = eventLog{types: map[ctoharness.EventType]bool{}}
	err := scanFile(v.ctx, v.path(evidence.EventsFile), func(i int, line []byte) error {
		// Case's data are in the log: the line is held to the ingest's
		// depth and key rules before the schema check decodes it.
		if err := caseevent.Check(line, caseevent.MaxEnvelopedDepth); err != nil {
			return fmt.Errorf("line %d: %w", i+1, err)
		}
		if err := v.set.Validate(schemas.Event, line); err != nil {
			return fmt.Errorf("line %d: %v", i+1, err)
		}
		var e ctoharness.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("line %d: malformed JSON: %v", i+1, err)
		}
		v.log.n++
		if v.log.first == nil {
			v.log.first = &e
		}
		v.log.last = &e
		v.log.types[e.Type] = true
		return nil
	})
	if err != nil {
		v.eventsErr = err.Error()
		v.interrupted = v.interrupted || errors.Is(err, errInterrupted)
	}
}

// events yields the well-formed events in order, streaming the log again;
// use it as `for i, e := range v.events`.
func (v *runView) events(yield func(int, eventRec) bool) {
	if v.log.n == 0 {
		return
	}
	stop := errors.New("stop")
	err := scanFile(v.ctx, v.path(evidence.EventsFile), func(i int, line []byte) error {
		if i >= v.log.n {
			return stop
		}
		var e ctoharness.Event
		// load held each line to caseevent.Check once: doing it again on
		// every pass would multiply its cost by the checks that stream.
		if json.Unmarshal(line, &e) != nil {
			return stop // changed since load; load's verdict stands
		}
		if !yield(i, eventRec{Event: e, line: line}) {
			return stop
		}
		return nil
	})
	if errors.Is(err, errInterrupted) {
		v.interrupted = true
	}
}

// scanFile calls fn for each line of the file at p (without its newline; the
// slice is only valid during the call). A file whose last line is not
// terminated was cut short and is refused before any line is read. It returns
// fn's first error, and errInterrupted when ctx was cancelled.
func scanFile(ctx context.Context, p string, fn func(i int, line []byte) error) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil {
			return err
		}
		if last[0] != '\n' {
			return errors.New("the last line is not terminated (the file was cut short)")
		}
	}
	// Most evidence files are small: a buffer larger than the file is
	// allocated for nothing, once per file per validation.
	size := 256 * 1024
	if st.Size() < int64(size) {
		size = max(int(st.Size())+1, 4096)
	}
	r := bufio.NewReaderSize(f, size)
	var long []byte
	for i := 0; ; {
		if i%1024 == 0 && ctx.Err() != nil {
			return errInterrupted
		}
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(chunk) > maxLine {
				return fmt.Errorf("line %d is longer than %d bytes", i+1, maxLine)
			}
			long = append(long, chunk...)
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil // the last line ended with '\n' (checked above)
		}
		if err != nil {
			return err
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
		}
		// As bufio.ScanLines: without the newline and one carriage return before it.
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if ferr := fn(i, line); ferr != nil {
			return ferr
		}
		long = nil
		i++
	}
}
