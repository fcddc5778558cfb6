package sandbox

import (
	"encoding/json"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Seccomp filter flags missing from x/sys/unix's names.
const (
	filterFlagTsyncESRCH       = 1 << 4 // TSYNC together with NEW_LISTENER (Linux 5.7)
	filterFlagWaitKillableRecv = 1 << 5 // a received notification is not restarted by a signal (Linux 5.19)
)

// watchMsg is the one message on the watch control socket: the descriptor
// number of the seccomp listener and the watches its filter serves
// (notify.Msg on the harness's side). It is sent with write(2), since
// sendmsg(2) may be watched from then on; the harness takes the
// descriptor with pidfd_getfd, from the process the kernel names as the
// sender (SO_PASSCRED).
type watchMsg struct {
	Watch bool `json:"watch"`
	FD    int  `json:"fd"`
	watchSet
}

// watchSet are the watches one launcher's filter serves.
type watchSet struct {
	Exec    bool `json:"exec,omitempty"`
	Connect bool `json:"connect,omitempty"`
	Socket  bool `json:"socket,omitempty"`
}

func (w watchSet) any() bool { return w.Exec || w.Connect || w.Socket }

// watches reports which watches p asks for: the exec watch (ExecWatch),
// the connection watch (any egress layout) and the socket watch
// (SocketWatch).
func (p Policy) watches() watchSet {
	return watchSet{Exec: p.ExecWatch, Connect: p.Network != nil, Socket: p.SocketWatch}
}

// WatchFD is the launcher's descriptor of the watch control socket, which
// it needs whenever a watch is on (ExecWatch, SocketWatch, or a Network): the extra file
// after the egress control socket, or the first when there is none.
func (p Policy) WatchFD() int {
	if p.Network != nil {
		return ControlFD + 1
	}
	return ControlFD
}

// openWatchControl takes the watch control socket the harness passed.
func openWatchControl(p Policy) (*net.UnixConn, error) {
	fd := p.WatchFD()
	f := os.NewFile(uintptr(fd), "watch-control")
	conn, err := net.FileConn(f)
	f.Close() // the duplicate is close-on-exec; the command never sees it
	if err != nil {
		return nil, failf("seccomp watch: fd %d is not the harness's watch control socket: %v", fd, err)
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		return nil, failf("seccomp watch: fd %d is not a UNIX socket", fd)
	}
	return uc, nil
}

// watchCalls installs the one filter that hands the calls of every active
// watch to the harness before the kernel acts on them, and names its
// listener on uc. The kernel gives a process one listener, so the exec,
// connection and socket watches share it; the harness dispatches by
// system call. Without the harness's acknowledgement the command does not
// start.
//
// The exec watch gets every execve(2) and execveat(2): the harness counts
// what Case runs from them (Case's own account is a claim) and refuses a
// command the profile does not allow. The connection watch gets every
// connect(2), sendmsg(2) and sendmmsg(2), and every sendto(2) that names an
// address: the harness records each attempt that would leave the egress
// listeners, even the ones the namespace or Landlock would refuse without
// a packet, and answers it; the namespace and Landlock still decide
// everything it lets through. The socket watch gets every socket(2) and
// socketpair(2) outside the family allowlist (socketRules), which the
// harness records and refuses; what the allowlist allows never reaches it.
func watchCalls(uc *net.UnixConn, w watchSet) error {
	prog, err := watchProgram(w)
	if err != nil {
		return err
	}
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | filterFlagTsyncESRCH | filterFlagWaitKillableRecv)
	r, e := setFilter(prog, flags)
	if e == unix.EINVAL {
		// Before Linux 5.19 a signal can restart a notified call, which
		// at worst records one attempt twice.
		r, e = setFilter(prog, flags&^filterFlagWaitKillableRecv)
	}
	if e != 0 {
		return failf("seccomp watch: cannot install %s (seccomp user notification): %v", w.name(), e)
	}
	fd := int(r)
	defer unix.Close(fd)
	msg, _ := json.Marshal(watchMsg{Watch: true, FD: fd, watchSet: w})
	if _, err := uc.Write(msg); err != nil {
		return failf("seccomp watch: cannot hand %s to the harness: %v", w.name(), err)
	}
	return awaitAck(uc, w.name())
}

// name names the watches for the launcher's messages.
func (w watchSet) name() string {
	var names []string
	for _, n := range []struct {
		on   bool
		name string
	}{{w.Exec, "exec"}, {w.Connect, "connection"}, {w.Socket, "socket"}} {
		if n.on {
			names = append(names, n.name)
		}
	}
	if len(names) == 1 {
		return "the " + names[0] + " watch"
	}
	return "the " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " watches"
}

// watchProgram is the watch filter: SECCOMP_RET_USER_NOTIF for the native
// ABI's calls that the active watches need, ALLOW for the rest (the other
// filter refuses foreign ABIs).
func watchProgram(w watchSet) ([]unix.SockFilter, error) {
	if !w.any() {
		return nil, failf("seccomp watch: no watch to install")
	}
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const offArg4Lo, offArg4Hi = offArg0 + 32, offArg0 + 36
	const allow, notify, sock, pair = -1, -2, -3, -4 // jump targets, resolved by assemble
	prog := []insn{
		{code: ld, k: offArch},
		{code: jeq, k: arch, jf: allow},
		{code: ld, k: offNr},
	}
	if w.Exec {
		prog = append(prog, insn{code: jeq, k: unix.SYS_EXECVE, jt: notify}, insn{code: jeq, k: unix.SYS_EXECVEAT, jt: notify})
	}
	if w.Socket {
		// What the allowlist refuses (installSeccomp let it through).
		prog = append(prog, insn{code: jeq, k: unix.SYS_SOCKET, jt: sock}, insn{code: jeq, k: unix.SYS_SOCKETPAIR, jt: pair})
	}
	if w.Connect {
		// sendmsg and sendmmsg keep their addresses behind pointers: the
		// harness looks. sendto is notified only with an address.
		prog = append(prog,
			insn{code: jeq, k: unix.SYS_CONNECT, jt: notify},
			insn{code: jeq, k: unix.SYS_SENDMSG, jt: notify},
			insn{code: jeq, k: unix.SYS_SENDMMSG, jt: notify},
			insn{code: jeq, k: unix.SYS_SENDTO, jf: allow},
			insn{code: ld, k: offArg4Lo},
			insn{code: jeq, k: 0, jf: notify},
			insn{code: ld, k: offArg4Hi},
			insn{code: jeq, k: 0, jt: allow, jf: notify})
	}
	prog = append(prog, insn{code: ret, k: unix.SECCOMP_RET_ALLOW}) // none of the watched calls
	if w.Socket {
		prog = append(prog, socketRules(sock, pair, allow, notify)...)
	}
	prog = append(prog, insn{label: allow, code: ret, k: unix.SECCOMP_RET_ALLOW}, insn{label: notify, code: ret, k: unix.SECCOMP_RET_USER_NOTIF})
	return assemble(prog)
}
