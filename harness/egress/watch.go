package egress

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/notify"
	"golang.org/x/sys/unix"
)

// ViaSyscall marks an attempt seen at the system call and refused there,
// before any packet: a connection or a datagram to an address outside the
// namespace, or a connection to a port of an allowed host that no egress
// listener serves. The namespace's own loopback, on any port, is not
// recorded: it never leaves the namespace.
const ViaSyscall = "syscall"

// Protocols recorded for an attempt.
const (
	ProtoTCP   = "tcp"
	ProtoUDP   = "udp"
	ProtoICMP  = "icmp"
	ProtoOther = "other"
)

// answer is the connection watch's handler (notify.Options.Connect): it
// decides one notified call, answers it, and records a refusal once the
// answer reached the caller.
func (s *session) answer(c *notify.Call) {
	a, errno := s.judge(c)
	if !c.Answer(errno) {
		return // the caller is gone: the call never completed
	}
	if a != nil && s.f.reserveRecord() {
		s.finish(a, Denied, a.rec.Reason)
	}
}

// judge reads what the call asks for. It returns 0 (let the kernel go on:
// not an outside address, or something the egress listeners serve, which
// the forwarder records) or the errno the caller gets, with the attempt to
// record. The kernel's own rules (the namespace with only its loopback,
// Landlock's bind rules) stay in force for everything let through, so a caller that
// changes its arguments after this look gains nothing.
func (s *session) judge(c *notify.Call) (*attempt, unix.Errno) {
	n := &c.Notif
	pid := int(n.Pid)
	dsts := callAddresses(pid, n)
	if len(dsts) == 0 {
		return nil, 0 // no IP address: a connected socket's send, UNIX, netlink, AF_UNSPEC, a bad pointer
	}
	typ, proto, connected, ok := peekSocket(pid, int(int32(n.Args[0])))
	if !ok || !c.Valid() {
		return nil, 0
	}
	for _, dst := range dsts {
		if a, errno := s.refusal(n.Nr, dst, typ, proto, connected); errno != 0 {
			return a, errno
		}
	}
	return nil, 0
}

// maxBatch is the most messages one sendmmsg(2) sends (UIO_MAXIOV).
const maxBatch = 1024

// mmsghdrSize is sizeof(struct mmsghdr) on 64-bit Linux: a struct msghdr
// (56 bytes) and msg_len, padded.
const mmsghdrSize = 64

// callAddresses reads the IP addresses a notified call names: one for
// connect, sendto and sendmsg, one per message for sendmmsg. An address the
// caller's memory does not hold is left out: the kernel reads the same
// bytes and fails the call.
func callAddresses(pid int, n *notify.Notif) []netip.AddrPort {
	type name struct{ ptr, size uint64 }
	var names []name
	switch n.Nr {
	case unix.SYS_CONNECT:
		names = []name{{n.Args[1], n.Args[2]}}
	case unix.SYS_SENDTO:
		names = []name{{n.Args[4], n.Args[5]}}
	case unix.SYS_SENDMSG, unix.SYS_SENDMMSG:
		count, stride := uint64(1), uint64(0)
		if n.Nr == unix.SYS_SENDMMSG {
			count, stride = min(n.Args[2], maxBatch), mmsghdrSize
		}
		if count == 0 {
			return nil
		}
		// struct msghdr opens with msg_name and msg_namelen.
		hdrs := make([]byte, (count-1)*stride+12)
		if !readMem(pid, n.Args[1], hdrs) {
			return nil
		}
		for i := uint64(0); i < count; i++ {
			h := hdrs[i*stride:]
			if ptr := binary.NativeEndian.Uint64(h[0:8]); ptr != 0 {
				names = append(names, name{ptr, uint64(binary.NativeEndian.Uint32(h[8:12]))})
			}
		}
	}
	var out []netip.AddrPort
	for _, nm := range names {
		raw := make([]byte, min(nm.size, unix.SizeofSockaddrAny))
		if len(raw) < 2 || !readMem(pid, nm.ptr, raw) {
			continue
		}
		if dst, ok := sockaddrPort(raw); ok {
			out = append(out, dst)
		}
	}
	return out
}

// refusal decides one address of a call on a socket of type typ.
func (s *session) refusal(nr int32, dst netip.AddrPort, typ, proto int, connected bool) (*attempt, unix.Errno) {
	addr, port := dst.Addr().Unmap(), dst.Port()
	local := addr.IsLoopback() || addr.IsUnspecified() || slices.Contains(s.plan.Addrs, addr)
	var errno unix.Errno
	var reason string
	switch {
	case typ == unix.SOCK_STREAM:
		if connected && nr != unix.SYS_CONNECT {
			return nil, 0 // the address is ignored on a connected stream
		}
		// An allowed name's address or an allowed IP stands for an
		// outside host: only its listed ports are served. Any other local
		// address, on any port, stays in the namespace: the command's own
		// loopback servers, or an egress listener, which records what it
		// receives.
		if !local {
			errno, reason = unix.ENETUNREACH, fmt.Sprintf("%s is outside the sandbox's network: an allowed name is reached by its name, an allowed address only when it is listed itself", addr)
		} else if s.plan.standsForOutside(addr) && !slices.Contains(s.plan.ConnectPorts(), port) {
			errno, reason = unix.EACCES, fmt.Sprintf("no egress listener serves port %d of %s: only the ports of allowed endpoints are reachable", port, s.plan.target(addr))
		}
	case !local:
		errno = unix.ENETUNREACH
		reason = fmt.Sprintf("%s to %s leaves the sandbox's network: only TCP to allowed endpoints goes out", protoName(proto), addr)
		if port == 53 {
			reason += " (a DNS query: allowed names are resolved by the sandbox's hosts file)"
		}
	}
	if errno == 0 {
		return nil, 0
	}
	now := s.f.o.Clock()
	return &attempt{start: now, rec: ctoharness.NetworkRecord{Time: now.UTC(), Command: string(s.plan.Command), Via: ViaSyscall,
		Protocol: protoName(proto), Host: s.plan.target(addr), Port: int(port), Reason: reason}}, errno
}

// readMem fills buf from the caller's memory at addr.
func readMem(pid int, addr uint64, buf []byte) bool {
	k, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}, 0)
	return err == nil && k == len(buf)
}

// sockaddrPort decodes an AF_INET or AF_INET6 socket address.
func sockaddrPort(raw []byte) (netip.AddrPort, bool) {
	switch binary.NativeEndian.Uint16(raw) {
	case unix.AF_INET:
		if len(raw) < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(raw[4:8])), binary.BigEndian.Uint16(raw[2:4])), true
	case unix.AF_INET6:
		if len(raw) < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(raw[8:24])), binary.BigEndian.Uint16(raw[2:4])), true
	}
	return netip.AddrPort{}, false
}

// peekSocket looks at the caller's descriptor through a duplicate: its type,
// protocol and whether it is connected.
func peekSocket(tid, fd int) (typ, proto int, connected, ok bool) {
	dup, err := notify.TakeFD(tid, fd)
	if err != nil {
		return 0, 0, false, false
	}
	defer unix.Close(dup)
	if typ, err = unix.GetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_TYPE); err != nil {
		return 0, 0, false, false
	}
	proto, _ = unix.GetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	_, perr := unix.Getpeername(dup)
	return typ, proto, perr == nil, true
}

func protoName(p int) string {
	switch p {
	case unix.IPPROTO_TCP, unix.IPPROTO_MPTCP:
		return ProtoTCP
	case unix.IPPROTO_UDP, unix.IPPROTO_UDPLITE:
		return ProtoUDP
	case unix.IPPROTO_ICMP, unix.IPPROTO_ICMPV6:
		return ProtoICMP
	}
	return ProtoOther
}
