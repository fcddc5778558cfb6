// Package execwatch is the harness's side of the exec watch: it takes the
// sandbox launcher's seccomp listener for execve(2) and execveat(2), reads
// what each call asks to run from the caller's memory, tells the commands
// Case runs from the processes those commands start, and lets each command
// through or refuses it as the caller's Decide says.
//
// Case's own account of its commands (case.command events) is a claim; this
// is the count. See docs/sandbox.md, "The exec watch".
package execwatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Answers on the control socket; the launcher's awaitAck reads them.
const (
	ackOK     = 'Y'
	ackRefuse = 'N'
)

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd for a thread.
const pidfdThread = unix.O_EXCL

// RefusedErrno is what a refused exec fails with: the agent sees
// "permission denied" for that command and carries on.
const RefusedErrno = unix.EACCES

// ErrWatch marks a watch that could not be taken over or broke down: the
// record of what ran has gaps, so the run cannot rely on it.
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

// Watch is one command's exec watch.
type Watch struct {
	o       Options
	conn    *net.UnixConn
	stopR   *os.File
	stopW   *os.File
	wg      sync.WaitGroup
	mu      sync.Mutex
	stats   Stats
	failure error
	started bool
	tree    *tree
}

// Attach prepares an exec watch. It returns the launcher's end of the
// control socket: pass it as the extra file sandbox.Policy.ExecFD names
// and close it once the launcher started. The launcher sends its listener
// over it; the watch takes it, acknowledges it and answers every exec
// until all of the command's processes are gone or Close is called.
func Attach(o Options) (*os.File, *Watch, error) {
	if o.Decide == nil {
		return nil, nil, fmt.Errorf("%w: no Decide function", ErrWatch)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: socketpair: %w", ErrWatch, err)
	}
	// The kernel names the sender of every message received here, so the
	// listener is taken from the launcher itself.
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("%w: SO_PASSCRED: %w", ErrWatch, err)
	}
	parent := os.NewFile(uintptr(fds[0]), "exec-control")
	conn, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("%w: control socket: %w", ErrWatch, err)
	}
	stopR, stopW, err := os.Pipe()
	if err != nil {
		conn.Close()
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("%w: pipe: %w", ErrWatch, err)
	}
	w := &Watch{o: o, conn: conn.(*net.UnixConn), stopR: stopR, stopW: stopW}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run()
	}()
	return os.NewFile(uintptr(fds[1]), "exec-control-child"), w, nil
}

// Close stops the watch and waits for it: call it once the launcher has
// exited, so that no answer is given after it returns. It returns what the
// watch saw, and ErrWatch when the launcher's listener was refused or the
// watch broke down while the command ran.
func (w *Watch) Close() (Stats, error) {
	w.stopW.Close()
	w.conn.Close()
	w.wg.Wait()
	w.stopR.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats, w.failure
}

// Started reports whether the launcher handed its listener over.
func (w *Watch) Started() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started
}

func (w *Watch) fail(format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failure == nil {
		w.failure = fmt.Errorf("%w: "+format, append([]any{ErrWatch}, a...)...)
	}
}

// execMsg is sandbox's message naming the listener.
type execMsg struct {
	Exec bool `json:"exec_watch"`
	FD   int  `json:"fd"`
}

// run takes the listener and answers notifications. A launcher that exits
// without sending (it failed, and says so itself) ends the watch quietly.
func (w *Watch) run() {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*16)+unix.CmsgSpace(unix.SizeofUcred))
	n, oobn, _, _, err := w.conn.ReadMsgUnix(buf, oob)
	if err != nil || (n == 0 && oobn == 0) {
		return
	}
	var cred *unix.Ucred
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			if got, rerr := unix.ParseUnixRights(&m); rerr == nil {
				for _, fd := range got {
					unix.Close(fd) // the listener never travels as SCM_RIGHTS
				}
			} else if c, cerr := unix.ParseUnixCredentials(&m); cerr == nil {
				cred = c
			}
		}
	}
	refuse := func(format string, a ...any) {
		_, _ = w.conn.Write([]byte{ackRefuse})
		w.fail("the launcher's exec watch is not usable: "+format, a...)
	}
	var m execMsg
	if err := json.Unmarshal(buf[:n], &m); err != nil || !m.Exec {
		refuse("malformed message %q", buf[:n])
		return
	}
	if cred == nil || cred.Pid <= 0 {
		refuse("the kernel named no sender")
		return
	}
	fd, err := takeFD(int(cred.Pid), m.FD)
	if err != nil {
		refuse("descriptor %d of process %d: %v", m.FD, cred.Pid, err)
		return
	}
	defer unix.Close(fd)
	if err := checkSeccompListener(fd); err != nil {
		refuse("%v", err)
		return
	}
	w.mu.Lock()
	w.started = true
	w.tree = newTree(int(cred.Pid), w.o.AgentPaths)
	w.mu.Unlock()
	if _, err := w.conn.Write([]byte{ackOK}); err != nil {
		w.fail("cannot acknowledge the launcher's exec watch: %v", err)
		return
	}
	// No LockOSThread and no SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: a locked
	// goroutine that ends takes its thread with it, and a launcher forked
	// from that thread gets its parent-death signal.
	w.loop(fd, int(w.stopR.Fd()))
}

// loop answers notifications until the listener hangs up (no process of
// the command is left) or stop becomes readable. A watch that breaks down
// before either is a failure: from then on the command's execs fail
// (ENOSYS) and the count would have gaps.
func (w *Watch) loop(fd, stop int) {
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			w.fail("poll: %v", err)
			return
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			if pfd[1].Revents != 0 {
				return
			}
			if pfd[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				w.fail("poll events %#x", pfd[0].Revents)
			}
			return // POLLHUP: the filter has no users left
		}
		var n notif
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); e != 0 {
			if e == unix.EINTR || e == unix.ENOENT {
				continue // the caller went away before it was received
			}
			w.fail("SECCOMP_IOCTL_NOTIF_RECV: %v", e)
			return
		}
		w.answer(fd, &n)
	}
}

// notif and notifResp are struct seccomp_notif and struct
// seccomp_notif_resp of <linux/seccomp.h>.
type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// answer judges one exec and responds. An exec that is let through
// continues in the kernel (SECCOMP_USER_NOTIF_FLAG_CONTINUE) with
// whatever its memory holds then: a caller that rewrites its path or argv
// after the look runs something else than was classified. What is enforced
// is the count (every exec is seen, and a refused one never runs);
// Landlock, the namespaces and the rest of the sandbox still bind whatever
// runs.
func (w *Watch) answer(fd int, n *notif) {
	errno := w.judge(fd, n)
	resp := notifResp{ID: n.ID}
	if errno == 0 {
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	} else {
		resp.Error = -int32(errno)
	}
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

// judge classifies one exec and returns 0 to let it run or the errno the
// caller gets.
func (w *Watch) judge(fd int, n *notif) unix.Errno {
	w.mu.Lock()
	w.stats.Execs++
	t := w.tree
	w.mu.Unlock()
	call, ok := readCall(int(n.Pid), n)
	if !validNotif(fd, n.ID) {
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

// takeFD duplicates descriptor fd of thread (or process) tid into this
// process.
func takeFD(tid, fd int) (int, error) {
	pidfd, err := unix.PidfdOpen(tid, pidfdThread)
	if err != nil {
		if pidfd, err = unix.PidfdOpen(tid, 0); err != nil {
			return -1, fmt.Errorf("pidfd_open: %w", err)
		}
	}
	defer unix.Close(pidfd)
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_getfd: %w", err)
	}
	return dup, nil
}

// checkSeccompListener proves fd is a seccomp notification listener.
func checkSeccompListener(fd int) error {
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return err
	}
	if target != "anon_inode:seccomp notify" {
		return fmt.Errorf("descriptor is %q, not a seccomp listener", target)
	}
	return nil
}

// validNotif tells whether the notification is still pending: the caller
// has not died, so what was read from it was read from the right process.
func validNotif(fd int, id uint64) bool {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return e == 0
}
