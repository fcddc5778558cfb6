package sandbox

import (
	"encoding/json"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// execMsg is the one message on the exec control socket: the descriptor
// number of the seccomp listener that reports every execve(2) and
// execveat(2) of the command and its descendants. Like the connection
// watch, it is sent with write(2) and taken by the harness with
// pidfd_getfd from the sender the kernel names (SO_PASSCRED).
type execMsg struct {
	Exec bool `json:"exec_watch"`
	FD   int  `json:"fd"`
}

// ExecFD is the launcher's descriptor of the exec control socket when the
// policy asks for the exec watch: the extra file after the egress control
// socket, or the first when there is none.
func (p Policy) ExecFD() int {
	if p.Network != nil {
		return ControlFD + 1
	}
	return ControlFD
}

// openExecControl takes the exec control socket the harness passed.
func openExecControl(p Policy) (*net.UnixConn, error) {
	fd := p.ExecFD()
	f := os.NewFile(uintptr(fd), "exec-control")
	conn, err := net.FileConn(f)
	f.Close() // the duplicate is close-on-exec; the command never sees it
	if err != nil {
		return nil, failf("exec watch: fd %d is not the harness's exec control socket: %v", fd, err)
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		return nil, failf("exec watch: fd %d is not a UNIX socket", fd)
	}
	return uc, nil
}

// watchExecs installs a seccomp filter that hands every execve(2) and
// execveat(2) of the command's processes to the harness before the kernel
// acts on it, and names the filter's listener on uc. The harness counts
// what Case runs from these notifications (Case's own account of its
// commands is only a claim) and refuses a command the profile does not
// allow. Without the harness's acknowledgement the command does not start.
func watchExecs(uc *net.UnixConn) error {
	arch, err := auditArch()
	if err != nil {
		return err
	}
	prog := []unix.SockFilter{
		/* 0 */ {Code: ld, K: offArch},
		/* 1 */ {Code: jeq, K: arch, Jt: 1, Jf: 0},
		/* 2 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW}, // the other filter refuses foreign ABIs
		/* 3 */ {Code: ld, K: offNr},
		/* 4 */ {Code: jeq, K: unix.SYS_EXECVE, Jt: 2, Jf: 0},
		/* 5 */ {Code: jeq, K: unix.SYS_EXECVEAT, Jt: 1, Jf: 0},
		/* 6 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
		/* 7 */ {Code: ret, K: unix.SECCOMP_RET_USER_NOTIF},
	}
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | filterFlagTsyncESRCH | filterFlagWaitKillableRecv)
	r, e := setFilter(prog, flags)
	if e == unix.EINVAL {
		r, e = setFilter(prog, flags&^filterFlagWaitKillableRecv)
	}
	if e != 0 {
		return failf("exec watch: cannot install the exec watch (seccomp user notification): %v", e)
	}
	fd := int(r)
	defer unix.Close(fd)
	msg, _ := json.Marshal(execMsg{Exec: true, FD: fd})
	if _, err := uc.Write(msg); err != nil {
		return failf("exec watch: cannot hand the exec watch to the harness: %v", err)
	}
	return awaitAck(uc, "the exec watch")
}
