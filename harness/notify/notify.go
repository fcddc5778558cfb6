// Package notify is the harness's side of the sandbox launcher's one
// seccomp listener. The kernel gives a process one listener, so the
// connection and socket watches (package egress) and the exec watch
// (package execwatch) share it: the launcher installs one filter that notifies the union of the
// calls its watches need and hands the listener over once; this package
// takes it and dispatches each notification, by system call number, to the
// handler of its watch. See docs/sandbox.md, "The watches".
package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Answers on the control socket; the launcher's awaitAck reads them.
const (
	ackOK     = 'Y'
	ackRefuse = 'N'
)

// DeniedErrno is what a call fails with when no handler answered it: one
// of a kind no watch asked for, of a foreign ABI, or one its handler left
// unanswered. None can happen by construction; if one does, it is refused.
const DeniedErrno = unix.EPERM

// ErrWatch marks a listener that could not be taken over or a watch that
// broke down: the record of what the command did has gaps from then on.
var ErrWatch = errors.New("seccomp watch failed")

// Handler answers one notified call. It must answer it (Call.Answer)
// exactly once; it runs on the watch's goroutine while the caller waits,
// so it must be quick.
type Handler func(*Call)

// Options names the handlers of one launcher's watches. The launcher says
// which watches its filter serves; a listener that serves another set than
// the handlers here is refused, and the command does not start.
type Options struct {
	// Exec answers execve(2) and execveat(2) (the exec watch).
	Exec Handler
	// Connect answers connect(2), sendto(2), sendmsg(2) and sendmmsg(2)
	// (the connection watch).
	Connect Handler
	// Socket answers socket(2) and socketpair(2) of a family the sandbox's
	// allowlist refuses (the socket watch); it must refuse them: the
	// kernel's own filter let them through for it to see.
	Socket Handler
	// Started, when set, is called with the launcher's pid once its
	// listener is taken, before any call is handed out.
	Started func(launcher int)
}

// Msg is the launcher's one message on the watch control socket: the
// number of its descriptor of the listener and the watches its filter
// serves. It is sent with write(2), since sendmsg(2) may be watched by
// then; the harness takes the descriptor with pidfd_getfd from the sender
// the kernel names (SO_PASSCRED).
type Msg struct {
	Watch   bool `json:"watch"`
	FD      int  `json:"fd"`
	Exec    bool `json:"exec,omitempty"`
	Connect bool `json:"connect,omitempty"`
	Socket  bool `json:"socket,omitempty"`
}

// Watch is one launcher's listener and its dispatcher.
type Watch struct {
	o       Options
	arch    uint32
	conn    *net.UnixConn
	stopR   *os.File
	stopW   *os.File
	wg      sync.WaitGroup
	mu      sync.Mutex
	failure error
	started bool
}

// Attach prepares the watch of one launch. It returns the launcher's end
// of the watch control socket: pass it as the extra file
// sandbox.Policy.WatchFD names and close it once the launcher started. The
// launcher sends its listener over it; the watch takes it, acknowledges it
// and answers every notified call until all of the command's processes are
// gone or Close is called.
func Attach(o Options) (*os.File, *Watch, error) {
	if o.Exec == nil && o.Connect == nil && o.Socket == nil {
		return nil, nil, fmt.Errorf("%w: no handler", ErrWatch)
	}
	arch, err := AuditArch()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrWatch, err)
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
	parent := os.NewFile(uintptr(fds[0]), "watch-control")
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
	w := &Watch{o: o, arch: arch, conn: conn.(*net.UnixConn), stopR: stopR, stopW: stopW}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run()
	}()
	return os.NewFile(uintptr(fds[1]), "watch-control-child"), w, nil
}

// Close stops the watch and waits for it: call it once the launcher has
// exited, so that no answer is given after it returns. It returns ErrWatch
// when the launcher's listener was refused or the watch broke down while
// the command ran.
func (w *Watch) Close() error {
	w.stopW.Close()
	w.conn.Close()
	w.wg.Wait()
	w.stopR.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure
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
		w.fail("the launcher's seccomp listener is not usable: "+format, a...)
	}
	var m Msg
	if err := json.Unmarshal(buf[:n], &m); err != nil || !m.Watch {
		refuse("malformed message %q", buf[:n])
		return
	}
	if m.Exec != (w.o.Exec != nil) || m.Connect != (w.o.Connect != nil) || m.Socket != (w.o.Socket != nil) {
		refuse("its filter serves exec=%t connect=%t socket=%t, the harness expects exec=%t connect=%t socket=%t",
			m.Exec, m.Connect, m.Socket, w.o.Exec != nil, w.o.Connect != nil, w.o.Socket != nil)
		return
	}
	if cred == nil || cred.Pid <= 0 {
		refuse("the kernel named no sender")
		return
	}
	fd, err := TakeFD(int(cred.Pid), m.FD)
	if err != nil {
		refuse("descriptor %d of process %d: %v", m.FD, cred.Pid, err)
		return
	}
	defer unix.Close(fd)
	if err := checkListener(fd); err != nil {
		refuse("%v", err)
		return
	}
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	if w.o.Started != nil {
		w.o.Started(int(cred.Pid))
	}
	if _, err := w.conn.Write([]byte{ackOK}); err != nil {
		w.fail("cannot acknowledge the launcher's seccomp listener: %v", err)
		return
	}
	// No LockOSThread and no SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: a locked
	// goroutine that ends takes its thread with it, and a launcher forked
	// from that thread gets its parent-death signal (SIGKILL); with the
	// synchronous wake-up, launchers under load died of SIGKILL as well.
	w.loop(fd, int(w.stopR.Fd()))
}

// loop answers notifications until the listener hangs up (no process of
// the command is left) or stop becomes readable. A watch that breaks down
// before either is a failure: from then on the command's watched calls
// fail (ENOSYS) and the record would have gaps.
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
		c := &Call{fd: fd}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&c.Notif))); e != 0 {
			if e == unix.EINTR || e == unix.ENOENT {
				continue // the caller went away before it was received
			}
			w.fail("SECCOMP_IOCTL_NOTIF_RECV: %v", e)
			return
		}
		w.dispatch(c)
	}
}

// dispatch hands c to the handler of its system call and makes sure it is
// answered. A call no handler serves is refused, and so is one its handler
// left unanswered; both mean the filter and the harness disagree, so the
// watch is marked failed as well.
func (w *Watch) dispatch(c *Call) {
	h := w.handler(c)
	if h == nil {
		c.Answer(DeniedErrno)
		w.fail("system call %d (arch %#x) reached the harness, and no watch serves it", c.Nr, c.Arch)
		return
	}
	h(c)
	if !c.answered {
		c.Answer(DeniedErrno)
		w.fail("system call %d was left unanswered by its watch", c.Nr)
	}
}

// handler is the watch that serves c's system call, nil if none does.
func (w *Watch) handler(c *Call) Handler {
	if c.Arch != w.arch {
		return nil
	}
	switch c.Nr {
	case unix.SYS_EXECVE, unix.SYS_EXECVEAT:
		return w.o.Exec
	case unix.SYS_CONNECT, unix.SYS_SENDTO, unix.SYS_SENDMSG, unix.SYS_SENDMMSG:
		return w.o.Connect
	case unix.SYS_SOCKET, unix.SYS_SOCKETPAIR:
		return w.o.Socket
	}
	return nil
}

// Notif is struct seccomp_notif of <linux/seccomp.h>: one notified call.
// Pid is the calling thread, in the harness's pid namespace.
type Notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// resp is struct seccomp_notif_resp.
type resp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// Call is one notified call waiting for its answer.
type Call struct {
	Notif
	fd       int
	answered bool
}

// Valid reports whether the call is still waiting: its caller has not
// died, so what was read from the caller's memory was read from it.
func (c *Call) Valid() bool {
	id := c.ID
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(c.fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return e == 0
}

// Answer lets the kernel carry on with the call (errno 0:
// SECCOMP_USER_NOTIF_FLAG_CONTINUE) or fails it with errno; a socket(2) or
// socketpair(2) always fails (EACCES for 0). Only the first
// answer is sent; it reports whether that answer reached the caller (false
// when the caller is gone, or the call was answered already).
func (c *Call) Answer(errno unix.Errno) bool {
	if c.answered {
		return false
	}
	c.answered = true
	if errno == 0 && (c.Nr == unix.SYS_SOCKET || c.Nr == unix.SYS_SOCKETPAIR) {
		// The socket watch is handed only what the family allowlist
		// refuses, which the kernel's own filter let through for it:
		// letting it go on would open the family.
		errno = unix.EACCES
	}
	r := resp{ID: c.ID}
	if errno == 0 {
		r.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	} else {
		r.Error = -int32(errno)
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(c.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&r)))
	return e == 0
}

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd for a thread, not only a
// thread-group leader.
const pidfdThread = unix.O_EXCL

// TakeFD duplicates descriptor fd of thread (or process) tid into this
// process.
func TakeFD(tid, fd int) (int, error) {
	pidfd, err := unix.PidfdOpen(tid, pidfdThread)
	if err != nil {
		// Before Linux 6.9 a pidfd names a thread group: open the thread's.
		if pidfd, err = unix.PidfdOpen(threadGroup(tid), 0); err != nil {
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

// threadGroup is the process a thread belongs to (tid when unknown).
func threadGroup(tid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return tid
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return tid
}

// checkListener proves fd is a seccomp notification listener.
func checkListener(fd int) error {
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return err
	}
	if target != "anon_inode:seccomp notify" {
		return fmt.Errorf("descriptor is %q, not a seccomp listener", target)
	}
	return nil
}

// AuditArch is the native ABI's AUDIT_ARCH value: the launcher's filter
// notifies calls of this ABI only (its other filter kills foreign ones).
func AuditArch() (uint32, error) {
	arch, ok := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if !ok {
		return 0, fmt.Errorf("no seccomp watch for %s", runtime.GOARCH)
	}
	return arch, nil
}
