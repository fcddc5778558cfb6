package modelserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	name string
	data string
}

// post sends body to the server and returns the response status, headers
// and body.
func post(t *testing.T, srv *Server, path string, header map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.data != "" {
		t.Fatalf("SSE stream ends without a blank line after %q", cur.data)
	}
	return out
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, s)
	}
	return m
}

func newServer(t *testing.T, turns ...Turn) *Server {
	t.Helper()
	s, err := New(Options{Script: Script{Turns: turns}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScriptValidate(t *testing.T) {
	cases := []struct {
		name string
		turn Turn
		ok   bool
	}{
		{"write", Turn{Action: ActionWrite, Path: "a"}, true},
		{"write without path", Turn{Action: ActionWrite}, false},
		{"leak without path", Turn{Action: ActionLeakKey}, false},
		{"shell without command", Turn{Action: ActionShell}, false},
		{"error 200", Turn{Action: ActionError, Status: 200}, false},
		{"error 429", Turn{Action: ActionError, Status: 429}, true},
		{"unknown", Turn{Action: "dance"}, false},
		{"text", Turn{Action: ActionText}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Script{Turns: []Turn{c.turn}}.Validate()
			if (err == nil) != c.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrBadScript) {
				t.Fatalf("error %v is not ErrBadScript", err)
			}
		})
	}
}

func TestFindCwd(t *testing.T) {
	cases := map[string]string{
		`{"x":"...\nI'm currently working in the directory: /tmp/a/work\nHere is"}`: "/tmp/a/work",
		`{"x":"<env>\nWorking directory: /tmp/b\nIs directory a git repo"}`:         "/tmp/b",
		`{"x":"Primary working directory: /tmp/c\n"}`:                               "/tmp/c",
		`{"x":"<environment_context>\n  <cwd>/tmp/d e</cwd>"}`:                      "/tmp/d e",
		`{"x":"- **Workspace Directories:**\n  - /tmp/g/work\n- **Directory"}`:      "/tmp/g/work",
		`{"x":"nothing here"}`: "",
	}
	for body, want := range cases {
		if got := findCwd([]byte(body)); got != want {
			t.Errorf("findCwd(%s) = %q, want %q", body, got, want)
		}
	}
}

func TestAddFilePatch(t *testing.T) {
	got := addFilePatch("/w/a.txt", "one\ntwo\n")
	want := "*** Begin Patch\n*** Add File: /w/a.txt\n+one\n+two\n*** End Patch\n"
	if got != want {
		t.Fatalf("addFilePatch = %q, want %q", got, want)
	}
}

func TestRedaction(t *testing.T) {
	srv := newServer(t, Turn{Action: ActionText, Text: "hi"})
	key := "sk-secret-abcdef"
	post(t, srv, "/v1/chat/completions?key="+key, map[string]string{"Authorization": "Bearer " + key, "X-Api-Key": key},
		`{"model":"m","messages":[{"role":"user","content":"`+key+`"}],"tools":[{"type":"function","function":{"name":"x","parameters":{}}}]}`)
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(reqs))
	}
	b, _ := json.Marshal(reqs[0])
	if strings.Contains(string(b), key) {
		t.Fatalf("recorded request carries the key: %s", b)
	}
	if reqs[0].Header.Get("Authorization") != Redacted || !strings.Contains(reqs[0].Query, "REDACTED") {
		t.Fatalf("secrets not replaced by %s: %+v", Redacted, reqs[0])
	}
}

func TestShellWrite(t *testing.T) {
	content := "it's \"quoted\" $HOME `x` \\n\nline2\n"
	dir := t.TempDir()
	path := dir + "/o'dd name.txt"
	out, err := exec.Command("sh", "-c", shellWrite(path, content)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != content {
		t.Fatalf("shell write left %q (%v), want %q", got, err, content)
	}
}
