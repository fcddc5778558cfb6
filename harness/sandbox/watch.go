package sandbox

import (
	"encoding/json"
	"net"

	"golang.org/x/sys/unix"
)

// Seccomp filter flags missing from x/sys/unix's names.
const (
	filterFlagTsyncESRCH       = 1 << 4 // TSYNC together with NEW_LISTENER (Linux 5.7)
	filterFlagWaitKillableRecv = 1 << 5 // a received notification is not restarted by a signal (Linux 5.19)
)

// watchMsg is the second message on the control socket: the descriptor
// number of the seccomp listener that reports the command's connection
// attempts. It is sent with write(2), since sendmsg(2) is watched from
// then on; the harness takes the descriptor with pidfd_getfd, from the
// process the kernel names as the sender (SO_PASSCRED).
type watchMsg struct {
	Watch bool `json:"watch"`
	FD    int  `json:"fd"`
}

// watchConnects installs a seccomp filter that hands every connect(2),
// sendmsg(2) and sendmmsg(2), and every sendto(2) that names an address, to
// the harness before the kernel acts on it, and names the filter's listener
// on the control socket. The harness records each attempt that would leave
// the egress listeners, even the ones the namespace or Landlock would
// refuse without a packet, and answers it; the namespace and Landlock still
// decide everything it lets through. Without the harness's acknowledgement
// the command does not start.
func watchConnects(uc *net.UnixConn) error {
	arch, err := auditArch()
	if err != nil {
		return err
	}
	const offArg4Lo, offArg4Hi = offArg0 + 32, offArg0 + 36
	prog := []unix.SockFilter{
		/* 0 */ {Code: ld, K: offArch},
		/* 1 */ {Code: jeq, K: arch, Jt: 1, Jf: 0},
		/* 2 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW}, // the other filter refuses foreign ABIs
		/* 3 */ {Code: ld, K: offNr},
		/* 4 */ {Code: jeq, K: unix.SYS_CONNECT, Jt: 8, Jf: 0},
		// sendmsg and sendmmsg keep their addresses behind pointers: the harness looks.
		/* 5 */ {Code: jeq, K: unix.SYS_SENDMSG, Jt: 7, Jf: 0},
		/* 6 */ {Code: jeq, K: unix.SYS_SENDMMSG, Jt: 6, Jf: 0},
		/* 7 */ {Code: jeq, K: unix.SYS_SENDTO, Jt: 0, Jf: 4},
		/* 8 */ {Code: ld, K: offArg4Lo},
		/* 9 */ {Code: jeq, K: 0, Jt: 0, Jf: 3},
		/* 10 */ {Code: ld, K: offArg4Hi},
		/* 11 */ {Code: jeq, K: 0, Jt: 0, Jf: 1},
		/* 12 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
		/* 13 */ {Code: ret, K: unix.SECCOMP_RET_USER_NOTIF},
	}
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | filterFlagTsyncESRCH | filterFlagWaitKillableRecv)
	r, e := setFilter(prog, flags)
	if e == unix.EINVAL {
		// Before Linux 5.19 a signal can restart a notified call, which
		// at worst records one attempt twice.
		r, e = setFilter(prog, flags&^filterFlagWaitKillableRecv)
	}
	if e != 0 {
		return failf("network egress: cannot install the connection watch (seccomp user notification): %v", e)
	}
	fd := int(r)
	defer unix.Close(fd)
	msg, _ := json.Marshal(watchMsg{Watch: true, FD: fd})
	if _, err := uc.Write(msg); err != nil {
		return failf("network egress: cannot hand the connection watch to the harness: %v", err)
	}
	return awaitAck(uc, "the connection watch")
}
