package fakecase

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probeTimeout bounds each network probe.
const probeTimeout = 5 * time.Second

// netProbes runs the probes of SPEC, "KIND TARGET" pairs separated by ";",
// and records each as an attempt (denied when it did not get through):
//
//	get URL            an HTTP GET with Go's default client (proxy variables
//	                   honoured, except Go never proxies loopback hosts)
//	proxyget URL       an HTTP GET forced through $HTTP_PROXY
//	connect HOST:PORT  an HTTP CONNECT through $HTTPS_PROXY
//	tls HOST:PORT@SNI  a TLS handshake to HOST:PORT naming SNI
//	dns IP:PORT        a DNS query over UDP to a resolver
//	conns N@HOST:PORT  N connections open at once, then an HTTP request on
//	                   each; denied when any of them got no answer
//	serve HOST:PORT    serve HTTP on HOST:PORT (port 0: any) inside the
//	                   sandbox and GET it, as a test suite's own server does
//	sockets N          call socket(AF_VSOCK) N times (the sandbox refuses
//	                   each; its socket watch records them)
//	execs N            run /bin/true N times without case.command events
//	                   (as many-procs does); not an attempt
func netProbes(spec string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		for _, p := range strings.Split(spec, ";") {
			kind, target, ok := strings.Cut(strings.TrimSpace(p), " ")
			if !ok {
				return fmt.Errorf("network probe %q: want KIND TARGET", p)
			}
			var err error
			switch kind {
			case "execs":
				n, cerr := strconv.Atoi(target)
				if cerr != nil {
					return fmt.Errorf("network probe %q: want a count", p)
				}
				c.runAll(n, false, "/bin/true")
				continue
			case "get":
				err = httpGet(target, nil)
			case "proxyget":
				err = httpGet(target, proxyFromVar("HTTP_PROXY"))
			case "connect":
				err = connectVia(os.Getenv("HTTPS_PROXY"), target)
			case "tls":
				err = tlsHello(target)
			case "dns":
				err = dnsQuery(target)
			case "dial":
				err = dial(target)
			case "serve":
				err = serveLoopback(target)
			case "dials":
				err = dials(target)
			case "sockets":
				err = vsockSockets(target)
			case "tfo":
				err = fastOpen(target)
			case "sendmsg":
				err = sendMsg(target)
			case "sendmmsg":
				err = sendMMsg(target)
			case "conns":
				err = manyConns(target)
			default:
				return fmt.Errorf("network probe %q: unknown kind %q", p, kind)
			}
			c.attempt("net-"+kind, target, err, nil)
		}
		return nil
	}
}

func proxyFromVar(name string) func(*http.Request) (*url.URL, error) {
	return func(*http.Request) (*url.URL, error) {
		v := os.Getenv(name)
		if v == "" {
			return nil, fmt.Errorf("%s is not set", name)
		}
		return url.Parse(v)
	}
}

func httpGet(u string, proxy func(*http.Request) (*url.URL, error)) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if proxy != nil {
		tr.Proxy = proxy
	}
	client := &http.Client{Transport: tr, Timeout: probeTimeout}
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP status %s", resp.Status)
	}
	return nil
}

func connectVia(proxy, target string) error {
	pu, err := url.Parse(proxy)
	if err != nil || pu.Host == "" {
		return fmt.Errorf("no usable proxy in HTTPS_PROXY (%q)", proxy)
	}
	conn, err := net.DialTimeout("tcp", pu.Host, probeTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy answered %s", resp.Status)
	}
	return nil
}

func tlsHello(spec string) error {
	addr, sni, ok := strings.Cut(spec, "@")
	if !ok {
		return fmt.Errorf("want HOST:PORT@SNI, got %q", spec)
	}
	d := &net.Dialer{Timeout: probeTimeout}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // the probe checks the path, not the peer
	if err != nil {
		return err
	}
	return conn.Close()
}

// dial opens a TCP connection to addr, no proxy involved, and closes it.
func dial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	return conn.Close()
}

// serveLoopback listens on addr, answers one GET of its own and checks the
// answer: what httptest does.
func serveLoopback(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "served inside the sandbox")
	}), ReadHeaderTimeout: probeTimeout}
	go srv.Serve(ln)
	defer srv.Close()
	c := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && string(b) != "served inside the sandbox" {
		err = fmt.Errorf("the loopback server answered %q", b)
	}
	return err
}

// dials dials N@HOST:PORT N times, one after the other; it reports the
// first error, or none when every dial worked.
func dials(spec string) error {
	n, addr, ok := strings.Cut(spec, "@")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 1 {
		return fmt.Errorf("want N@HOST:PORT, got %q", spec)
	}
	var first error
	for i := 0; i < count; i++ {
		if err := dial(addr); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// vsockSockets calls socket(AF_VSOCK) N times; it reports the first error,
// or none when a socket was made.
func vsockSockets(n string) error {
	count, err := strconv.Atoi(n)
	if err != nil || count < 1 {
		return fmt.Errorf("want a count, got %q", n)
	}
	var first error
	for i := 0; i < count; i++ {
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// fastOpen sends a request with TCP Fast Open, sendto(MSG_FASTOPEN) on an
// unconnected socket: a connect that is not a connect(2) call.
func fastOpen(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("want IPv4:PORT, got %q", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte("GET / HTTP/1.0\r\n\r\n"), unix.MSG_FASTOPEN, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
}

// sendMsg sends one datagram from an unconnected UDP socket with
// sendmsg(2), the address in the message header.
func sendMsg(addr string) error {
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	conn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, _, err = conn.WriteMsgUDP([]byte("probe"), nil, to)
	return err
}

// sendMMsg sends two datagrams in one sendmmsg(2) call from an unconnected
// UDP socket: the first to the namespace's loopback, the second to addr.
func sendMMsg(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("want IPv4:PORT, got %q", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	sockaddr := func(a [4]byte, port uint16) []byte {
		b := make([]byte, unix.SizeofSockaddrInet4)
		binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:4], port)
		copy(b[4:8], a[:])
		return b
	}
	names := [][]byte{sockaddr([4]byte{127, 0, 0, 1}, 5353), sockaddr(ap.Addr().As4(), ap.Port())}
	payload := []byte("probe")
	iov := unix.Iovec{Base: &payload[0]}
	iov.SetLen(len(payload))
	msgs := make([]unix.Mmsghdr, len(names))
	for i, n := range names {
		msgs[i].Hdr.Name, msgs[i].Hdr.Namelen = &n[0], uint32(len(n))
		msgs[i].Hdr.Iov = &iov
		msgs[i].Hdr.SetIovlen(1)
	}
	_, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), 0, 0, 0)
	runtime.KeepAlive(names)
	runtime.KeepAlive(payload)
	if e != 0 {
		return e
	}
	return nil
}

// dnsQuery asks resolver for example.com's A record.
func dnsQuery(resolver string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", resolver)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	q := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1}
	if _, err := conn.Write(q); err != nil {
		return err
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if n < 12 || buf[0] != 0x12 || buf[1] != 0x34 {
		return errors.New("malformed DNS answer")
	}
	return nil
}

// manyConns opens N connections to addr at once, and only then sends an
// HTTP request on each, so that all N are open together.
func manyConns(spec string) error {
	ns, addr, ok := strings.Cut(spec, "@")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 || n > 1000 {
		return fmt.Errorf("want N@HOST:PORT with 1 <= N <= 1000, got %q", spec)
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, probeTimeout)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond) // let the forwarder take them all
	failed := 0
	for _, c := range conns {
		_ = c.SetDeadline(time.Now().Add(probeTimeout))
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			failed++
			continue
		}
		resp.Body.Close()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d connections got no answer", failed, n)
	}
	return nil
}
