// Package execwatch is the harness's exec watch: it answers the execve(2)
// and execveat(2) calls that the sandbox launcher's seccomp listener hands
// over (through package notify, which dispatches the listener's calls),
// reads what each call asks to run from the caller's memory, tells the
// commands Case runs from the processes those commands start, and lets
// each command through or refuses it as the caller's Decide says.
//
// Case's own account of its commands (case.command events) is a claim; this
// is the count. See docs/sandbox.md, "The exec watch".
package execwatch

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cto-harness/cto-harness/harness/notify"
	"golang.org/x/sys/unix"
)

// RefusedErrno is what a refused exec fails with: the agent sees
// "permission denied" for that command and carries on.
const RefusedErrno = unix.EACCES

// ErrWatch marks an exec watch that cannot be used.
var ErrWatch = errors.New("exec watch failed")

// Options configures one watch.
type Options struct {
	// AgentPaths are the agent's own executables: files, or directories
	// whose files all are (an agent's install directory). An agent process
	// that executes one of them stays the agent; it is not a command.
	AgentPaths []string
	// Decide is asked about every command, in the order they are seen. A
	// nil result lets it run; an error refuses it (the exec fails with
	// RefusedErrno) and is the reason. It runs on the watch's goroutine
	// while the caller waits, so it must be quick.
	Decide func(Command) error
}

// Stats is what the watch saw.
type Stats struct {
	Execs    int // every exec notified, commands, their descendants and the agent's own
	Commands int // commands let through
	Refused  int // commands refused
	Inside   int // execs inside a command (its descendants and its own re-execs)
	Agent    int // execs of the agent itself: its first program, its re-execs and own executables
	Gone     int // callers that died before they could be judged
}

// Watch is one command's exec watch: the handler of its execs
// (notify.Options.Exec), with what it saw.
type Watch struct {
	o     Options
	mu    sync.Mutex
	stats Stats
	tree  *tree
}

// New prepares an exec watch. Pass Start as notify.Options.Started and
// Handle as notify.Options.Exec.
func New(o Options) (*Watch, error) {
	if o.Decide == nil {
		return nil, fmt.Errorf("%w: no Decide function", ErrWatch)
	}
	return &Watch{o: o}, nil
}

// Start takes the launcher's pid, the root of the process tree: its first
// exec is the agent.
func (w *Watch) Start(launcher int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tree = newTree(launcher, w.o.AgentPaths)
}

// Stats is what the watch saw so far.
func (w *Watch) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Handle judges one exec and answers it. An exec that is let through
// continues in the kernel (SECCOMP_USER_NOTIF_FLAG_CONTINUE) with
// whatever its memory holds then: a caller that rewrites its path or argv
// after the look runs something else than was classified. What is enforced
// is the count (every exec is seen, and a refused one never runs);
// Landlock, the namespaces and the rest of the sandbox still bind whatever
// runs.
func (w *Watch) Handle(c *notify.Call) {
	c.Answer(w.judge(c))
}

// judge classifies one exec and returns 0 to let it run or the errno the
// caller gets.
func (w *Watch) judge(c *notify.Call) unix.Errno {
	w.mu.Lock()
	w.stats.Execs++
	t := w.tree
	w.mu.Unlock()
	if t == nil {
		return RefusedErrno // no launcher named: nothing can be classified
	}
	call, ok := readCall(int(c.Pid), &c.Notif)
	if !c.Valid() {
		w.count(func(s *Stats) { s.Gone++ })
		return unix.ESRCH // the caller is gone: the answer reaches no one
	}
	if !ok {
		// A path or argv the caller's own memory does not hold: the
		// kernel would fail the exec the same way.
		return unix.EFAULT
	}
	k, kind := t.classify(call)
	switch kind {
	case kindAgent:
		t.set(k, kindAgent)
		w.count(func(s *Stats) { s.Agent++ })
		return 0
	case kindInside:
		t.set(k, kindInside)
		w.count(func(s *Stats) { s.Inside++ })
		return 0
	}
	cmd := call.command()
	if err := w.o.Decide(cmd); err != nil {
		w.count(func(s *Stats) { s.Refused++ })
		return RefusedErrno
	}
	t.set(k, kindInside)
	w.count(func(s *Stats) { s.Commands++ })
	return 0
}

func (w *Watch) count(f func(*Stats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}
