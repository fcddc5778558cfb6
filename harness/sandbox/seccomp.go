package sandbox

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// installSeccomp adds a small seccomp filter to every thread (TSYNC), so the
// command inherits it:
//
//   - socket(2) is allowed for an allowlist of families only: AF_INET and
//     AF_INET6 with SOCK_STREAM or SOCK_DGRAM, and AF_NETLINK with
//     NETLINK_ROUTE (interface and address queries). Every other family
//     fails with EACCES: AF_UNIX (Landlock below ABI 9 does not control
//     connect(2) on pathname UNIX sockets, and a root process that reaches
//     the D-Bus system bus or a container daemon's socket is outside every
//     other restriction), AF_VSOCK (not isolated by the network namespace:
//     it reaches the hypervisor and the host), AF_PACKET, AF_ALG, the other
//     netlink protocols (audit, kobject uevents, ...) and the rest.
//   - socketpair(2) is allowed for AF_UNIX SOCK_STREAM and SOCK_SEQPACKET
//     only. Such a pair is connected for good: connect(2) on either end
//     fails with EISCONN and sendto(2) with an address is refused, so it
//     can never reach a socket by path. A SOCK_DGRAM pair can (connect and
//     sendto re-address it), and the filter cannot see the address behind
//     the pointer, so it fails with EACCES.
//   - With the socket watch (watched), a socket(2) or socketpair(2) outside
//     these allowlists is let through by this filter instead: the watch
//     filter installed after it hands the call to the harness, which
//     records and refuses it (EACCES). The kernel runs every filter and
//     takes the strictest answer, and an ERRNO here would win over the
//     watch's notification, so the call would go unrecorded.
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
func installSeccomp(watched bool) error {
	prog, err := seccompProgram(watched)
	if err != nil {
		return err
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

// seccompProgram is installSeccomp's filter.
func seccompProgram(watched bool) ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const x32Bit = 0x40000000
	// Jump targets, resolved by assemble.
	const (
		allow = -(iota + 1)
		enosys
		eperm
		eacces
		sock
		pair
	)
	refuse := eacces
	if watched {
		refuse = allow // the watch filter notifies it; see installSeccomp
	}
	p := []insn{
		{code: ld, k: offArch},
		{code: jeq, k: arch, jf: enosys},
		{code: ld, k: offNr},
		{code: jge, k: x32Bit, jt: enosys},
		{code: jeq, k: unix.SYS_IO_URING_SETUP, jt: eperm},
		{code: jeq, k: unix.SYS_PTRACE, jt: eperm},
		{code: jeq, k: unix.SYS_PROCESS_VM_WRITEV, jt: eperm},
		{code: jeq, k: unix.SYS_PROCESS_VM_READV, jt: eperm},
		{code: jeq, k: unix.SYS_PIDFD_GETFD, jt: eperm},
		{code: jeq, k: unix.SYS_KEYCTL, jt: enosys},
		{code: jeq, k: unix.SYS_ADD_KEY, jt: enosys},
		{code: jeq, k: unix.SYS_REQUEST_KEY, jt: enosys},
		{code: jeq, k: unix.SYS_SOCKET, jt: sock},
		{code: jeq, k: unix.SYS_SOCKETPAIR, jt: pair},
		{code: ret, k: unix.SECCOMP_RET_ALLOW},
	}
	p = append(p, socketRules(sock, pair, allow, refuse)...)
	p = append(p,
		insn{label: allow, code: ret, k: unix.SECCOMP_RET_ALLOW},
		insn{label: enosys, code: ret, k: errnoRet(unix.ENOSYS)},
		insn{label: eperm, code: ret, k: errnoRet(unix.EPERM)},
		insn{label: eacces, code: ret, k: errnoRet(unix.EACCES)},
	)
	return assemble(p)
}

// socketRules is the socket family allowlist, shared by the filter that
// enforces it and the watch filter that notifies what it refuses: sock and
// pair label the checks of socket(2) and socketpair(2) (the caller jumps
// there with the system call number loaded), which end at allow or refuse.
// Both filters come from this one list, so what is allowed is exactly what
// is never notified.
func socketRules(sock, pair, allow, refuse int) []insn {
	const sockTypeMask = 0xf // the type without SOCK_NONBLOCK and SOCK_CLOEXEC
	const inet, netlink = -100, -101
	return []insn{
		{label: sock, code: ld, k: offArg0},
		{code: jeq, k: unix.AF_INET, jt: inet},
		{code: jeq, k: unix.AF_INET6, jt: inet},
		{code: jeq, k: unix.AF_NETLINK, jt: netlink, jf: refuse},

		{label: inet, code: ld, k: offArg0 + 8},
		{code: alu | unix.BPF_AND, k: sockTypeMask},
		{code: jeq, k: unix.SOCK_STREAM, jt: allow},
		{code: jeq, k: unix.SOCK_DGRAM, jt: allow, jf: refuse},

		{label: netlink, code: ld, k: offArg0 + 16},
		{code: jeq, k: unix.NETLINK_ROUTE, jt: allow, jf: refuse},

		{label: pair, code: ld, k: offArg0},
		{code: jeq, k: unix.AF_UNIX, jf: refuse},
		{code: ld, k: offArg0 + 8},
		{code: alu | unix.BPF_AND, k: sockTypeMask},
		{code: jeq, k: unix.SOCK_STREAM, jt: allow},
		{code: jeq, k: unix.SOCK_SEQPACKET, jt: allow, jf: refuse},
	}
}

func errnoRet(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }

// insn is one BPF instruction with symbolic jumps: jt and jf name the label
// (a negative constant) of a later instruction, or are 0 for the next one.
type insn struct {
	label  int
	code   uint16
	k      uint32
	jt, jf int
}

// assemble resolves the labels into BPF's forward offsets.
func assemble(p []insn) ([]unix.SockFilter, error) {
	at := map[int]int{}
	for i, in := range p {
		if in.label != 0 {
			at[in.label] = i
		}
	}
	out := make([]unix.SockFilter, len(p))
	for i, in := range p {
		var off [2]uint8
		for j, t := range []int{in.jt, in.jf} {
			if t == 0 {
				continue
			}
			to, ok := at[t]
			if !ok || to <= i || to-i-1 > 255 {
				return nil, failf("seccomp: bad jump from instruction %d to label %d", i, t)
			}
			off[j] = uint8(to - i - 1)
		}
		out[i] = unix.SockFilter{Code: in.code, K: in.k, Jt: off[0], Jf: off[1]}
	}
	return out, nil
}

// Classic BPF opcodes the filters use, and where struct seccomp_data keeps
// what they look at: nr at 0, arch at 4, args[i] at 16+8i (low half first
// on little-endian machines).
const (
	ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	ret = unix.BPF_RET | unix.BPF_K
	alu = unix.BPF_ALU | unix.BPF_K

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
