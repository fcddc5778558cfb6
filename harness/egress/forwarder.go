package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Decisions recorded in network.jsonl.
const (
	Allowed = "allowed"
	Denied  = "denied"
	Failed  = "failed" // allowed by the policy, but the endpoint could not be reached
)

// Ways a connection reaches the forwarder.
const (
	ViaDirect    = "direct"
	ViaConnect   = "connect"
	ViaHTTPProxy = "http_proxy"
)

// Limit names recorded when a limit ends or refuses a connection.
const (
	LimitConnections = "connections"
	LimitBytes       = "bytes"
	// LimitRecords is reached when network.jsonl holds MaxRecords lines:
	// every later attempt, of any kind, is refused unrecorded (and
	// uncounted in the summary, which says what the log holds).
	LimitRecords = "records"
)

// MaxRecords bounds network.jsonl, whatever kind of record it is filled
// with (refusals at the system call, refused or allowed proxy and direct
// connections), so a command looping on connect cannot fill the disk or
// the validator's time.
const MaxRecords = 10000

// LogName is the run artifact the records go to.
const LogName = "network.jsonl"

// dialTimeout bounds the harness's dial of an allowed endpoint.
const dialTimeout = 30 * time.Second

// step is the most a relay moves between two looks at the byte budget.
const step = 256 << 10

// Limits cap the egress of one run. Zero means no cap.
type Limits struct {
	MaxConns int   // connections open at the same time, both commands together
	MaxBytes int64 // bytes relayed in both directions over the whole run
}

// Options configure a Forwarder.
type Options struct {
	Policy Policy
	Limits Limits
	// Log receives network.jsonl, one JSON line per attempt.
	Log   io.Writer
	Clock func() time.Time
	// Dial reaches an allowed endpoint from the host network (nil: net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Validate, when set, checks each record line before it is written.
	Validate func([]byte) error
}

// Forwarder serves the egress of every sandboxed command of one run.
type Forwarder struct {
	o Options

	mu        sync.Mutex
	seq       int
	records   int // slots taken in network.jsonl, at most MaxRecords
	active    int
	bytesLeft int64
	summary   ctoharness.NetworkSummary
	closed    bool
	sessions  []*session
	setupErrs []string
	writeErrs []string
	// unreachable are the allowed endpoints that could not be reached,
	// per command, with the first reason: the machine's network, not the
	// policy, so a failing command's blocker can say so.
	unreachable map[string][]Unreachable
	wg          sync.WaitGroup
}

// New makes a forwarder; nothing listens until Serve or Attach.
func New(o Options) *Forwarder {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Dial == nil {
		d := &net.Dialer{Timeout: dialTimeout}
		o.Dial = d.DialContext
	}
	f := &Forwarder{o: o, bytesLeft: o.Limits.MaxBytes}
	f.summary = ctoharness.NetworkSummary{Policy: recordPolicy(o.Policy), LogPath: LogName, DeniedLog: []ctoharness.NetworkDenied{},
		Limits: ctoharness.NetworkLimits{MaxConcurrent: o.Limits.MaxConns, MaxBytes: o.Limits.MaxBytes, Exceeded: []string{}},
		Errors: []string{}}
	return f
}

func recordPolicy(p Policy) ctoharness.NetworkPolicy {
	conv := func(l List) []ctoharness.NetworkRule {
		out := []ctoharness.NetworkRule{}
		for _, r := range l {
			out = append(out, ctoharness.NetworkRule{Endpoint: r.Endpoint.String(), Source: r.Source})
		}
		return out
	}
	np := ctoharness.NetworkPolicy{Case: conv(p.Case), Verification: conv(p.Verify), Setup: conv(p.Setup)}
	if len(p.Adversary) > 0 {
		np.Adversary = conv(p.Adversary)
	}
	return np
}

// Summary is the report's network section so far.
func (f *Forwarder) Summary() ctoharness.NetworkSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.summary
	s.DeniedLog = append([]ctoharness.NetworkDenied{}, s.DeniedLog...)
	s.Limits.Exceeded = append([]string{}, s.Limits.Exceeded...)
	s.Errors = append([]string{}, s.Errors...)
	return s
}

// fail records a session that could not be set up.
func (f *Forwarder) fail(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	msg := fmt.Sprintf(format, a...)
	f.setupErrs = append(f.setupErrs, msg)
	f.summary.Errors = append(f.summary.Errors, msg)
}

// Unreachable is an allowed endpoint that could not be reached, with the
// first reason.
type Unreachable struct{ Endpoint, Reason string }

// noteUnreachable records endpoint as unreachable for cmd, once, with its
// first reason. Called with f.mu held.
func (f *Forwarder) noteUnreachable(cmd, endpoint, reason string) {
	if f.unreachable == nil {
		f.unreachable = map[string][]Unreachable{}
	}
	for _, e := range f.unreachable[cmd] {
		if e.Endpoint == endpoint {
			return
		}
	}
	if len(f.unreachable[cmd]) < 5 {
		f.unreachable[cmd] = append(f.unreachable[cmd], Unreachable{endpoint, strings.TrimPrefix(reason, "the endpoint could not be reached: ")})
	}
}

// Unreachable lists the allowed endpoints cmd could not reach so far.
func (f *Forwarder) Unreachable(cmd Command) []Unreachable {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Unreachable(nil), f.unreachable[string(cmd)]...)
}

// Failures are the sessions that could not be set up and the records that
// could not be written.
func (f *Forwarder) Failures() (setup, write []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.setupErrs...), append([]string(nil), f.writeErrs...)
}

// Close stops every listener and connection and waits until every record is
// written. The summary is final afterwards.
func (f *Forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	ss := append([]*session(nil), f.sessions...)
	f.mu.Unlock()
	for _, s := range ss {
		s.stop()
	}
	f.wg.Wait()
}

// session is one sandboxed command's listeners and connections.
type session struct {
	f      *Forwarder
	plan   Plan
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners []net.Listener
	conns     map[net.Conn]bool
	control   io.Closer // the launcher's socket, when attached
	stopped   bool
}

func (f *Forwarder) newSession(plan Plan) (*session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("egress forwarder is closed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{f: f, plan: plan, ctx: ctx, cancel: cancel, conns: map[net.Conn]bool{}}
	f.sessions = append(f.sessions, s)
	return s, nil
}

// stop closes the session's listeners and open connections.
func (s *session) stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	ls := s.listeners
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	ctl := s.control
	s.mu.Unlock()
	s.cancel()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	if ctl != nil {
		ctl.Close()
	}
}

func (s *session) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.conns[c] = true
	return true
}

func (s *session) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// Serve serves plan on listeners that already exist: one per plan port
// (direct) and the proxy. It returns at once; Close stops it.
func (f *Forwarder) Serve(plan Plan, direct []net.Listener, proxy net.Listener) error {
	s, err := f.newSession(plan)
	if err != nil {
		return err
	}
	s.serve(direct, proxy)
	return nil
}

func (s *session) serve(direct []net.Listener, proxy net.Listener) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		for _, l := range append(direct, proxy) {
			l.Close()
		}
		return
	}
	s.listeners = append(append(s.listeners, direct...), proxy)
	s.mu.Unlock()
	for _, l := range direct {
		s.acceptLoop(l, s.direct)
	}
	s.acceptLoop(proxy, s.proxy)
}

func (s *session) acceptLoop(l net.Listener, handle func(*net.TCPConn)) {
	s.f.wg.Add(1)
	go func() {
		defer s.f.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tc, ok := c.(*net.TCPConn)
			if !ok || !s.track(c) {
				c.Close()
				continue
			}
			s.f.wg.Add(1)
			go func() {
				defer s.f.wg.Done()
				defer s.untrack(c)
				handle(tc)
			}()
		}
	}()
}

// attempt is one connection being decided and relayed.
type attempt struct {
	rec   ctoharness.NetworkRecord
	start time.Time
}

func (s *session) newAttempt(c net.Conn, via string) *attempt {
	now := s.f.o.Clock()
	return &attempt{start: now, rec: ctoharness.NetworkRecord{Time: now.UTC(), Command: string(s.plan.Command), Via: via,
		Protocol: ProtoTCP, Listener: c.LocalAddr().String()}}
}

// direct handles a connection to an allowed name's address or an allowed IP.
func (s *session) direct(c *net.TCPConn) {
	defer c.Close()
	if !s.f.reserveRecord() {
		return // refused unrecorded: the log is full
	}
	a := s.newAttempt(c, ViaDirect)
	dst := c.LocalAddr().(*net.TCPAddr).AddrPort()
	host := s.plan.target(dst.Addr())
	a.rec.Host, a.rec.Port = host, int(dst.Port())
	rule, ok := s.plan.List.exact(host, dst.Port())
	if !ok {
		reason := fmt.Sprintf("no allowlist entry for %s", net.JoinHostPort(host, strconv.Itoa(int(dst.Port()))))
		if _, isName := s.plan.Names[host]; !isName {
			reason += " (an allowed name is reachable only by its name; an address is allowed only when it is listed itself)"
		}
		s.finish(a, Denied, reason)
		return
	}
	s.relay(c, bufio.NewReaderSize(c, maxHello), a, rule, nil)
}

// relay dials the allowed endpoint and copies bytes both ways. Before any
// byte of the command reaches the endpoint, a TLS ClientHello is checked:
// its SNI must name the endpoint. connected runs once the endpoint answered
// (the CONNECT proxy's 200).
func (s *session) relay(c *net.TCPConn, br *bufio.Reader, a *attempt, rule Rule, connected func(up net.Conn) (int64, error)) {
	a.rec.Rule, a.rec.RuleSource = rule.Endpoint.String(), rule.Source
	// Through the proxy (connected is set), a failure is answered with an
	// HTTP status and the reason, so the client can say what happened
	// instead of seeing the connection close; a direct connection is closed.
	answer := func(code int, reason string) {
		if connected != nil {
			refuse(c, code, "cto-harness egress: "+reason)
		}
	}
	if lim := s.f.acquire(); lim != "" {
		a.rec.Limit = lim
		answer(http.StatusServiceUnavailable, "the egress limit is reached ("+lim+")")
		s.finish(a, Denied, "the egress limit is reached ("+lim+")")
		return
	}
	defer s.f.release()
	ctx, cancel := context.WithTimeout(s.ctx, dialTimeout)
	up, err := s.f.o.Dial(ctx, "tcp", net.JoinHostPort(a.rec.Host, strconv.Itoa(a.rec.Port)))
	cancel()
	if err != nil {
		reason := "the endpoint could not be reached: " + err.Error()
		code := http.StatusBadGateway
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			code = http.StatusGatewayTimeout
		}
		answer(code, reason)
		s.finish(a, Failed, reason)
		return
	}
	if !s.track(up) {
		up.Close()
		s.finish(a, Failed, "the command's session ended")
		return
	}
	defer s.untrack(up)
	defer up.Close()
	a.rec.Resolved = up.RemoteAddr().String()
	var sent int64
	if connected != nil {
		n, err := connected(up)
		sent = n
		if err != nil {
			a.rec.BytesUp = sent
			s.finish(a, Failed, "could not pass on the proxy request: "+err.Error())
			return
		}
	}
	var limitHit sync.Once
	hit := func(l string) { limitHit.Do(func() { a.rec.Limit = l }) }
	down := make(chan struct{})
	go func() {
		defer close(down)
		n, exceeded, _ := s.f.pump(c, up, nil)
		a.rec.BytesDown = n
		if exceeded {
			hit(LimitBytes)
			c.Close()
			up.Close()
			return
		}
		_ = c.CloseWrite()
	}()
	isTLS, sni, perr := peekHello(br)
	a.rec.TLS, a.rec.SNI = isTLS, sni
	deny := ""
	switch {
	case perr != nil && !isTLS:
		// The command closed without sending anything: nothing to inspect.
	case perr != nil:
		deny = "unreadable TLS ClientHello: " + perr.Error()
	case len(sni) > maxHostName:
		// TLS allows a name of 64 KiB; the record keeps a host name's worth.
		a.rec.SNI = sni[:maxHostName]
		deny = fmt.Sprintf("TLS server name of %d bytes, longer than a host name can be (%d): %s", len(sni), maxHostName, clipQuoted(sni))
	case isTLS && rule.Endpoint.IsIP() && sni != "":
		deny = fmt.Sprintf("TLS server name %q on a connection to the address %s", sni, a.rec.Host)
	case isTLS && !rule.Endpoint.IsIP() && !strings.EqualFold(sni, a.rec.Host):
		deny = fmt.Sprintf("TLS server name %q does not match the allowed name %s", sni, a.rec.Host)
	}
	if deny != "" {
		c.Close()
		up.Close()
		<-down
		s.finish(a, Denied, deny)
		return
	}
	n, exceeded, _ := s.f.pump(up, c, br)
	a.rec.BytesUp = sent + n
	if exceeded {
		hit(LimitBytes)
		c.Close()
		up.Close()
	} else if tc, ok := up.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	<-down
	s.finish(a, Allowed, "")
}

// reserveRecord takes one of the MaxRecords lines of network.jsonl for an
// attempt about to be decided, and notes the limit once none is left: an
// attempt without a line is refused, never let through unrecorded. A line
// is taken when an attempt starts, so a connection that outlives the
// limit still gets its record.
func (f *Forwarder) reserveRecord() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.records >= MaxRecords {
		f.exceeded(LimitRecords)
		return false
	}
	f.records++
	return true
}

// acquire takes a connection slot; it returns the limit that refuses it.
func (f *Forwarder) acquire() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.o.Limits.MaxBytes > 0 && f.bytesLeft <= 0 {
		f.exceeded(LimitBytes)
		return LimitBytes
	}
	if f.o.Limits.MaxConns > 0 && f.active >= f.o.Limits.MaxConns {
		f.exceeded(LimitConnections)
		return LimitConnections
	}
	f.active++
	return ""
}

func (f *Forwarder) release() {
	f.mu.Lock()
	f.active--
	f.mu.Unlock()
}

// exceeded notes a limit in the summary; f.mu is held.
func (f *Forwarder) exceeded(l string) {
	for _, have := range f.summary.Limits.Exceeded {
		if have == l {
			return
		}
	}
	f.summary.Limits.Exceeded = append(f.summary.Limits.Exceeded, l)
}

// allowance is how much the next relay step may move: at most step bytes
// and never more than what is left of the budget. 0 means the budget is spent.
func (f *Forwarder) allowance() int64 {
	if f.o.Limits.MaxBytes <= 0 {
		return step
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bytesLeft <= 0 {
		f.exceeded(LimitBytes)
		return 0
	}
	return min(step, f.bytesLeft)
}

// spend charges n relayed bytes to the budget.
func (f *Forwarder) spend(n int64) {
	if f.o.Limits.MaxBytes <= 0 || n <= 0 {
		return
	}
	f.mu.Lock()
	f.bytesLeft -= n
	f.mu.Unlock()
}

// pump copies src to dst within the byte budget, first whatever br already
// buffered. It reports the bytes copied and whether the budget ran out. The
// copy goes through ReadFrom so the kernel can splice socket to socket; the
// budget is checked before every step, so concurrent connections can pass
// it by at most one step each.
func (f *Forwarder) pump(dst, src net.Conn, br *bufio.Reader) (int64, bool, error) {
	var total int64
	if br != nil && br.Buffered() > 0 {
		g := f.allowance()
		data, _ := br.Peek(int(min(int64(br.Buffered()), g)))
		m, err := dst.Write(data)
		total += int64(m)
		f.spend(int64(m))
		_, _ = br.Discard(m)
		if err != nil {
			return total, false, err
		}
		if br.Buffered() > 0 {
			return total, true, nil
		}
	}
	rf, ok := dst.(io.ReaderFrom)
	if !ok {
		rf = readerFrom{dst}
	}
	for {
		g := f.allowance()
		if g == 0 {
			return total, true, nil
		}
		m, err := rf.ReadFrom(&io.LimitedReader{R: src, N: g})
		total += m
		f.spend(m)
		if err != nil {
			return total, false, err
		}
		if m < g {
			return total, false, nil
		}
	}
}

type readerFrom struct{ w io.Writer }

func (r readerFrom) ReadFrom(src io.Reader) (int64, error) { return io.Copy(r.w, src) }

// finish completes a record and writes it to network.jsonl.
func (s *session) finish(a *attempt, decision, reason string) { s.f.finish(a, decision, reason) }

// finish completes a record of any session, or none, and writes it.
func (f *Forwarder) finish(a *attempt, decision, reason string) {
	a.rec.Decision, a.rec.Reason = decision, reason
	if decision == Denied {
		a.rec.Rule, a.rec.RuleSource = "", ""
	}
	a.rec.DurationMs = f.o.Clock().Sub(a.start).Milliseconds()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	a.rec.Seq = f.seq
	sum := &f.summary
	sum.Attempts++
	switch decision {
	case Allowed:
		sum.Allowed++
	case Denied:
		sum.Denied++
		if len(sum.DeniedLog) < ctoharness.MaxDeniedInReport {
			sum.DeniedLog = append(sum.DeniedLog, ctoharness.NetworkDenied{Seq: a.rec.Seq, Command: a.rec.Command,
				Host: a.rec.Host, Port: a.rec.Port, Reason: reason})
		}
	case Failed:
		sum.Failed++
		f.noteUnreachable(a.rec.Command, fmt.Sprintf("%s:%d", a.rec.Host, a.rec.Port), reason)
	}
	sum.BytesUp += a.rec.BytesUp
	sum.BytesDown += a.rec.BytesDown
	line, err := json.Marshal(a.rec)
	if err == nil && f.o.Validate != nil {
		err = f.o.Validate(line)
	}
	if err == nil && f.o.Log != nil {
		_, err = f.o.Log.Write(append(line, '\n'))
	}
	if err != nil {
		msg := fmt.Sprintf("network record %d could not be written: %v", a.rec.Seq, err)
		f.writeErrs = append(f.writeErrs, msg)
		sum.Errors = append(sum.Errors, msg)
	}
}
