// Package proc runs one child process the way the harness needs every child
// run: in its own process group so a timeout kills the whole tree, with an
// explicit environment, and with output streamed to capped log files.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Defaults for output handling.
const (
	InlineCap     = 50 * 1024        // bytes of output kept inline in the report
	DefaultLogCap = 10 * 1024 * 1024 // bytes of each stream kept in its log file
	TruncMarker   = "\n[cto-harness: output truncated at %d bytes]\n"
)

// Spec describes one child run.
type Spec struct {
	Argv    []string
	Dir     string
	Env     []string
	Timeout time.Duration
	Grace   time.Duration // between SIGTERM and SIGKILL
	Stdout  io.Writer     // full stream destination (already capped by the caller if wanted)
	Stderr  io.Writer
	// SysProcAttr replaces the default (own process group, SIGKILL on harness
	// death); the sandbox launcher needs namespaces as well. It must keep Setpgid.
	SysProcAttr *syscall.SysProcAttr
	// ExtraFiles become the child's fd 3, 4, ... (the sandbox launcher's
	// egress control socket). Run closes them once the child has started,
	// so only the child holds them.
	ExtraFiles []*os.File
}

// Result is what happened.
type Result struct {
	ExitCode *int
	Signal   string
	Duration time.Duration
	TimedOut bool
}

// ErrStart marks a child that could not be started.
var ErrStart = errors.New("process did not start")

// Run starts the child, waits for it (or its timeout), and makes sure no
// process of its group is left alive afterwards.
func Run(ctx context.Context, s Spec) (Result, error) {
	if len(s.Argv) == 0 {
		return Result{}, fmt.Errorf("%w: empty command", ErrStart)
	}
	if s.Grace == 0 {
		s.Grace = 2 * time.Second
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin = nil
	cmd.Stdout = s.Stdout
	cmd.Stderr = s.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.SysProcAttr != nil {
		cmd.SysProcAttr = s.SysProcAttr
	}
	// Output pipes are closed as soon as the leader exits; a descendant that
	// keeps them open must not hold the harness.
	cmd.WaitDelay = s.Grace
	cmd.ExtraFiles = s.ExtraFiles
	start := time.Now()
	err := cmd.Start()
	for _, f := range s.ExtraFiles {
		f.Close()
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w: %s: %v", ErrStart, s.Argv[0], err)
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var res Result
	var timer <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		timer = t.C
	}
	var werr error
	select {
	case werr = <-done:
	case <-timer:
		res.TimedOut = true
		werr = stopGroup(pgid, s.Grace, done)
	case <-ctx.Done():
		werr = stopGroup(pgid, s.Grace, done)
	}
	// Whatever the leader did, its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	res.Duration = time.Since(start)
	if cmd.ProcessState != nil {
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			res.Signal = st.Signal().String()
		} else {
			c := cmd.ProcessState.ExitCode()
			res.ExitCode = &c
		}
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("wait for %s: %w", s.Argv[0], werr)
	}
	return res, nil
}

func stopGroup(pgid int, grace time.Duration, done <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-done
	}
}

// CappedFile writes at most Cap bytes to a file, then a truncation marker,
// and keeps the first InlineCap bytes in memory for the report.
type CappedFile struct {
	mu        sync.Mutex
	f         *os.File
	cap       int64
	written   int64
	seen      int64
	truncated bool
	inline    bytes.Buffer
	err       error
}

// NewCappedFile wraps f.
func NewCappedFile(f *os.File, cap int64) *CappedFile { return &CappedFile{f: f, cap: cap} }

// Write implements io.Writer; it never fails towards the child, so a child is
// not killed by SIGPIPE because its log hit the cap. Errors are kept for Close.
func (c *CappedFile) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen += int64(len(p))
	if room := InlineCap - c.inline.Len(); room > 0 {
		c.inline.Write(p[:min(len(p), room)])
	}
	if c.truncated || c.err != nil {
		return len(p), nil
	}
	chunk := p
	if rest := c.cap - c.written; int64(len(chunk)) > rest {
		chunk = chunk[:rest]
		c.truncated = true
	}
	if _, err := c.f.Write(chunk); err != nil {
		c.err = err
		return len(p), nil
	}
	c.written += int64(len(chunk))
	if c.truncated {
		if _, err := fmt.Fprintf(c.f, TruncMarker, c.cap); err != nil {
			c.err = err
		}
	}
	return len(p), nil
}

// Inline returns the first InlineCap bytes and whether more were written.
func (c *CappedFile) Inline() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inline.String(), c.seen > int64(c.inline.Len())
}

// Truncated reports whether the file hit its cap.
func (c *CappedFile) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated
}

// Close syncs and closes the file and returns the first write error.
func (c *CappedFile) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.f.Sync(); err != nil && c.err == nil {
		c.err = err
	}
	if err := c.f.Close(); err != nil && c.err == nil {
		c.err = err
	}
	return c.err
}
