package egress

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"

	"github.com/cto-harness/cto-harness/harness/notify"
	"golang.org/x/sys/unix"
)

// Handoff is what the sandbox launcher sends over the control socket, with
// one listening socket per entry of Ports and then the proxy's, in that
// order, as SCM_RIGHTS.
type Handoff struct {
	Ports     []uint16 `json:"ports"`
	ProxyPort uint16   `json:"proxy_port"`
}

// Acknowledgements the harness sends back on the control socket.
const (
	AckOK     = 'Y'
	AckRefuse = 'N'
)

// maxHandoffFDs bounds the descriptors one handoff may carry.
const maxHandoffFDs = 1024

// Attach prepares the egress of one sandboxed command laid out as plan. It
// returns the launcher's end of a control socket (pass it as the child's
// first extra file, fd 3, and close it once the child started) and the
// session's connection watch. The launcher sends its listening sockets
// over the control socket; the harness checks them, answers AckOK, and
// serves them until the launcher exits and the socket closes. The
// connection watch answers the launcher's connect, sendto, sendmsg and
// sendmmsg calls: pass it as notify.Options.Connect of the same launch.
func (f *Forwarder) Attach(plan Plan) (*os.File, notify.Handler, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("egress: socketpair: %w", err)
	}
	parent := os.NewFile(uintptr(fds[0]), "egress-control")
	conn, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("egress: control socket: %w", err)
	}
	if err := unix.SetNonblock(fds[1], false); err != nil {
		conn.Close()
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("egress: control socket: %w", err)
	}
	s, err := f.newSession(plan)
	if err != nil {
		conn.Close()
		unix.Close(fds[1])
		return nil, nil, err
	}
	uc := conn.(*net.UnixConn)
	s.mu.Lock()
	s.control = uc
	s.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer s.stop()
		if err := s.receive(uc); err != nil {
			f.fail("%s: %v", plan.Command, err)
			return
		}
		// The launcher holds its end until it exits: EOF ends the session.
		buf := make([]byte, 1)
		for {
			if _, err := uc.Read(buf); err != nil {
				return
			}
		}
	}()
	return os.NewFile(uintptr(fds[1]), "egress-control-child"), s.answer, nil
}

// receive takes the launcher's listeners, checks each is a listening TCP
// socket on the port the plan expects, and starts serving them. A launcher
// that exits without sending (it failed earlier, and says so itself) is
// not an error here.
func (s *session) receive(uc *net.UnixConn) error {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*maxHandoffFDs))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil || (n == 0 && oobn == 0) {
		return nil
	}
	var fds []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			if got, rerr := unix.ParseUnixRights(&m); rerr == nil {
				fds = append(fds, got...)
			}
		}
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		unix.CloseOnExec(fd)
		files[i] = os.NewFile(uintptr(fd), "egress-listener")
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	refuse := func(format string, a ...any) error {
		closeAll()
		_, _ = uc.Write([]byte{AckRefuse})
		return fmt.Errorf("the launcher's network listeners are not usable: "+format, a...)
	}
	var h Handoff
	if err := json.Unmarshal(buf[:n], &h); err != nil {
		return refuse("malformed handoff: %v", err)
	}
	want := append(append([]uint16(nil), s.plan.Ports...), s.plan.ProxyPort)
	got := append(append([]uint16(nil), h.Ports...), h.ProxyPort)
	if !slices.Equal(want, got) || len(files) != len(want) {
		return refuse("expected ports %v, got %v with %d sockets", want, got, len(files))
	}
	var ls []net.Listener
	for i, f := range files {
		if err := checkListener(int(f.Fd()), want[i]); err != nil {
			for _, l := range ls {
				l.Close()
			}
			return refuse("socket %d: %v", i, err)
		}
		l, err := net.FileListener(f)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return refuse("socket %d: %v", i, err)
		}
		ls = append(ls, l)
	}
	closeAll()
	if _, err := uc.Write([]byte{AckOK}); err != nil {
		for _, l := range ls {
			l.Close()
		}
		return fmt.Errorf("cannot acknowledge the launcher's listeners: %w", err)
	}
	s.serve(ls[:len(ls)-1], ls[len(ls)-1])
	return nil
}

// checkListener proves fd is a listening TCP socket on port.
func checkListener(fd int, port uint16) error {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_STREAM {
		return fmt.Errorf("not a stream socket (%v)", err)
	}
	acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil || acc != 1 {
		return fmt.Errorf("not listening (%v)", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return err
	}
	var p int
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		p = a.Port
	case *unix.SockaddrInet6:
		p = a.Port
	default:
		return fmt.Errorf("not a TCP/IP socket")
	}
	if p != int(port) {
		return fmt.Errorf("listens on port %d, not %d", p, port)
	}
	return nil
}
