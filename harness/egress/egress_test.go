package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		wild     bool
		err      bool
	}{
		{in: "api.example.com:443", want: "api.example.com:443"},
		{in: "API.Example.COM.:443", want: "api.example.com:443"},
		{in: "*.example.com:443", want: "*.example.com:443", wild: true},
		{in: "127.0.0.1:8080", want: "127.0.0.1:8080"},
		{in: "[::1]:8080", want: "[::1]:8080"},
		{in: "*:443", err: true},
		{in: "*", err: true},
		{in: "*.com:443", err: true},
		{in: "example.com", err: true},
		{in: "example.com:0", err: true},
		{in: "example.com:70000", err: true},
		{in: "example.com:http", err: true},
		{in: "exa mple.com:80", err: true},
		{in: "0.0.0.0:80", err: true},
		{in: "a.*.com:80", err: true},
	} {
		e, err := ParseEndpoint(tc.in)
		if tc.err {
			if err == nil || !errors.Is(err, ErrInvalid) {
				t.Errorf("%q: want ErrInvalid, got %v (%v)", tc.in, err, e)
			}
			continue
		}
		if err != nil || e.String() != tc.want || e.Wildcard != tc.wild {
			t.Errorf("%q: got %v %v wildcard=%v", tc.in, e, err, e.Wildcard)
		}
	}
}

func TestMatchAndNarrow(t *testing.T) {
	l, err := ParseList([]string{"api.example.com:443", "*.pkg.dev:443", "127.0.0.1:8080"}, SourceConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port uint16
		ok   bool
	}{
		{"api.example.com", 443, true}, {"API.example.com", 443, true}, {"api.example.com", 80, false},
		{"evil.example.com", 443, false}, {"go.pkg.dev", 443, true}, {"pkg.dev", 443, false},
		{"a.b.pkg.dev", 443, true}, {"127.0.0.1", 8080, true}, {"127.0.0.2", 8080, false},
		{"localhost", 8080, false},
	} {
		if _, ok := l.Match(tc.host, tc.port); ok != tc.ok {
			t.Errorf("%s:%d: match %v, want %v", tc.host, tc.port, ok, tc.ok)
		}
	}
	task, _ := ParseList([]string{"go.pkg.dev:443", "api.example.com:443", "other.com:443", "*.example.com:443"}, SourceTask, nil)
	kept, refused := Narrow(task, l)
	if got := strings.Join(kept.Strings(), ","); got != "go.pkg.dev:443,api.example.com:443" {
		t.Errorf("kept %s", got)
	}
	if strings.Join(refused, ",") != "other.com:443,*.example.com:443" {
		t.Errorf("refused %v", refused)
	}
	withOrigin, _ := ParseList([]string{"model.example.com:443"}, SourceFlag, map[string]string{"model.example.com:443": "model_endpoint"})
	if withOrigin[0].Source != "model_endpoint" {
		t.Errorf("origin not kept: %+v", withOrigin[0])
	}
}

func TestPlan(t *testing.T) {
	l, _ := ParseList([]string{"a.test:443", "b.test:8080", "a.test:8080", "*.w.test:443", "127.77.0.3:3128", "10.1.2.3:22"}, SourceFlag, nil)
	p := NewPlan(CommandCase, l)
	if p.Names["a.test"].String() != "127.77.0.2" || p.Names["b.test"].String() != "127.77.0.4" {
		t.Errorf("names %v (127.77.0.3 is a listed address and must be skipped)", p.Names)
	}
	if fmt.Sprint(p.Ports) != "[22 443 3128 8080]" || p.ProxyPort != 3129 {
		t.Errorf("ports %v proxy %d", p.Ports, p.ProxyPort)
	}
	if len(p.Addrs) != 1 || p.Addrs[0].String() != "10.1.2.3" {
		t.Errorf("addrs %v", p.Addrs)
	}
	hosts := string(p.Hosts())
	for _, want := range []string{"127.0.0.1\tlocalhost\n", "127.77.0.2\ta.test\n", "127.77.0.4\tb.test\n"} {
		if !strings.Contains(hosts, want) {
			t.Errorf("hosts lacks %q:\n%s", want, hosts)
		}
	}
	if strings.Count(hosts, "a.test") != 1 || strings.Contains(hosts, "w.test") {
		t.Errorf("hosts:\n%s", hosts)
	}
}

// fixture runs a forwarder on host listeners standing in for the namespace:
// names get their 127.77.0.x addresses, and dials of a name go to a local
// upstream.
type fixture struct {
	t       *testing.T
	f       *Forwarder
	plan    Plan
	log     *syncBuffer
	proxy   string
	dialled chan string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []ctoharness.NetworkRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ctoharness.NetworkRecord
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var r ctoharness.NetworkRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("bad record %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// newFixture allows entries (use PORT for the upstream's port) and points
// every name at upstream.
func newFixture(t *testing.T, upstream string, lim Limits, entries ...string) *fixture {
	t.Helper()
	_, uport, _ := net.SplitHostPort(upstream)
	for i := range entries {
		entries[i] = strings.ReplaceAll(entries[i], "PORT", uport)
	}
	l, err := ParseList(entries, SourceFlag, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{t: t, log: &syncBuffer{}, dialled: make(chan string, 16)}
	fx.f = New(Options{Policy: Policy{Case: l}, Limits: lim, Log: fx.log,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			fx.dialled <- addr
			var d net.Dialer
			return d.DialContext(ctx, network, upstream)
		}})
	fx.plan = NewPlan(CommandCase, l)
	var direct []net.Listener
	for _, p := range fx.plan.Ports {
		// One listener per name address stands in for the namespace's
		// all-addresses listener (the host already has 127.0.0.1:PORT).
		for _, a := range fx.plan.Names {
			ln, err := net.Listen("tcp", net.JoinHostPort(a.String(), strconv.Itoa(int(p))))
			if err != nil {
				t.Skipf("cannot listen on %s:%d on this host: %v", a, p, err)
			}
			direct = append(direct, ln)
		}
	}
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fx.proxy = proxy.Addr().String()
	if err := fx.f.Serve(fx.plan, direct, proxy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fx.f.Close)
	return fx
}

func TestDirectHTTPAllowedAndLogged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.Host) }))
	defer srv.Close()
	fx := newFixture(t, srv.Listener.Addr().String(), Limits{}, "svc.test:PORT")
	addr := net.JoinHostPort(fx.plan.Names["svc.test"].String(), strconv.Itoa(int(fx.plan.Ports[0])))
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "hello") {
		t.Fatalf("body %q", body)
	}
	fx.f.Close()
	recs := fx.log.records(t)
	if len(recs) != 1 || recs[0].Decision != Allowed || recs[0].Host != "svc.test" || recs[0].Via != ViaDirect ||
		recs[0].BytesDown == 0 || recs[0].BytesUp == 0 || recs[0].Rule == "" || recs[0].Resolved == "" {
		t.Fatalf("records %+v", recs)
	}
	if got := <-fx.dialled; !strings.HasPrefix(got, "svc.test:") {
		t.Errorf("dialled %s, want the name", got)
	}
	sum := fx.f.Summary()
	if sum.Attempts != 1 || sum.Allowed != 1 || sum.BytesDown != recs[0].BytesDown {
		t.Errorf("summary %+v", sum)
	}
}

func TestSNIMismatchDenied(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	fx := newFixture(t, srv.Listener.Addr().String(), Limits{}, "svc.test:PORT")
	addr := net.JoinHostPort(fx.plan.Names["svc.test"].String(), strconv.Itoa(int(fx.plan.Ports[0])))
	for _, sni := range []string{"svc.test", "evil.test"} {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		if err == nil {
			c.Close()
		}
		if (err == nil) != (sni == "svc.test") {
			t.Errorf("SNI %s: handshake error %v", sni, err)
		}
	}
	fx.f.Close()
	recs := fx.log.records(t)
	if len(recs) != 2 {
		t.Fatalf("records %+v", recs)
	}
	bySNI := map[string]ctoharness.NetworkRecord{}
	for _, r := range recs {
		bySNI[r.SNI] = r
	}
	if r := bySNI["svc.test"]; r.Decision != Allowed || !r.TLS {
		t.Errorf("matching SNI: %+v", r)
	}
	if r := bySNI["evil.test"]; r.Decision != Denied || !strings.Contains(r.Reason, "does not match") || r.BytesUp != 0 {
		t.Errorf("mismatched SNI: %+v", r)
	}
}

func TestProxy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "via proxy "+r.URL.Path) }))
	defer srv.Close()
	fx := newFixture(t, srv.Listener.Addr().String(), Limits{}, "*.w.test:PORT", "exact.test:PORT")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	pu, _ := url.Parse("http://" + fx.proxy)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	// Absolute-form plain HTTP through the proxy, to a wildcard name.
	resp, err := client.Get("http://a.w.test:" + port + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "via proxy /x" {
		t.Fatalf("body %q", body)
	}
	// A name outside the list, and an allowed name on another port.
	for _, target := range []string{"other.test:" + port, "exact.test:1"} {
		c, err := net.Dial("tcp", fx.proxy)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.Contains(line, "403") {
			t.Errorf("CONNECT %s: %q", target, line)
		}
	}
	// CONNECT to an allowed name, then a plain request through the tunnel.
	c, err := net.Dial("tcp", fx.proxy)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT exact.test:%s HTTP/1.1\r\nHost: exact.test\r\n\r\n", port)
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	if !strings.Contains(line, "200") {
		t.Fatalf("CONNECT: %q", line)
	}
	for l, _ := br.ReadString('\n'); l != "\r\n" && l != ""; l, _ = br.ReadString('\n') {
	}
	fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: exact.test\r\nConnection: close\r\n\r\n")
	resp2, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(resp2.Body)
	c.Close()
	if string(b2) != "via proxy /tunnel" {
		t.Errorf("tunnel body %q", b2)
	}
	fx.f.Close()
	var allowed, denied int
	for _, r := range fx.log.records(t) {
		switch r.Decision {
		case Allowed:
			allowed++
		case Denied:
			denied++
			if r.Via != ViaConnect || !strings.Contains(r.Reason, "no allowlist entry") {
				t.Errorf("denied record %+v", r)
			}
		}
	}
	if allowed != 2 || denied != 2 {
		t.Errorf("allowed %d denied %d: %+v", allowed, denied, fx.log.records(t))
	}
}

func TestLimits(t *testing.T) {
	payload := strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, payload) }))
	defer srv.Close()
	fx := newFixture(t, srv.Listener.Addr().String(), Limits{MaxConns: 1, MaxBytes: 256 << 10}, "svc.test:PORT")
	addr := net.JoinHostPort(fx.plan.Names["svc.test"].String(), strconv.Itoa(int(fx.plan.Ports[0])))
	// One connection held open uses the only slot.
	hold, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := second.Read(make([]byte, 1)); n != 0 {
		t.Errorf("second connection got data past the connection limit")
	}
	second.Close()
	// The held connection downloads more than the byte budget: cut short.
	fmt.Fprintf(hold, "GET / HTTP/1.1\r\nHost: svc.test\r\n\r\n")
	hold.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.Copy(io.Discard, hold)
	hold.Close()
	if got >= 1<<20 {
		t.Errorf("read %d bytes past a %d byte budget", got, 256<<10)
	}
	fx.f.Close()
	sum := fx.f.Summary()
	if strings.Join(sum.Limits.Exceeded, ",") != "connections,bytes" {
		t.Errorf("exceeded %v", sum.Limits.Exceeded)
	}
	limits := map[string]string{}
	for _, r := range fx.log.records(t) {
		limits[r.Limit] = r.Decision
	}
	if limits[LimitConnections] != Denied || limits[LimitBytes] != Allowed {
		t.Errorf("records %+v", fx.log.records(t))
	}
}

// Refused proxy requests share the one cap of network.jsonl with every
// other kind of record: past MaxRecords they are still refused, now
// unrecorded and uncounted, and the summary names the limit.
func TestProxyRefusalsAreCapped(t *testing.T) {
	fx := newFixture(t, "127.0.0.1:9", Limits{}, "exact.test:443")
	const extra = 25
	for i := range MaxRecords + extra {
		c, err := net.Dial("tcp", fx.proxy)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		want := "403"
		if i >= MaxRecords {
			want = "503"
		}
		if !strings.Contains(line, want) {
			t.Fatalf("request %d: %q, want %s", i+1, line, want)
		}
	}
	fx.f.Close()
	recs := fx.log.records(t)
	if len(recs) != MaxRecords {
		t.Errorf("%d records, want %d", len(recs), MaxRecords)
	}
	for i, r := range recs {
		if r.Seq != i+1 || r.Decision != Denied {
			t.Fatalf("record %d: %+v", i+1, r)
		}
	}
	sum := fx.f.Summary()
	if sum.Attempts != MaxRecords || sum.Denied != MaxRecords || len(sum.Limits.Exceeded) != 1 || sum.Limits.Exceeded[0] != LimitRecords {
		t.Errorf("summary attempts %d denied %d exceeded %v", sum.Attempts, sum.Denied, sum.Limits.Exceeded)
	}
}

// When the upstream cannot be reached, the proxy answers 502 with the
// reason it records, instead of closing the connection silently.
func TestProxyUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	fx := newFixture(t, down, Limits{}, "exact.test:PORT")
	_, port, _ := net.SplitHostPort(down)
	c, err := net.Dial("tcp", fx.proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT exact.test:%s HTTP/1.1\r\nHost: exact.test\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer from the proxy: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "could not be reached") || !strings.Contains(string(body), "refused") {
		t.Fatalf("answer %s %q", resp.Status, body)
	}
	fx.f.Close()
	recs := fx.log.records(t)
	if len(recs) != 1 || recs[0].Decision != Failed || !strings.Contains(recs[0].Reason, "could not be reached") {
		t.Errorf("records %+v", recs)
	}
}

// A proxy request is read with a bounded header: a CONNECT whose target is
// megabytes long is refused, and its record keeps a bounded host and
// reason, so neither the proxy's memory nor network.jsonl grows with what
// Case sends.
func TestProxyLongTargetIsBounded(t *testing.T) {
	fx := newFixture(t, "127.0.0.1:9", Limits{}, "exact.test:443")
	for _, req := range []string{
		"CONNECT " + strings.Repeat("h", 4<<20) + ".test:443 HTTP/1.1\r\n\r\n",
		"CONNECT exact.test:443 HTTP/1.1\r\nHost: exact.test:443\r\nX-Pad: " + strings.Repeat("p", 4<<20) + "\r\n\r\n",
		"GET http://" + strings.Repeat("g", 300) + ".test/ HTTP/1.1\r\nHost: " + strings.Repeat("g", 300) + ".test\r\n\r\n",
	} {
		c, err := net.Dial("tcp", fx.proxy)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.WriteString(c, req) }()
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		line, rerr := bufio.NewReader(c).ReadString('\n')
		c.Close()
		// The proxy closes with the rest of a long request unread, so the
		// client may see the reset before the answer; the record decides.
		if rerr == nil && !strings.Contains(line, "400") && !strings.Contains(line, "403") && !strings.Contains(line, "431") {
			t.Errorf("a %d-byte request: answered %q, want a refusal", len(req), line)
		}
	}
	fx.f.Close()
	recs := fx.log.records(t)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if r.Decision != Denied || len(b) > 4<<10 {
			t.Errorf("record %d: decision %s, %d bytes", r.Seq, r.Decision, len(b))
		}
	}
}

// A TLS server name longer than a host name can be (TLS allows 64 KiB) is
// denied, and its record keeps at most a host name's worth of it.
func TestLongSNIIsBounded(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	fx := newFixture(t, srv.Listener.Addr().String(), Limits{}, "svc.test:PORT")
	addr := net.JoinHostPort(fx.plan.Names["svc.test"].String(), strconv.Itoa(int(fx.plan.Ports[0])))
	long := strings.Repeat("a", 40_000) + ".svc.test"
	if c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: long, InsecureSkipVerify: true}); err == nil {
		c.Close()
		t.Errorf("a handshake with a %d-byte server name went through", len(long))
	}
	fx.f.Close()
	recs := fx.log.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	b, _ := json.Marshal(recs[0])
	if recs[0].Decision != Denied || len(b) > 2<<10 || !strings.Contains(recs[0].Reason, "longer than a host name") {
		t.Errorf("record: decision %s, %d bytes, reason %.120q", recs[0].Decision, len(b), recs[0].Reason)
	}
}
