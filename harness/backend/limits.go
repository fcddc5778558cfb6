package backend

import "fmt"

// Limits cap Case's event stream in one run. A Case that writes valid events
// without end must not make the harness's memory, its event logs or its run
// time grow without bound: past either cap the harness stops Case and drops
// (but counts) what still arrives. Zero means no cap.
type Limits struct {
	MaxEvents int   // well-formed events accepted
	MaxBytes  int64 // bytes of the accepted event lines
}

// Usage is what the event stream used, and which cap stopped Case ("" if none).
type Usage struct {
	Events  int
	Bytes   int64
	Dropped int
	Hit     string
}

// limiter enforces Limits; it is called under the line splitter's lock.
type limiter struct {
	Limits
	Usage
	stop func()
}

// accept counts one well-formed event line of n bytes and reports whether it
// is within the caps. The first refusal stops Case.
func (l *limiter) accept(n int) bool {
	if l.Hit == "" {
		switch {
		case l.MaxEvents > 0 && l.Events+1 > l.MaxEvents:
			l.Hit = fmt.Sprintf("more than %d events", l.MaxEvents)
		case l.MaxBytes > 0 && l.Bytes+int64(n) > l.MaxBytes:
			l.Hit = fmt.Sprintf("more than %d bytes of events", l.MaxBytes)
		}
		if l.Hit != "" {
			l.stop()
		}
	}
	if l.Hit != "" {
		l.Dropped++
		return false
	}
	l.Events++
	l.Bytes += int64(n)
	return true
}
