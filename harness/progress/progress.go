// Package progress draws one status line on a terminal while a run works:
// the step (copy, baseline commit, Case, verification), files and bytes where
// the step counts them, and the time the step has taken. A nil *Line does
// nothing, so callers never check whether progress is wanted.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Line is the status line. It is safe for concurrent use: the copy reports
// from several goroutines.
type Line struct {
	w        io.Writer
	now      func() time.Time
	every    time.Duration // redraw period while a step runs; 0: only on changes
	mu       sync.Mutex
	step     string
	start    time.Time
	files    int
	bytes    int64
	drawn    time.Time
	shown    bool
	stopTick chan struct{}
}

// New draws on w. now is the clock; every is how often the elapsed time is
// redrawn while a step runs without reporting (a long Case), 0 for never.
func New(w io.Writer, now func() time.Time, every time.Duration) *Line {
	return &Line{w: w, now: now, every: every}
}

// OnTerminal is New when terminal says w is a terminal (the caller's
// IsTerminal(w)), and otherwise nil, which draws nothing: a log or a pipe
// keeps exactly the output it had without progress.
func OnTerminal(w io.Writer, terminal bool, now func() time.Time, every time.Duration) *Line {
	if !terminal {
		return nil
	}
	return New(w, now, every)
}

// IsTerminal reports whether w is a terminal: progress is drawn only there,
// never into a file, a pipe or a CI log.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Step starts a step, ending the previous one.
func (l *Line) Step(name string) {
	if l == nil {
		return
	}
	l.stop()
	l.mu.Lock()
	if l.files > 0 || l.bytes > 0 {
		l.drawLocked(true) // the step's final counts, however fast it was
	}
	l.step, l.start, l.files, l.bytes = name, l.now(), 0, 0
	l.drawLocked(true)
	l.mu.Unlock()
	if l.every > 0 {
		stop := make(chan struct{})
		l.mu.Lock()
		l.stopTick = stop
		l.mu.Unlock()
		go l.tick(stop)
	}
}

// Item starts the step of working on item n (from 1) of total, named name:
// "step n/total: name". A long list of slow items (the failure matrix's
// rows) shows how far it is and what it is on.
func (l *Line) Item(step string, n, total int, name string) {
	l.Step(fmt.Sprintf("%s %d/%d: %s", step, n, total, name))
}

// Add counts files and bytes done in the current step.
func (l *Line) Add(files int, bytes int64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.files += files
	l.bytes += bytes
	l.drawLocked(false)
	l.mu.Unlock()
}

// Close ends the last step and clears the line, so the run's own output
// starts on a clean line.
func (l *Line) Close() {
	if l == nil {
		return
	}
	l.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown {
		fmt.Fprint(l.w, "\r\x1b[K")
		l.shown = false
	}
	l.step = ""
}

func (l *Line) tick(stop chan struct{}) {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			l.mu.Lock()
			l.drawLocked(true)
			l.mu.Unlock()
		}
	}
}

func (l *Line) stop() {
	l.mu.Lock()
	stop := l.stopTick
	l.stopTick = nil
	l.mu.Unlock()
	if stop != nil {
		close(stop)
	}
}

// minRedraw keeps a fast copy from spending its time on the terminal.
const minRedraw = 100 * time.Millisecond

func (l *Line) drawLocked(force bool) {
	if l.step == "" {
		return
	}
	now := l.now()
	if !force && now.Sub(l.drawn) < minRedraw {
		return
	}
	l.drawn = now
	l.shown = true
	fmt.Fprintf(l.w, "\r\x1b[Kcto-harness: %s", l.step)
	if l.files > 0 || l.bytes > 0 {
		fmt.Fprintf(l.w, ", %d files, %s", l.files, Bytes(l.bytes))
	}
	fmt.Fprintf(l.w, ", %s", now.Sub(l.start).Round(100*time.Millisecond))
}

// Bytes prints a size for people.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
