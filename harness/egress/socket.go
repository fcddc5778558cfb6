package egress

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/notify"
	"golang.org/x/sys/unix"
)

// ViaSocket marks a socket(2) or socketpair(2) the sandbox's family
// allowlist refuses (AF_VSOCK, AF_PACKET, netlink other than route, a UNIX
// datagram socket, ...): the socket watch saw it and refused it, so no
// socket of that kind ever existed.
const ViaSocket = "socket"

// RefuseSockets is the socket watch of one launch of cmd
// (notify.Options.Socket): it refuses every call it is handed (EACCES) and
// records each refusal that reached its caller in network.jsonl, under the
// same MaxRecords as every other record. The sandbox hands it only what
// the allowlist refuses, so it never has a call to let through.
func (f *Forwarder) RefuseSockets(cmd Command) notify.Handler {
	return func(c *notify.Call) {
		n := &c.Notif
		comm := threadComm(int(n.Pid)) // before the answer: the caller may be gone after
		if !c.Answer(unix.EACCES) || !f.reserveRecord() {
			return // the caller is gone, or the log is full
		}
		now := f.o.Clock()
		rec := socketRecord(cmd, n, comm)
		rec.Time = now.UTC()
		f.finish(&attempt{start: now, rec: rec}, Denied, rec.Reason)
	}
}

// socketRecord describes one refused call from its arguments, which are
// plain numbers: nothing is read from the caller's memory.
func socketRecord(cmd Command, n *notify.Notif, comm string) ctoharness.NetworkRecord {
	call := "socket"
	if n.Nr == unix.SYS_SOCKETPAIR {
		call = "socketpair"
	}
	family, typ, proto := int(int32(n.Args[0])), int(int32(n.Args[1])), int(int32(n.Args[2]))
	fam, ty := familyName(family), typeName(typ)
	p := ProtoOther
	if family == unix.AF_INET || family == unix.AF_INET6 {
		p = protoName(proto)
	}
	return ctoharness.NetworkRecord{Command: string(cmd), Via: ViaSocket, Protocol: p,
		Family: fam, SocketType: ty, SocketProtocol: proto, Pid: int(n.Pid), Comm: comm,
		Reason: fmt.Sprintf("%s(%s, %s, %d) is refused: the sandbox allows TCP and UDP sockets, netlink route and UNIX stream or seqpacket socketpairs only", call, fam, ty, proto)}
}

// threadComm is the caller's command name, "" when it cannot be read.
func threadComm(tid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// familyName is AF_NAME for the families Linux knows, AF_<number> for others.
func familyName(f int) string {
	names := map[int]string{unix.AF_UNSPEC: "AF_UNSPEC", unix.AF_UNIX: "AF_UNIX", unix.AF_INET: "AF_INET", unix.AF_INET6: "AF_INET6",
		unix.AF_NETLINK: "AF_NETLINK", unix.AF_PACKET: "AF_PACKET", unix.AF_VSOCK: "AF_VSOCK", unix.AF_ALG: "AF_ALG",
		unix.AF_BLUETOOTH: "AF_BLUETOOTH", unix.AF_CAN: "AF_CAN", unix.AF_XDP: "AF_XDP", unix.AF_KEY: "AF_KEY",
		unix.AF_TIPC: "AF_TIPC", unix.AF_RDS: "AF_RDS", unix.AF_SMC: "AF_SMC", unix.AF_QIPCRTR: "AF_QIPCRTR",
		unix.AF_APPLETALK: "AF_APPLETALK", unix.AF_AX25: "AF_AX25", unix.AF_X25: "AF_X25", unix.AF_PPPOX: "AF_PPPOX",
		unix.AF_LLC: "AF_LLC", unix.AF_IB: "AF_IB", unix.AF_MPLS: "AF_MPLS", unix.AF_NFC: "AF_NFC", unix.AF_KCM: "AF_KCM"}
	if n, ok := names[f]; ok {
		return n
	}
	return "AF_" + strconv.Itoa(f)
}

// typeName is the socket type without its flags, with the flags after it
// ("SOCK_DGRAM|SOCK_CLOEXEC").
func typeName(t int) string {
	names := map[int]string{unix.SOCK_STREAM: "SOCK_STREAM", unix.SOCK_DGRAM: "SOCK_DGRAM", unix.SOCK_RAW: "SOCK_RAW",
		unix.SOCK_RDM: "SOCK_RDM", unix.SOCK_SEQPACKET: "SOCK_SEQPACKET", unix.SOCK_DCCP: "SOCK_DCCP", unix.SOCK_PACKET: "SOCK_PACKET"}
	s, ok := names[t&0xf]
	if !ok {
		s = "SOCK_" + strconv.Itoa(t&0xf)
	}
	if t&unix.SOCK_NONBLOCK != 0 {
		s += "|SOCK_NONBLOCK"
	}
	if t&unix.SOCK_CLOEXEC != 0 {
		s += "|SOCK_CLOEXEC"
	}
	if rest := t &^ (0xf | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC); rest != 0 {
		s += "|" + strconv.Itoa(rest)
	}
	return s
}
