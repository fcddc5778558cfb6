package progress_test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cto-harness/cto-harness/harness/progress"
)

// clock is a hand-moved clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLineDrawsStepsCountsAndElapsed(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := progress.New(&buf, c.now, 0)
	l.Step("copy")
	c.add(time.Second)
	l.Add(1, 2048)
	c.add(10 * time.Millisecond)
	l.Add(1, 2048) // within the redraw interval: not drawn
	c.add(time.Second)
	l.Add(1, 1<<20)
	l.Step("Case")
	c.add(1500 * time.Millisecond)
	l.Add(0, 0)
	l.Close()
	out := buf.String()
	for _, want := range []string{"cto-harness: copy, 0s", "copy, 1 files, 2.0 KiB, 1s", "copy, 3 files, 1.0 MiB, 2s", "cto-harness: Case, 0s", "Case, 1.5s"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress output lacks %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "2 files") {
		t.Errorf("redrew faster than the redraw interval: %q", out)
	}
	if !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("Close does not clear the line: %q", out)
	}
}

func TestTickRedrawsElapsed(t *testing.T) {
	var buf syncBuffer
	l := progress.New(&buf, time.Now, 5*time.Millisecond)
	l.Step("verification")
	time.Sleep(60 * time.Millisecond)
	l.Close()
	if n := strings.Count(buf.String(), "verification"); n < 3 {
		t.Fatalf("a step without reports was drawn %d times; the ticker does not redraw: %q", n, buf.String())
	}
}

// A list of items draws which one it is on, of how many, on one line
// rewritten in place; off a terminal nothing at all is written.
func TestItemsOnTerminalOnly(t *testing.T) {
	for _, terminal := range []bool{true, false} {
		var buf bytes.Buffer
		c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		l := progress.OnTerminal(&buf, terminal, c.now, 0)
		l.Step("stage 3: pass route")
		for i, row := range []string{"timeout", "source-mutated", "disallowed-file"} {
			c.add(time.Second)
			l.Item("stage 3: failure matrix", i+1, 3, row)
		}
		l.Close()
		out := buf.String()
		if !terminal {
			if out != "" {
				t.Errorf("off a terminal progress wrote %q", out)
			}
			continue
		}
		for _, want := range []string{"\r\x1b[Kcto-harness: stage 3: pass route, 0s", "\r\x1b[Kcto-harness: stage 3: failure matrix 1/3: timeout, 0s",
			"failure matrix 2/3: source-mutated", "failure matrix 3/3: disallowed-file"} {
			if !strings.Contains(out, want) {
				t.Errorf("the terminal did not get %q: %q", want, out)
			}
		}
		if strings.Contains(out, "\n") {
			t.Errorf("progress ended a line; it must rewrite one: %q", out)
		}
	}
}

func TestNilLineIsANoOp(t *testing.T) {
	var l *progress.Line
	l.Step("copy")
	l.Item("rows", 1, 2, "a")
	l.Add(1, 1)
	l.Close()
}

func TestIsTerminal(t *testing.T) {
	if progress.IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if progress.IsTerminal(f) {
		t.Error("a file is a terminal")
	}
	null, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	defer null.Close()
	if progress.IsTerminal(null) {
		t.Error("/dev/null (a character device) is a terminal")
	}
	pts := openPTY(t)
	defer pts.Close()
	if !progress.IsTerminal(pts) {
		t.Error("a pseudo-terminal is not a terminal")
	}
}

// openPTY opens a pseudo-terminal's terminal side.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals on this machine (/dev/ptmx): %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock int32
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, ptmx.Fd(), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("unlock the pseudo-terminal: %v", e)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("pseudo-terminal number: %v", err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR, 0)
	if err != nil {
		t.Skipf("open /dev/pts/%d: %v", n, err)
	}
	return pts
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
