package egress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// proxyHeaderTimeout bounds how long the proxy waits for a request head.
const proxyHeaderTimeout = 30 * time.Second

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
	br := bufio.NewReaderSize(c, maxHello)
	_ = c.SetReadDeadline(time.Now().Add(proxyHeaderTimeout))
	req, err := http.ReadRequest(br)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		s.finish(a, Denied, "not an HTTP proxy request: "+err.Error())
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
			return "", 0, fmt.Errorf("CONNECT needs HOST:PORT, not %q", hostport)
		}
		h, p = hostport, defPort
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return h, 0, fmt.Errorf("bad port in %q", hostport)
	}
	return h, n, nil
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
