package sandbox

import (
	"encoding/json"
	"net"
	"runtime"
	"time"
	"unsafe"

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
// the harness
// before the kernel acts on it, and passes the filter's listener over the control socket. The
// harness records each attempt that would leave the egress listeners, even
// the ones the namespace or Landlock would refuse without a packet, and
// answers it; the namespace and Landlock still decide everything it lets
// through. Without the harness's acknowledgement the command does not start.
func watchConnects(uc *net.UnixConn) error {
	arch, ok := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if !ok {
		return failf("network egress: no connection watch for %s", runtime.GOARCH)
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
		// struct seccomp_data: nr at 0, arch at 4, args[i] at 16+8i.
		offNr, offArch, offArg4Lo, offArg4Hi = 0, 4, 48, 52
	)
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
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | filterFlagTsyncESRCH | filterFlagWaitKillableRecv)
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if e == unix.EINVAL {
		// Before Linux 5.19 a signal can restart a notified call, which
		// at worst records one attempt twice.
		flags &^= filterFlagWaitKillableRecv
		r, _, e = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	}
	runtime.KeepAlive(prog)
	if e != 0 {
		return failf("network egress: cannot install the connection watch (seccomp user notification): %v", e)
	}
	fd := int(r)
	defer unix.Close(fd)
	msg, _ := json.Marshal(watchMsg{Watch: true, FD: fd})
	if _, err := uc.Write(msg); err != nil {
		return failf("network egress: cannot hand the connection watch to the harness: %v", err)
	}
	_ = uc.SetReadDeadline(time.Now().Add(ackTimeout))
	defer uc.SetReadDeadline(time.Time{})
	ack := make([]byte, 1)
	if k, err := uc.Read(ack); err != nil || k != 1 || ack[0] != 'Y' {
		return failf("network egress: the harness did not take the connection watch (%q, %v)", ack[:k], err)
	}
	return nil
}
