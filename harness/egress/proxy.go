package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"
)

// proxyHeaderTimeout bounds how long the proxy waits for a request head.
const proxyHeaderTimeout = 30 * time.Second

// maxProxyHeader bounds a proxy request's head (request line and header
// fields): Case writes it, and http.ReadRequest alone reads a line of any
// length into memory. A longer head is refused with 431.
const maxProxyHeader = 32 << 10

// maxHostName is the longest host name DNS allows; a longer target is
// refused before it is matched or recorded.
const maxHostName = 253

// errHeaderTooLarge ends the read of a request head past maxProxyHeader.
var errHeaderTooLarge = errors.New("the request head is longer than 32 KiB")

// headLimit passes at most n bytes until lift is called: the head is read
// through it, and what follows (the tunnel's or the request's bytes) is
// not limited.
type headLimit struct {
	r io.Reader
	n int64
}

func (l *headLimit) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	return k, err
}

func (l *headLimit) lift() { l.n = math.MaxInt64 }

// proxy handles one connection to the in-namespace proxy: an HTTP CONNECT
// (any TCP, usually TLS) or an absolute-form plain HTTP request. The
// requested host and port are decided against the whole allowlist,
// wildcards included; one proxy connection reaches one endpoint.
func (s *session) proxy(c *net.TCPConn) {
	defer c.Close()
	if !s.f.reserveRecord() {
		refuse(c, http.StatusServiceUnavailable, fmt.Sprintf("the egress limit is reached (%s): network.jsonl holds %d records", LimitRecords, MaxRecords))
		return
	}
	a := s.newAttempt(c, ViaConnect)
	lim := &headLimit{r: c, n: maxProxyHeader}
	br := bufio.NewReaderSize(lim, maxHello)
	_ = c.SetReadDeadline(time.Now().Add(proxyHeaderTimeout))
	req, err := http.ReadRequest(br)
	_ = c.SetReadDeadline(time.Time{})
	// The parser does not always pass the limit's error on (a cut request
	// line reads as malformed): the limit itself says whether it was hit.
	tooLong := lim.n <= 0
	lim.lift()
	if err != nil && tooLong {
		refuse(c, http.StatusRequestHeaderFieldsTooLarge, errHeaderTooLarge.Error())
		s.finish(a, Denied, "not an HTTP proxy request: "+errHeaderTooLarge.Error())
		return
	}
	if err != nil {
		refuse(c, http.StatusBadRequest, "not an HTTP proxy request")
		s.finish(a, Denied, "not an HTTP proxy request: "+clipQuoted(err.Error()))
		return
	}
	host, port, err := proxyTarget(req)
	if req.Method != http.MethodConnect {
		a.rec.Via = ViaHTTPProxy
	}
	a.rec.Host, a.rec.Port = host, port
	if err != nil {
		refuse(c, http.StatusBadRequest, err.Error())
		s.finish(a, Denied, err.Error())
		return
	}
	rule, ok := s.plan.List.Match(host, uint16(port))
	if !ok {
		reason := fmt.Sprintf("no allowlist entry for %s", net.JoinHostPort(host, strconv.Itoa(port)))
		refuse(c, http.StatusForbidden, reason)
		s.finish(a, Denied, reason)
		return
	}
	if req.Method == http.MethodConnect {
		s.relay(c, br, a, rule, func(net.Conn) (int64, error) {
			_, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
			return 0, err
		})
		return
	}
	// Plain HTTP: the first request goes on in origin form; whatever follows
	// on this connection is relayed to the same endpoint.
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	s.relay(c, br, a, rule, func(up net.Conn) (int64, error) {
		cw := &countingWriter{w: up}
		err := req.Write(cw)
		return cw.n, err
	})
}

// proxyTarget is the host and port a proxy request names.
func proxyTarget(req *http.Request) (string, int, error) {
	hostport := req.Host
	defPort := "80"
	if req.Method != http.MethodConnect {
		if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
			return "", 0, fmt.Errorf("the proxy takes CONNECT and absolute http:// requests, not %s %s", req.Method, req.RequestURI)
		}
		hostport = req.URL.Host
	}
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		if req.Method == http.MethodConnect {
			return "", 0, fmt.Errorf("CONNECT needs HOST:PORT, not %s", clipQuoted(hostport))
		}
		h, p = hostport, defPort
	}
	if len(h) > maxHostName {
		return "", 0, fmt.Errorf("the target host is %d bytes long, more than a host name can be (%d): %s", len(h), maxHostName, clipQuoted(h))
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return h, 0, fmt.Errorf("bad port in %s", clipQuoted(hostport))
	}
	return h, n, nil
}

// clipQuoted is s quoted, its first 200 bytes only when it is longer: it
// goes into a record, and Case chose it.
func clipQuoted(s string) string {
	if len(s) <= 200 {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:200]) + fmt.Sprintf("… (%d bytes)", len(s))
}

func refuse(c net.Conn, code int, msg string) {
	body := "cto-harness egress: " + msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

type countingWriter struct {
	w net.Conn
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
