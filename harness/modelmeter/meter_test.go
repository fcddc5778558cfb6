package modelmeter_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
	"github.com/cto-harness/cto-harness/harness/modelmeter"
)

// served is the usage the scripted model server reports on every answer,
// split the meter's way: the prompt less its cached part, the cached part,
// nothing written to the cache, the output.
var served = modelmeter.Usage{InputUncached: modelserver.UsageInput - modelserver.UsageCached,
	CacheRead: modelserver.UsageCached, Output: modelserver.UsageOutput}

func start(t *testing.T, script modelserver.Script, o modelmeter.Options) (*modelserver.Server, *modelmeter.Meter) {
	t.Helper()
	srv, err := modelserver.Start(modelserver.Options{Script: script}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	o.Upstream, _ = url.Parse(srv.URL())
	m, err := modelmeter.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return srv, m
}

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// Every API's usage, streamed and not, comes out in one shape and equals
// what the server sent.
func TestUsageEveryAPI(t *testing.T) {
	srv, m := start(t, modelserver.Script{}, modelmeter.Options{})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`},
		{"/v1/chat/completions", `{"model":"m",` + msgs + `}`},
		{"/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
		{"/v1/responses", `{"model":"m","input":"hi"}`},
		{"/v1/messages?beta=true", `{"model":"m","stream":true,"max_tokens":10,` + msgs + `}`},
		{"/v1/messages", `{"model":"m","max_tokens":10,` + msgs + `}`},
		{"/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
	}
	base := "http://" + m.Addr()
	for _, c := range cases {
		if st := post(t, base+c.path, c.body); st != 200 {
			t.Fatalf("%s: status %d", c.path, st)
		}
	}
	// Not a model request: relayed, not counted.
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs := m.Requests()
	for i := 0; i < 50 && len(reqs) < len(cases); i++ {
		time.Sleep(10 * time.Millisecond)
		reqs = m.Requests()
	}
	if len(reqs) != len(cases) {
		t.Fatalf("%d requests recorded, want %d: %+v", len(reqs), len(cases), reqs)
	}
	var sum modelmeter.Usage
	for i, q := range reqs {
		if q.Usage != served || !q.Reported || q.Status != 200 || q.Error != "" || q.Seq != i+1 {
			t.Errorf("%s: %+v, want usage %+v", cases[i].path, q, served)
		}
		sum = sum.Add(q.Usage)
	}
	// The server's own record agrees on the count.
	n := 0
	for _, r := range srv.Requests() {
		if r.API != modelserver.APIOther {
			n++
		}
	}
	if n != len(reqs) {
		t.Errorf("server answered %d model requests, meter saw %d", n, len(reqs))
	}
	if sum.Output != int64(len(cases))*modelserver.UsageOutput {
		t.Errorf("summed output %d", sum.Output)
	}
}

// chatTool is a Chat Completions request that offers a tool, so the script plays.
const chatTool = `{"model":"m","messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"run_shell_command","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]}`

type stops struct {
	mu  sync.Mutex
	got []modelmeter.Stop
}

func (s *stops) add(st modelmeter.Stop) { s.mu.Lock(); s.got = append(s.got, st); s.mu.Unlock() }

// snapshot is what was said so far, without waiting.
func (s *stops) snapshot() []modelmeter.Stop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]modelmeter.Stop(nil), s.got...)
}

// list waits a moment for a verdict: the meter records a request just
// after the client has read its answer.
func (s *stops) list() []modelmeter.Stop {
	for i := 0; i < 50; i++ {
		s.mu.Lock()
		n := len(s.got)
		s.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]modelmeter.Stop(nil), s.got...)
}

func TestFailingProvider(t *testing.T) {
	for _, tc := range []struct {
		name   string
		turn   modelserver.Turn
		reason string
		want   string
	}{
		{"500-always", modelserver.Turn{Action: modelserver.ActionError, Status: 500}, modelmeter.StopAPIError, "HTTP 500 ×4"},
		{"429-always", modelserver.Turn{Action: modelserver.ActionError, Status: 429}, modelmeter.StopRateLimited, "HTTP 429 ×4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s stops
			_, m := start(t, modelserver.Script{Turns: []modelserver.Turn{tc.turn}}, modelmeter.Options{OnStop: s.add})
			for i := 0; i < 5; i++ {
				post(t, "http://"+m.Addr()+"/v1/chat/completions", chatTool)
			}
			got := s.list()
			if len(got) != 1 || got[0].Reason != tc.reason || !strings.Contains(got[0].Message, tc.want) {
				t.Fatalf("stops %+v, want one %s naming %q", got, tc.reason, tc.want)
			}
		})
	}
}

// Two 429s, then the answer: a provider that recovers is not stopped.
func TestRecoveringProvider(t *testing.T) {
	var s stops
	_, m := start(t, modelserver.Script{Turns: []modelserver.Turn{{Action: modelserver.ActionShell, Command: "true", FailFirst: 2, FailStatus: 429}}},
		modelmeter.Options{OnStop: s.add})
	var codes []int
	for i := 0; i < 3; i++ {
		codes = append(codes, post(t, "http://"+m.Addr()+"/v1/chat/completions", chatTool))
	}
	if codes[0] != 429 || codes[1] != 429 || codes[2] != 200 || len(s.list()) != 0 {
		t.Fatalf("codes %v, stops %+v", codes, s.list())
	}
	if r := m.Requests(); len(r) != 3 || r[2].Usage != served || r[0].Error == "" {
		t.Fatalf("requests %+v", r)
	}
}

func TestStalledStream(t *testing.T) {
	var s stops
	_, m := start(t, modelserver.Script{Turns: []modelserver.Turn{{Action: modelserver.ActionStall}}},
		modelmeter.Options{OnStop: s.add, StallAfter: 300 * time.Millisecond})
	begin := time.Now()
	post(t, "http://"+m.Addr()+"/v1/chat/completions", chatTool)
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("the stalled request took %s", d)
	}
	// The agent sees the answer cut before the meter's handler has
	// recorded it (the record is the handler's last act): wait for it.
	got := s.list()
	for end := time.Now().Add(2 * time.Second); len(got) == 0 && time.Now().Before(end); got = s.list() {
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != 1 || got[0].Reason != modelmeter.StopStalled {
		t.Fatalf("stops %+v", got)
	}
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestEndpointDown(t *testing.T) {
	u, _ := url.Parse("http://" + freePort(t) + "/v1")
	begin := time.Now()
	if err := modelmeter.Precheck(context.Background(), u, 2*time.Second); err == nil || !strings.Contains(err.Error(), "TCP") {
		t.Fatalf("precheck of a closed port: %v", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("precheck took %s", d)
	}
	var s stops
	m, err := modelmeter.Start(modelmeter.Options{Upstream: u, OnStop: s.add})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := 0; i < 4; i++ {
		if st := post(t, m.BaseURL()+"/chat/completions", chatTool); st != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", st)
		}
	}
	got := s.list()
	if len(got) != 1 || got[0].Reason != modelmeter.StopAPIError || !strings.Contains(got[0].Message, "no answer ×4") {
		t.Fatalf("stops %+v", got)
	}
}

// An agent that backs off slowly is stopped after two failures that span
// the fail window, before it spends its whole timeout retrying.
func TestSlowRetriesJudgedByTime(t *testing.T) {
	var s stops
	_, m := start(t, modelserver.Script{Turns: []modelserver.Turn{{Action: modelserver.ActionError, Status: 503}}},
		modelmeter.Options{OnStop: s.add, FailWindow: 200 * time.Millisecond})
	post(t, "http://"+m.Addr()+"/v1/chat/completions", chatTool)
	time.Sleep(250 * time.Millisecond)
	post(t, "http://"+m.Addr()+"/v1/chat/completions", chatTool)
	got := s.list()
	if len(got) != 1 || got[0].Reason != modelmeter.StopAPIError || !strings.Contains(got[0].Message, "HTTP 503 ×2") {
		t.Fatalf("stops %+v", got)
	}
}

// A slow model that keeps streaming is not a stall: the stall clock starts
// again at every byte. Its answer takes three stall periods; each gap is
// most of one. The same gaps before the headers, or a stream that stops
// for longer than one period, are stalls.
func TestSlowStreamIsNotAStall(t *testing.T) {
	const after = 400 * time.Millisecond
	gap := after * 3 / 4
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") != "" {
			time.Sleep(after * 2) // nothing at all, not even headers
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := 0; i < 4; i++ {
			time.Sleep(gap)
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"part %d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		if r.URL.Query().Get("stop") != "" {
			time.Sleep(after * 2) // then the stream stops
		}
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(upstream.Close)
	for _, tc := range []struct {
		query string
		stall bool
	}{{"", false}, {"?wait=1", true}, {"?stop=1", true}} {
		t.Run("query"+tc.query, func(t *testing.T) {
			var s stops
			u, _ := url.Parse(upstream.URL)
			m, err := modelmeter.Start(modelmeter.Options{Upstream: u, OnStop: s.add, StallAfter: after})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			begin := time.Now()
			post(t, "http://"+m.Addr()+"/v1/chat/completions"+tc.query, chatTool)
			took := time.Since(begin)
			if !tc.stall {
				time.Sleep(100 * time.Millisecond)
				if got := s.snapshot(); len(got) != 0 || took < 3*after {
					t.Fatalf("a model streaming every %s was stopped (%+v) or answered in %s", gap, got, took)
				}
				if r := m.Requests(); len(r) != 1 || r[0].Status != 200 || r[0].Error != "" || r[0].Usage.Output != 4 {
					t.Fatalf("requests %+v", r)
				}
				return
			}
			if got := s.list(); len(got) != 1 || got[0].Reason != modelmeter.StopStalled {
				t.Fatalf("stops %+v, want a stall", got)
			}
		})
	}
}

// The default stall threshold leaves room, within the 30 s a provider
// failure must be named in, for the agent's start and the harness's own
// steps.
func TestDefaultStallLeavesMargin(t *testing.T) {
	if modelmeter.DefaultStallAfter > 15*time.Second || modelmeter.DefaultStallAfter < 5*time.Second {
		t.Errorf("DefaultStallAfter %s: want between 5 s and 15 s", modelmeter.DefaultStallAfter)
	}
}
