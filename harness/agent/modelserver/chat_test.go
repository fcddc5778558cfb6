package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const qwenTools = `[{"type":"function","function":{"name":"write_file","parameters":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}}}}},
{"type":"function","function":{"name":"run_shell_command","parameters":{"type":"object","properties":{"command":{"type":"string"},"description":{"type":"string"}}}}}]`

const qwenSystem = `{"role":"system","content":"My operating system is: linux\nI'm currently working in the directory: /tmp/w\nHere is the folder"}`

// chatStream parses a streamed chat answer back into text, one tool call and
// usage.
func chatStream(t *testing.T, body string) (text, name, args, finish string, usage map[string]any) {
	t.Helper()
	ev := parseSSE(t, body)
	if len(ev) == 0 || ev[len(ev)-1].data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", ev)
	}
	for _, e := range ev[:len(ev)-1] {
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Function struct{ Name, Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("chunk %s: %v", e.data, err)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return
}

func TestChatTurns(t *testing.T) {
	srv := newServer(t,
		Turn{Action: ActionWrite, Path: "a.txt", Content: "x\n", Text: "writing"},
		Turn{Action: ActionShell, Command: "ls"},
		Turn{Action: ActionLeakKey, Path: "/abs/k.txt"},
		Turn{Action: ActionText, Text: "all done"},
	)
	cases := []struct {
		results                  int
		text, name, args, finish string
	}{
		{0, "writing", "write_file", `{"content":"x\n","file_path":"/tmp/w/a.txt"}`, "tool_calls"},
		{1, "", "run_shell_command", `{"command":"ls"}`, "tool_calls"},
		{2, "", "write_file", `{"content":"sk-chat","file_path":"/abs/k.txt"}`, "tool_calls"},
		{3, "all done", "", "", "stop"},
		{4, DefaultFinalText, "", "", "stop"},
	}
	for _, c := range cases {
		msgs := []string{qwenSystem, `{"role":"user","content":"go"}`}
		for i := 0; i < c.results; i++ {
			msgs = append(msgs, `{"role":"assistant","tool_calls":[]}`, `{"role":"tool","tool_call_id":"x","content":"ok"}`)
		}
		body := `{"model":"m","stream":true,"messages":[` + strings.Join(msgs, ",") + `],"tools":` + qwenTools + `}`
		res, out := post(t, srv, "/v1/chat/completions", map[string]string{"Authorization": "Bearer sk-chat"}, body)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("results=%d: status %d, content type %q", c.results, res.StatusCode, res.Header.Get("Content-Type"))
		}
		text, name, args, finish, usage := chatStream(t, out)
		if text != c.text || name != c.name || args != c.args || finish != c.finish {
			t.Errorf("results=%d: got text=%q call=%s(%s) finish=%s, want text=%q call=%s(%s) finish=%s",
				c.results, text, name, args, finish, c.text, c.name, c.args, c.finish)
		}
		if usage["prompt_tokens"] != float64(UsageInput) || usage["completion_tokens"] != float64(UsageOutput) {
			t.Errorf("results=%d: usage %v", c.results, usage)
		}
	}
	reqs := srv.Requests()
	for i, q := range reqs {
		if q.API != APIChat || q.Turn != i {
			t.Errorf("request %d recorded as %s turn %d", i, q.API, q.Turn)
		}
	}
}

func TestChatSideRequestAndError(t *testing.T) {
	srv := newServer(t, Turn{Action: ActionError, Status: 429})
	// No tools offered: a side request gets a short answer, not the error.
	_, out := post(t, srv, "/v1/chat/completions", nil, `{"model":"m","stream":true,"messages":[{"role":"user","content":"title?"}]}`)
	if text, _, _, _, _ := chatStream(t, out); text != DefaultFinalText {
		t.Fatalf("side request answered %q", text)
	}
	res, out := post(t, srv, "/v1/chat/completions", nil, `{"model":"m","stream":true,"messages":[],"tools":`+qwenTools+`}`)
	if res.StatusCode != 429 || decode(t, out)["error"] == nil {
		t.Fatalf("scripted error answered %d %s", res.StatusCode, out)
	}
	// Non-streaming answer.
	srv = newServer(t, Turn{Action: ActionShell, Command: "true"})
	res, out = post(t, srv, "/v1/chat/completions", nil, `{"model":"m","messages":[],"tools":`+qwenTools+`}`)
	m := decode(t, out)
	msg := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	call := msg["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if res.StatusCode != 200 || call["name"] != "run_shell_command" || call["arguments"] != `{"command":"true"}` {
		t.Fatalf("non-stream answer %s", out)
	}
}
