// Package modelmeter is the harness's own view of an agent's model traffic:
// a reverse proxy on loopback that the agent is pointed at instead of its
// model endpoint. It relays every request to the real endpoint unchanged,
// and records each model request as it is answered (status, latency, the
// usage the response reports), so usage is known however the agent ends,
// in one shape for every agent. It also notices a failing provider (a run of
// failed requests, a stalled response) and says so at once, so the harness
// can stop the agent instead of waiting for its timeout. Before the agent
// starts, Precheck says whether the endpoint can be reached at all.
package modelmeter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Stop reasons.
const (
	StopAPIError    = "api_error"    // consecutive 5xx answers or failed connections
	StopRateLimited = "rate_limited" // consecutive 429 answers
	StopStalled     = "stalled"      // a response that sent nothing for StallAfter
)

// Stop is why the meter says the model has failed.
type Stop struct {
	Reason  string
	Message string
}

// Request is one relayed model request.
type Request struct {
	Seq       int       `json:"seq"`
	At        time.Time `json:"at"`
	API       API       `json:"api"`
	Status    int       `json:"status"`          // 0: no answer (connection failed, stalled)
	Error     string    `json:"error,omitempty"` // the failure, when there is one
	LatencyMs int64     `json:"latency_ms"`      // until the response ended
	Usage     Usage     `json:"usage"`
	Reported  bool      `json:"usage_reported"` // the response carried usage
}

// Options configure a meter.
type Options struct {
	Upstream *url.URL // the model endpoint's base URL, as the user gave it
	Clock    func() time.Time
	// MaxFailures is how many failed model requests in a row mean the
	// provider is failing (default 4). An agent that backs off slowly is
	// judged sooner: two or more failures in a row spanning FailWindow
	// (default 10 s) with no success between also do (three rate limits
	// over 2.5 windows, since a rate limit asks the client to wait).
	MaxFailures int
	FailWindow  time.Duration
	// StallAfter is how long a request may wait for its answer, or an
	// answer may send nothing, before it is a stall (default
	// DefaultStallAfter). Every byte relayed starts the clock again, so a
	// slow model that keeps streaming is never a stall.
	StallAfter time.Duration
	// OnStop is called once, when the provider is judged failed.
	OnStop func(Stop)
}

// Meter is one run's model proxy.
type Meter struct {
	o   Options
	ln  net.Listener
	srv *http.Server

	mu       sync.Mutex
	reqs     []Request
	failRun  int       // failed model requests in a row
	failFrom time.Time // when the first of them was made
	failCode map[int]int
	stopped  bool
}

// meterHeader marks an answer the meter wrote itself (the endpoint failed).
const meterHeader = "X-Cto-Harness-Meter"

// Defaults. A stall is named within DefaultStallAfter plus the time to stop
// the agent: about 16 s, well inside the 30 s a provider failure must be
// named in. Streaming APIs send their headers at once and then events (or
// keep-alive pings) every few seconds; a provider slow to its first byte
// can be given longer with the config's agent.stall_seconds.
const (
	DefaultMaxFailures = 4
	DefaultStallAfter  = 15 * time.Second
	DefaultFailWindow  = 10 * time.Second
)

// Start listens on loopback and relays to o.Upstream.
func Start(o Options) (*Meter, error) {
	if o.Upstream == nil || (o.Upstream.Scheme != "http" && o.Upstream.Scheme != "https") || o.Upstream.Host == "" {
		return nil, errors.New("modelmeter: the upstream must be an http(s) URL")
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = DefaultMaxFailures
	}
	if o.StallAfter <= 0 {
		o.StallAfter = DefaultStallAfter
	}
	if o.FailWindow <= 0 {
		o.FailWindow = DefaultFailWindow
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("modelmeter: listen on loopback: %w", err)
	}
	m := &Meter{o: o, ln: ln, failCode: map[int]int{}}
	tr := &http.Transport{
		Proxy:                 nil, // the endpoint is reached directly, as the forwarder would
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: o.StallAfter + 5*time.Second, // the stall timer fires first
		MaxIdleConnsPerHost:   8,
		ForceAttemptHTTP2:     true,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = o.Upstream.Scheme, o.Upstream.Host
			pr.Out.Host = o.Upstream.Host
		},
		Transport:     tr,
		FlushInterval: -1, // streamed answers reach the agent as they come
		// The meter records a cut stream itself; the harness's stderr is the user's terminal.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(meterHeader, "unreachable")
			w.WriteHeader(http.StatusBadGateway)
			msg := strings.ReplaceAll(err.Error(), `"`, `'`)
			fmt.Fprintf(w, `{"error":{"type":"api_error","message":"cto-harness model meter: the model endpoint %s could not be reached: %s"}}`, o.Upstream.Host, msg)
		},
	}
	m.srv = &http.Server{Handler: m.handler(rp), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// BaseURL is the URL to give the agent instead of the upstream: the meter's
// address with the upstream's path.
func (m *Meter) BaseURL() string {
	return "http://" + m.ln.Addr().String() + strings.TrimSuffix(m.o.Upstream.Path, "/")
}

// Addr is the meter's HOST:PORT.
func (m *Meter) Addr() string { return m.ln.Addr().String() }

// Close stops the meter; requests in flight are cut.
func (m *Meter) Close() error { return m.srv.Close() }

// Requests returns the model requests answered so far, in order.
func (m *Meter) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.reqs...)
}

// handler times each request and reads its answer as it is relayed.
func (m *Meter) handler(rp *httputil.ReverseProxy) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api := Classify(r.Method, r.URL.Path)
		if api == APINone {
			rp.ServeHTTP(w, r)
			return
		}
		start := m.o.Clock()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		rw := &watchWriter{ResponseWriter: w, rd: &reader{api: api}}
		idle := time.AfterFunc(m.o.StallAfter, func() {
			rw.mu.Lock()
			rw.stalled = true
			rw.mu.Unlock()
			cancel()
		})
		rw.idle = idle
		rw.after = m.o.StallAfter
		// ReverseProxy aborts the handler with a panic when a streamed
		// answer breaks off (a stall cut, the agent gone): the request is
		// recorded all the same, and the abort goes on.
		defer func() {
			idle.Stop()
			rw.rd.finish()
			rw.mu.Lock()
			stalled, status := rw.stalled, rw.status
			rw.mu.Unlock()
			req := Request{At: start.UTC(), API: api, Status: status, LatencyMs: m.o.Clock().Sub(start).Milliseconds()}
			req.Usage, req.Reported = rw.rd.usage()
			switch {
			case stalled:
				req.Error = fmt.Sprintf("no answer for %s", m.o.StallAfter)
			case status == http.StatusBadGateway && rw.fromMeter:
				req.Status, req.Error = 0, "the endpoint could not be reached"
			case status >= 400:
				req.Error = fmt.Sprintf("HTTP %d", status)
			case r.Context().Err() != nil:
				req.Error = errAgentClosed
			}
			m.record(req, stalled)
		}()
		rp.ServeHTTP(rw, r.WithContext(ctx))
	})
}

// errAgentClosed is a request the agent itself gave up on.
const errAgentClosed = "the agent closed the request"

// record appends one request and judges the provider.
func (m *Meter) record(req Request, stalled bool) {
	m.mu.Lock()
	req.Seq = len(m.reqs) + 1
	m.reqs = append(m.reqs, req)
	failed := stalled || req.Status == 0 && req.Error != "" && req.Error != errAgentClosed || req.Status == 429 || req.Status >= 500
	if failed {
		if m.failRun == 0 {
			m.failFrom = req.At
		}
		m.failRun++
		m.failCode[req.Status]++
	} else if req.Status != 0 && req.Status < 400 {
		m.failRun = 0
		clear(m.failCode)
	}
	span := m.o.Clock().Sub(m.failFrom)
	var stop *Stop
	switch {
	case m.stopped:
	case stalled:
		stop = &Stop{Reason: StopStalled, Message: fmt.Sprintf("model request %d got no answer for %s (the stream stalled)", req.Seq, m.o.StallAfter)}
	case failed && (m.failRun >= m.o.MaxFailures || m.slow(span)):
		reason := StopAPIError
		if m.failCode[429] == m.failRun {
			reason = StopRateLimited
		}
		stop = &Stop{Reason: reason, Message: fmt.Sprintf("the last %d model requests failed over %s (%s)", m.failRun, span.Round(100*time.Millisecond), describe(m.failCode))}
	}
	if stop != nil {
		m.stopped = true
	}
	m.mu.Unlock()
	if stop != nil && m.o.OnStop != nil {
		m.o.OnStop(*stop)
	}
}

// slow reports whether a run of failures has gone on too long: errors for
// FailWindow, or, when every failure is a rate limit (whose answer is to
// wait), three of them over two and a half windows.
func (m *Meter) slow(span time.Duration) bool {
	if m.failCode[429] == m.failRun {
		return m.failRun >= 3 && span >= m.o.FailWindow*5/2
	}
	return m.failRun >= 2 && span >= m.o.FailWindow
}

// describe lists failure counts: "HTTP 500 ×4", "connection failed ×2".
func describe(codes map[int]int) string {
	var parts []string
	for _, c := range []int{0, 429, 500, 502, 503, 504, 529} {
		if n := codes[c]; n > 0 {
			parts = append(parts, label(c, n))
		}
	}
	for c, n := range codes {
		switch c {
		case 0, 429, 500, 502, 503, 504, 529:
		default:
			parts = append(parts, label(c, n))
		}
	}
	return strings.Join(parts, ", ")
}

func label(code, n int) string {
	if code == 0 {
		return fmt.Sprintf("no answer ×%d", n)
	}
	return fmt.Sprintf("HTTP %d ×%d", code, n)
}

// watchWriter relays the answer to the agent, reading its usage and
// resetting the stall timer on every write.
type watchWriter struct {
	http.ResponseWriter
	rd    *reader
	idle  *time.Timer
	after time.Duration

	mu        sync.Mutex
	status    int
	stalled   bool
	fromMeter bool
}

func (w *watchWriter) WriteHeader(code int) {
	w.mu.Lock()
	if w.status == 0 {
		w.status = code
		w.fromMeter = w.Header().Get(meterHeader) != ""
	}
	w.mu.Unlock()
	w.idle.Reset(w.after)
	w.ResponseWriter.WriteHeader(code)
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.mu.Unlock()
	w.idle.Reset(w.after)
	w.rd.write(p)
	return w.ResponseWriter.Write(p)
}

func (w *watchWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Precheck says whether the endpoint can be reached within timeout: its
// name resolves, a TCP connection opens and, for https, TLS completes.
func Precheck(ctx context.Context, u *url.URL, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return fmt.Errorf("DNS: %s does not resolve: %w", host, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0], port))
	if err != nil {
		return fmt.Errorf("TCP: %w", err)
	}
	defer conn.Close()
	if u.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: host, NextProtos: []string{"h2", "http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		_ = tc.Close()
	}
	return nil
}
