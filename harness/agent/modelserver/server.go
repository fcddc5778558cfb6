package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// API names the wire protocol a request spoke.
type API string

// Wire protocols the server speaks.
const (
	APIChat      API = "openai-chat"        // POST /v1/chat/completions
	APIResponses API = "openai-responses"   // POST /v1/responses
	APIAnthropic API = "anthropic-messages" // POST /v1/messages
	APIGemini    API = "gemini"             // POST /v1beta/models/M:(stream)generateContent
	APIOther     API = "other"              // anything else: answered minimally
)

// Redacted replaces secrets in recorded requests.
const Redacted = "[REDACTED]"

// Request is one recorded request, secrets redacted.
type Request struct {
	API    API         `json:"api"`
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  string      `json:"query,omitempty"`
	Header http.Header `json:"header"`
	Body   string      `json:"body,omitempty"`
	// Turn is the script turn played (0-based; len(Script.Turns) for the
	// default final answer past the end), or -1 when the request was not a
	// scripted turn (a side request, a models listing, a token count).
	Turn   int `json:"turn"`
	Status int `json:"status"`
	// Stalled: the answer was a stall (headers, then nothing, no usage).
	Stalled bool `json:"stalled,omitempty"`
}

// Options configure a server.
type Options struct {
	Script Script
	// WorkDir resolves relative script paths when a request does not reveal
	// the agent's working directory.
	WorkDir string
	// Model is reported in model listings (default "scripted-model").
	Model string
	// OnRequest, when set, is called with each request once answered (for
	// logging); calls may be concurrent.
	OnRequest func(Request)
	// Latency is how long each model request waits before its answer
	// starts, as a hosted model's would: a batch of agents that wait on
	// their model can be measured on loopback.
	Latency time.Duration
}

// Server is the scripted model server. It is an http.Handler; Start also
// listens on an address.
type Server struct {
	opts Options

	mu     sync.Mutex
	reqs   []Request
	failed map[int]int // FailFirst answers given, per turn

	ln      net.Listener
	srv     *http.Server
	closing chan struct{} // closed by Close: stalled answers end
	once    sync.Once
}

// New returns a server that plays opts.Script.
func New(opts Options) (*Server, error) {
	if err := opts.Script.Validate(); err != nil {
		return nil, err
	}
	if opts.Model == "" {
		opts.Model = "scripted-model"
	}
	return &Server{opts: opts, closing: make(chan struct{})}, nil
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves until
// Close.
func Start(opts Options, addr string) (*Server, error) {
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("modelserver: listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the server root, e.g. http://127.0.0.1:41234. Agents speaking the
// OpenAI APIs take URL()+"/v1"; claude-code and gemini-cli take URL().
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Close stops a started server.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.closing) })
	if s.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// ServeHTTP records the request and answers it in its API's wire format.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	var err error
	if r.Body != nil {
		body, err = io.ReadAll(io.LimitReader(r.Body, 64<<20))
	}
	if err != nil {
		http.Error(w, "modelserver: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	key := requestKey(r)
	rec := Request{
		API:    classify(r),
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  redactQuery(r.URL.Query()),
		Header: redactHeader(r.Header),
		Body:   redactString(string(body), key),
		Turn:   -1,
	}
	if d := s.opts.Latency; d > 0 && rec.API != APIOther {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	ex := &exchange{srv: s, w: sw, r: r, body: body, key: key, turn: -1}
	switch rec.API {
	case APIChat:
		serveChat(ex)
	case APIResponses:
		serveResponses(ex)
	case APIAnthropic:
		serveAnthropic(ex)
	case APIGemini:
		serveGemini(ex)
	default:
		serveOther(ex)
	}
	rec.Turn = ex.turn
	rec.Status = sw.status
	rec.Stalled = ex.stalled
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
	if s.opts.OnRequest != nil {
		s.opts.OnRequest(rec)
	}
}

func classify(r *http.Request) API {
	p := r.URL.Path
	switch {
	case r.Method != http.MethodPost:
		return APIOther
	case strings.HasSuffix(p, "/chat/completions"):
		return APIChat
	case strings.HasSuffix(p, "/responses"):
		return APIResponses
	case strings.HasSuffix(p, "/messages"):
		return APIAnthropic
	case strings.Contains(p, "/models/") && (strings.HasSuffix(p, ":streamGenerateContent") || strings.HasSuffix(p, ":generateContent")):
		return APIGemini
	}
	return APIOther
}

// requestKey is the API key the request carried, in whichever place its API
// puts it.
func requestKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if k, ok := strings.CutPrefix(a, "Bearer "); ok {
			return strings.TrimSpace(k)
		}
	}
	for _, h := range []string{"x-api-key", "x-goog-api-key", "api-key"} {
		if k := r.Header.Get(h); k != "" {
			return k
		}
	}
	return r.URL.Query().Get("key")
}

var secretHeaders = map[string]bool{"Authorization": true, "X-Api-Key": true, "X-Goog-Api-Key": true, "Api-Key": true, "Cookie": true, "Proxy-Authorization": true}

func redactHeader(h http.Header) http.Header {
	out := h.Clone()
	for k := range out {
		if secretHeaders[http.CanonicalHeaderKey(k)] {
			out[k] = []string{Redacted}
		}
	}
	return out
}

func redactQuery(q url.Values) string {
	if q.Has("key") {
		q.Set("key", Redacted)
	}
	return q.Encode()
}

// redactString removes the key from a recorded body: after a leak turn the
// conversation history carries it.
func redactString(s, key string) string {
	if len(key) < 4 {
		return s
	}
	return strings.ReplaceAll(s, key, Redacted)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// exchange is one request being answered.
type exchange struct {
	srv     *Server
	w       *statusWriter
	r       *http.Request
	body    []byte
	key     string
	turn    int
	stalled bool
}

func (ex *exchange) writeJSON(status int, v any) {
	ex.w.Header().Set("Content-Type", "application/json")
	ex.w.WriteHeader(status)
	_ = json.NewEncoder(ex.w).Encode(v)
}

func (ex *exchange) badRequest(api API, err error) {
	ex.writeError(api, http.StatusBadRequest, "", fmt.Sprintf("modelserver: cannot parse %s request: %v", api, err))
}

// writeError answers with status and body, or an API-shaped error body
// carrying msg when body is empty.
func (ex *exchange) writeError(api API, status int, body, msg string) {
	if status == stallStatus {
		ex.stall()
		return
	}
	if body != "" {
		ex.w.Header().Set("Content-Type", "application/json")
		ex.w.WriteHeader(status)
		_, _ = io.WriteString(ex.w, body)
		return
	}
	if msg == "" {
		msg = fmt.Sprintf("scripted error %d", status)
	}
	if status == http.StatusTooManyRequests {
		ex.w.Header().Set("Retry-After", "1") // as providers do
	}
	switch api {
	case APIAnthropic:
		ex.writeJSON(status, map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(status), "message": msg}})
	case APIGemini:
		ex.writeJSON(status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}})
	default:
		// OpenAI's shapes: a rate limit and a server error are told apart
		// by type and code, which agents read to decide whether to retry.
		typ, code := "invalid_request_error", any(nil)
		switch {
		case status == 429:
			typ, code = "requests", "rate_limit_exceeded"
		case status >= 500:
			typ = "server_error"
		}
		ex.writeJSON(status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
	}
}

// stallStatus is the reply status of a stall turn.
const stallStatus = -1

// stall sends streaming headers and then nothing until the client goes
// away or the server closes.
func (ex *exchange) stall() {
	ex.stalled = true
	ex.w.Header().Set("Content-Type", "text/event-stream")
	ex.w.WriteHeader(http.StatusOK)
	ex.w.Flush()
	select {
	case <-ex.r.Context().Done():
	case <-ex.srv.closing:
	}
}

// failOnce reports whether this request for turn is one of its first n,
// to be failed, and counts it.
func (s *Server) failOnce(turn, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = map[int]int{}
	}
	if s.failed[turn] >= n {
		return false
	}
	s.failed[turn]++
	return true
}

func anthropicErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func geminiStatus(status int) string {
	switch status {
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "INVALID_ARGUMENT"
}

// serveOther answers endpoints outside the four chat APIs with the smallest
// valid answer: a model listing, a token count, or an empty object.
func serveOther(ex *exchange) {
	p := ex.r.URL.Path
	switch {
	case strings.HasSuffix(p, "/count_tokens"):
		ex.writeJSON(http.StatusOK, map[string]any{"input_tokens": estimateTokens(ex.body)})
	case strings.HasSuffix(p, ":countTokens"):
		ex.writeJSON(http.StatusOK, map[string]any{"totalTokens": estimateTokens(ex.body)})
	case ex.r.Method == http.MethodGet && strings.HasSuffix(p, "/models"):
		m := ex.srv.opts.Model
		ex.writeJSON(http.StatusOK, map[string]any{
			"object": "list",
			"data":   []any{map[string]any{"id": m, "object": "model", "created": 0, "owned_by": "modelserver"}},
			"models": []any{},
		})
	default:
		ex.writeJSON(http.StatusOK, map[string]any{})
	}
}

func estimateTokens(b []byte) int { return len(b)/4 + 1 }

// Usage every scripted answer reports, so agents have token counts to show.
const (
	UsageInput  = 100 // prompt tokens, cached ones included
	UsageCached = 40  // of UsageInput, read from a prompt cache
	UsageOutput = 20
)

// errNoTool is returned when the agent offers no tool for a scripted action.
var errNoTool = errors.New("the agent offers no tool for this action")

// compactJSON is v marshalled; marshalling maps of strings cannot fail.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// WriteRequests writes every recorded request as one JSON line each.
func (s *Server) WriteRequests(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range s.Requests() {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("modelserver: write requests: %w", err)
		}
	}
	return nil
}
