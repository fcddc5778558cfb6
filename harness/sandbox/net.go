package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// ControlFD is the launcher's descriptor of the egress control socket: the
// harness passes it as the first extra file.
const ControlFD = 3

// ackTimeout bounds how long the launcher waits for the harness to take its
// listeners.
const ackTimeout = 30 * time.Second

// Network is the egress layout the launcher builds inside the command's
// otherwise empty network namespace (whose loopback interface is up either
// way), while it still has the privileges to: the extra local addresses, one listener per
// port on every local address plus the proxy's on 127.0.0.1, all handed to
// the harness over the control socket, and a hosts file over /etc/hosts.
// The command may connect to them, and bind any other port (netRules).
type Network struct {
	Ports     []uint16 `json:"ports"`
	ProxyPort uint16   `json:"proxy_port"`
	// Addrs are addresses added to lo (allowed IP literals outside 127/8).
	Addrs []string `json:"addrs,omitempty"`
	// HostsFile is bind-mounted read-only over /etc/hosts.
	HostsFile string `json:"hosts_file"`
}

// ConnectPorts are the TCP ports the command may connect to.
func (n *Network) ConnectPorts() []uint16 {
	if n == nil {
		return nil
	}
	return append(append([]uint16(nil), n.Ports...), n.ProxyPort)
}

// handoff is the message sent with the listeners (egress.Handoff).
type handoff struct {
	Ports     []uint16 `json:"ports"`
	ProxyPort uint16   `json:"proxy_port"`
}

// setupNetwork builds n in the launcher's namespace and hands the listeners
// to the harness. The returned control socket must stay open until the
// launcher exits: its closing tells the harness the namespace is gone.
func setupNetwork(p Policy) (*net.UnixConn, error) {
	n := p.Network
	if p.DenyNetwork {
		// The command's own loopback: test servers bind and connect on it;
		// nothing on it leaves the namespace.
		if err := loopbackUp(); err != nil {
			return nil, err
		}
	}
	if n == nil {
		return nil, nil
	}
	if !p.DenyNetwork {
		return nil, failf("network egress needs the empty network namespace (deny_network)")
	}
	ctl := os.NewFile(ControlFD, "egress-control")
	conn, err := net.FileConn(ctl)
	ctl.Close() // the duplicate is close-on-exec; the command never sees it
	if err != nil {
		return nil, failf("network egress: fd %d is not the harness's control socket: %v", ControlFD, err)
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		return nil, failf("network egress: fd %d is not a UNIX socket", ControlFD)
	}
	fail := func(err error) (*net.UnixConn, error) {
		uc.Close()
		return nil, err
	}
	for _, s := range n.Addrs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fail(failf("network egress: bad address %q", s))
		}
		if err := addLoopbackAddr(a); err != nil {
			return fail(err)
		}
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var lc net.ListenConfig
	addrs := make([]string, 0, len(n.Ports)+1)
	for _, port := range n.Ports {
		addrs = append(addrs, ":"+strconv.Itoa(int(port)))
	}
	addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(n.ProxyPort))))
	for _, a := range addrs {
		l, err := lc.Listen(context.Background(), "tcp", a)
		if err != nil {
			return fail(failf("network egress: cannot listen on %s inside the namespace: %v", a, err))
		}
		f, err := l.(*net.TCPListener).File()
		l.Close()
		if err != nil {
			return fail(failf("network egress: listener %s: %v", a, err))
		}
		files = append(files, f)
	}
	msg, _ := json.Marshal(handoff{Ports: n.Ports, ProxyPort: n.ProxyPort})
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if _, _, err := uc.WriteMsgUnix(msg, unix.UnixRights(fds...), nil); err != nil {
		return fail(failf("network egress: cannot hand the listeners to the harness: %v", err))
	}
	if err := awaitAck(uc, "the network listeners"); err != nil {
		return fail(err)
	}
	if err := MountHosts(n.HostsFile, "/etc/hosts"); err != nil {
		return fail(err)
	}
	return uc, nil
}

// awaitAck waits for the harness to confirm it took what over the control
// socket.
func awaitAck(uc *net.UnixConn, what string) error {
	_ = uc.SetReadDeadline(time.Now().Add(ackTimeout))
	defer uc.SetReadDeadline(time.Time{})
	ack := make([]byte, 1)
	if k, err := uc.Read(ack); err != nil || k != 1 || ack[0] != 'Y' {
		return failf("the harness did not take %s (%q, %v)", what, ack[:k], err)
	}
	return nil
}

// MountHosts bind-mounts src read-only over target (an /etc/hosts), in the
// launcher's private mount namespace. It is separate so that it can be
// applied onto any view of /etc the launcher builds.
func MountHosts(src, target string) error {
	if src == "" {
		return failf("network egress: no hosts file")
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return failf("network egress: cannot bind-mount %s over %s: %v", src, target, err)
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return failf("network egress: cannot make %s read-only: %v", target, err)
	}
	return nil
}

// loopbackUp brings lo up (it starts down in a new network namespace), so
// 127.0.0.0/8 and ::1 work inside the namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return failf("loopback: socket: %v", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return failf("loopback: %v", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return failf("loopback: cannot read the flags of lo: %v", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return failf("loopback: cannot bring lo up: %v", err)
	}
	return nil
}

// addLoopbackAddr adds a (host-length prefix) to lo with an RTM_NEWADDR
// netlink request, so a listener on all addresses also answers for it.
func addLoopbackAddr(a netip.Addr) error {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return failf("network egress: no lo: %v", err)
	}
	fam, bits := unix.AF_INET, 32
	if a.Is6() && !a.Is4In6() {
		fam, bits = unix.AF_INET6, 128
	}
	raw := a.Unmap().AsSlice()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return failf("network egress: netlink: %v", err)
	}
	defer unix.Close(fd)
	attr := func(typ uint16, data []byte) []byte {
		l := unix.SizeofRtAttr + len(data)
		b := make([]byte, (l+3)&^3)
		*(*unix.RtAttr)(unsafe.Pointer(&b[0])) = unix.RtAttr{Len: uint16(l), Type: typ}
		copy(b[unix.SizeofRtAttr:], data)
		return b
	}
	body := make([]byte, unix.SizeofIfAddrmsg)
	*(*unix.IfAddrmsg)(unsafe.Pointer(&body[0])) = unix.IfAddrmsg{Family: uint8(fam), Prefixlen: uint8(bits),
		Scope: unix.RT_SCOPE_HOST, Index: uint32(lo.Index)}
	body = append(body, attr(unix.IFA_LOCAL, raw)...)
	body = append(body, attr(unix.IFA_ADDRESS, raw)...)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	*(*unix.NlMsghdr)(unsafe.Pointer(&msg[0])) = unix.NlMsghdr{Len: uint32(unix.SizeofNlMsghdr + len(body)),
		Type: unix.RTM_NEWADDR, Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL, Seq: 1}
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return failf("network egress: cannot add %s to lo: %v", a, err)
	}
	buf := make([]byte, 4096)
	k, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return failf("network egress: cannot add %s to lo: %v", a, err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:k])
	if err != nil || len(msgs) == 0 || msgs[0].Header.Type != unix.NLMSG_ERROR || len(msgs[0].Data) < 4 {
		return failf("network egress: cannot add %s to lo: unexpected netlink answer", a)
	}
	if e := int32(*(*int32)(unsafe.Pointer(&msgs[0].Data[0]))); e != 0 {
		return failf("network egress: cannot add %s to lo: %v", a, unix.Errno(-e))
	}
	return nil
}

// netRules are the Landlock rules of the command's TCP sockets. Landlock
// rules name ports, not addresses, so they cannot tell loopback from the
// outside; the namespace does that: it holds only lo (with the egress
// listeners on it), so every connect stays inside it, and the connection
// watch records and refuses what would leave. Landlock therefore only
// handles bind, and only when there are egress listeners, and allows it on
// every port except theirs: the command's own servers (httptest, a test
// database) work, but none can take a listener's port. That is one rule per
// port (Landlock has no ranges), 0.1 to 0.3 s per launch, paid only with an
// allowlist.
func netRules(p Policy) []landlock.Rule {
	taken := map[uint16]bool{}
	for _, port := range p.Network.ConnectPorts() {
		taken[port] = true
	}
	rules := make([]landlock.Rule, 0, 1<<16)
	for port := 0; port < 1<<16; port++ {
		if !taken[uint16(port)] {
			rules = append(rules, landlock.BindTCP(uint16(port)))
		}
	}
	return rules
}

func (n *Network) validate(denyNetwork bool) error {
	if n == nil {
		return nil
	}
	if !denyNetwork {
		return fmt.Errorf("sandbox: a network egress layout needs deny_network")
	}
	if !filepath.IsAbs(n.HostsFile) || filepath.Clean(n.HostsFile) != n.HostsFile {
		return fmt.Errorf("sandbox: hosts file %q must be absolute and clean", n.HostsFile)
	}
	if n.ProxyPort == 0 {
		return fmt.Errorf("sandbox: the egress proxy needs a port")
	}
	return nil
}

// closeControl closes the egress control socket when the launcher is done.
func closeControl(c *net.UnixConn) {
	if c != nil {
		c.Close()
	}
}

// TryNetwork builds p, with its network layout, in a throwaway launcher that
// runs nothing: the listeners are made and handed over through ctl (the
// control socket's launcher end), the watch filter is installed and its
// listener handed over through watch (the watch control socket's launcher
// end), the hosts file is mounted and every other restriction applied. Both
// files are closed here. A layout that cannot be built is found this way
// before the command itself is started.
func TryNetwork(ctx context.Context, self string, p Policy, ctl, watch *os.File) error {
	defer ctl.Close()
	defer watch.Close()
	if p.Network == nil {
		return fmt.Errorf("sandbox: no network layout to try")
	}
	pf, err := policyFile(p)
	if err != nil {
		return err
	}
	defer pf.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, Subcommand, "--probe", policyFDFlag+strconv.Itoa(p.PolicyFD()))
	cmd.SysProcAttr = sysProcAttr(p.DenyNetwork)
	cmd.ExtraFiles = []*os.File{ctl, watch, pf}
	cmd.Env = []string{}
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Start()
	ctl.Close()
	watch.Close()
	pf.Close()
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		if line, ok := markerLine(stderr.String()); ok {
			return fmt.Errorf("%s", strings.TrimSpace(strings.TrimPrefix(line, StderrPrefix)))
		}
		return fmt.Errorf("the network trial launch failed: %v: %s", err, firstLine(stderr.String()))
	}
	return nil
}
