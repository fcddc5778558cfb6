package sandbox

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// installSeccomp adds a small seccomp filter to every thread (TSYNC), so the
// command inherits it:
//
//   - socket(AF_UNIX, ...) fails with EACCES. Landlock below ABI 9 does not
//     control connect(2) on pathname UNIX sockets, and a root process that
//     reaches the D-Bus system bus or a container daemon's socket is outside
//     every other restriction. socketpair(2) stays allowed.
//   - socket(AF_VSOCK, ...) fails with EACCES: vsock is not isolated by the
//     network namespace and reaches the hypervisor and the host.
//   - keyctl, add_key and request_key fail with ENOSYS (as on a kernel
//     without keyrings): the user keyring is the uid's, shared with the
//     host's processes of that uid, whatever the namespaces.
//   - io_uring_setup fails with EPERM: io_uring performs socket and file
//     operations that a syscall filter never sees.
//   - ptrace, process_vm_writev, process_vm_readv and pidfd_getfd fail
//     with EPERM: every process in the sandbox has the same uid and
//     Landlock domain, so code Case wrote, run by the verification
//     command, could otherwise rewrite the shell running the rest of that
//     command (Landlock already refuses writes to /proc/PID/mem).
//   - system calls of another ABI (i386, x32) fail with ENOSYS, so the
//     filter cannot be bypassed through a second syscall table.
func installSeccomp() error {
	arch, err := auditArch()
	if err != nil {
		return err
	}
	const x32Bit = 0x40000000
	errno := func(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	prog := []unix.SockFilter{
		/* 0 */ {Code: ld, K: offArch},
		/* 1 */ {Code: jeq, K: arch, Jt: 1, Jf: 0},
		/* 2 */ {Code: ret, K: errno(unix.ENOSYS)},
		/* 3 */ {Code: ld, K: offNr},
		/* 4 */ {Code: jge, K: x32Bit, Jt: 0, Jf: 1},
		/* 5 */ {Code: ret, K: errno(unix.ENOSYS)},
		/* 6 */ {Code: jeq, K: unix.SYS_IO_URING_SETUP, Jt: 4, Jf: 0},
		/* 7 */ {Code: jeq, K: unix.SYS_PTRACE, Jt: 3, Jf: 0},
		/* 8 */ {Code: jeq, K: unix.SYS_PROCESS_VM_WRITEV, Jt: 2, Jf: 0},
		/* 9 */ {Code: jeq, K: unix.SYS_PROCESS_VM_READV, Jt: 1, Jf: 0},
		/* 10 */ {Code: jeq, K: unix.SYS_PIDFD_GETFD, Jt: 0, Jf: 1},
		/* 11 */ {Code: ret, K: errno(unix.EPERM)},
		/* 12 */ {Code: jeq, K: unix.SYS_KEYCTL, Jt: 2, Jf: 0},
		/* 13 */ {Code: jeq, K: unix.SYS_ADD_KEY, Jt: 1, Jf: 0},
		/* 14 */ {Code: jeq, K: unix.SYS_REQUEST_KEY, Jt: 0, Jf: 1},
		/* 15 */ {Code: ret, K: errno(unix.ENOSYS)},
		/* 16 */ {Code: jeq, K: unix.SYS_SOCKET, Jt: 0, Jf: 4},
		/* 17 */ {Code: ld, K: offArg0},
		/* 18 */ {Code: jeq, K: unix.AF_UNIX, Jt: 1, Jf: 0},
		/* 19 */ {Code: jeq, K: unix.AF_VSOCK, Jt: 0, Jf: 1},
		/* 20 */ {Code: ret, K: errno(unix.EACCES)},
		/* 21 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
	r, e := setFilter(prog, unix.SECCOMP_FILTER_FLAG_TSYNC)
	if e != 0 {
		return failf("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %v", e)
	}
	if r != 0 {
		return failf("seccomp: thread %d could not be synchronized", r)
	}
	return nil
}

// Classic BPF opcodes the filters use, and where struct seccomp_data keeps
// what they look at: nr at 0, arch at 4, args[i] at 16+8i (low half first
// on little-endian machines).
const (
	ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	ret = unix.BPF_RET | unix.BPF_K

	offNr, offArch, offArg0 = 0, 4, 16
)

// auditArch is this build's AUDIT_ARCH, which every filter checks first.
func auditArch() (uint32, error) {
	arch, ok := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if !ok {
		return 0, failf("no seccomp filter for %s", runtime.GOARCH)
	}
	return arch, nil
}

// setFilter installs prog with flags; it returns seccomp(2)'s result.
func setFilter(prog []unix.SockFilter, flags uintptr) (uintptr, unix.Errno) {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	return r, e
}
