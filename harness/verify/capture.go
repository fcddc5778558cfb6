package verify

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/cto-harness/cto-harness/harness/proc"
)

// InlineCap is what each of stdout and stderr keeps inline in the record,
// truncation marker included.
const InlineCap = proc.InlineCap

// Capture keeps the beginning of one output stream in memory for the report,
// and counts the rest. Like proc.CappedFile it never fails a write, so the
// child is never killed by a full buffer.
type Capture struct {
	mu    sync.Mutex
	name  string
	cap   int
	buf   []byte
	total int64
}

// NewCapture keeps up to limit bytes (marker included) of the stream called name.
func NewCapture(name string, limit int) *Capture {
	return &Capture{name: name, cap: limit}
}

// Write implements io.Writer.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.cap - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

// Text returns the inline text and whether it was truncated. A truncated
// stream keeps as much of its beginning as fits with the marker, cut at a
// UTF-8 boundary; the result depends only on the bytes written.
func (c *Capture) Text() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total <= int64(c.cap) {
		return string(c.buf), false
	}
	marker := fmt.Sprintf("\n[cto-harness: %s truncated: %d bytes written, the first %%d kept]\n", c.name, c.total)
	keep := c.cap - len(fmt.Sprintf(marker, c.cap))
	keep = max(min(keep, len(c.buf)), 0)
	for keep > 0 && keep < len(c.buf) && !utf8.RuneStart(c.buf[keep]) {
		keep--
	}
	return string(c.buf[:keep]) + fmt.Sprintf(marker, keep), true
}

// Total is the number of bytes written.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
