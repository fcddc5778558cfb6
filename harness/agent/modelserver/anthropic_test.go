package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const claudeTools = `[{"name":"Write","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}}}},
{"name":"Bash","input_schema":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"}}}}]`

// anthropicStream parses a streamed Messages answer back into its text, one
// tool call, the stop reason and the final output token count.
func anthropicStream(t *testing.T, body string) (text, name, input, stop string, output float64) {
	t.Helper()
	ev := parseSSE(t, body)
	if len(ev) < 2 || ev[0].name != "message_start" || ev[len(ev)-1].name != "message_stop" {
		t.Fatalf("stream is not message_start … message_stop: %v", ev)
	}
	for _, e := range ev {
		m := decode(t, e.data)
		if m["type"] != e.name {
			t.Fatalf("event %s carries type %v", e.name, m["type"])
		}
		switch e.name {
		case "content_block_start":
			if b := m["content_block"].(map[string]any); b["type"] == "tool_use" {
				name = b["name"].(string)
			}
		case "content_block_delta":
			d := m["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				text += d["text"].(string)
			case "input_json_delta":
				input += d["partial_json"].(string)
			}
		case "message_delta":
			stop = m["delta"].(map[string]any)["stop_reason"].(string)
			output = m["usage"].(map[string]any)["output_tokens"].(float64)
		}
	}
	return
}

func TestAnthropicTurns(t *testing.T) {
	srv := newServer(t,
		Turn{Action: ActionWrite, Path: "a.txt", Content: "x\n", Text: "writing"},
		Turn{Action: ActionShell, Command: "ls -la"},
		Turn{Action: ActionLeakKey, Path: "k.txt"},
		Turn{Action: ActionText, Text: "finished"},
	)
	cases := []struct {
		results                 int
		text, name, input, stop string
	}{
		{0, "writing", "Write", `{"content":"x\n","file_path":"/tmp/c/a.txt"}`, "tool_use"},
		{1, "", "Bash", `{"command":"ls -la"}`, "tool_use"},
		{2, "", "Write", `{"content":"sk-ant-test","file_path":"/tmp/c/k.txt"}`, "tool_use"},
		{3, "finished", "", "", "end_turn"},
	}
	for _, c := range cases {
		msgs := []string{`{"role":"user","content":"go"}`}
		for i := 0; i < c.results; i++ {
			msgs = append(msgs, `{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"Bash","input":{}}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"ok"}]}`)
		}
		body := `{"model":"m","stream":true,"system":[{"type":"text","text":"Here is useful information about the environment you are running in:\n - Primary working directory: /tmp/c\n"}],"messages":[` +
			strings.Join(msgs, ",") + `],"tools":` + claudeTools + `}`
		res, out := post(t, srv, "/v1/messages?beta=true", map[string]string{"x-api-key": "sk-ant-test"}, body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("results=%d: status %d: %s", c.results, res.StatusCode, out)
		}
		text, name, input, stop, output := anthropicStream(t, out)
		if text != c.text || name != c.name || input != c.input || stop != c.stop || output != UsageOutput {
			t.Errorf("results=%d: got text=%q call=%s(%s) stop=%s output=%v, want text=%q call=%s(%s) stop=%s",
				c.results, text, name, input, stop, output, c.text, c.name, c.input, c.stop)
		}
	}
}

func TestAnthropicSideEndpoints(t *testing.T) {
	srv := newServer(t, Turn{Action: ActionError, Status: 400})
	_, out := post(t, srv, "/v1/messages/count_tokens?beta=true", nil, `{"model":"m","messages":[{"role":"user","content":"hello"}]}`)
	if n, _ := decode(t, out)["input_tokens"].(float64); n <= 0 {
		t.Fatalf("count_tokens answered %s", out)
	}
	// A side request without tools (a title) gets text, not the scripted error.
	res, out := post(t, srv, "/v1/messages", nil, `{"model":"m","messages":[{"role":"user","content":"title"}]}`)
	var msg struct {
		Content []struct{ Type, Text string } `json:"content"`
		Usage   map[string]float64            `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &msg); err != nil || res.StatusCode != 200 || len(msg.Content) != 1 || msg.Content[0].Text != DefaultFinalText {
		t.Fatalf("side request answered %d %s", res.StatusCode, out)
	}
	if msg.Usage["input_tokens"]+msg.Usage["cache_read_input_tokens"] != UsageInput {
		t.Fatalf("usage %v does not add up to %d input tokens", msg.Usage, UsageInput)
	}
	res, out = post(t, srv, "/v1/messages", nil, `{"model":"m","stream":true,"messages":[],"tools":`+claudeTools+`}`)
	e := decode(t, out)
	if res.StatusCode != 400 || e["type"] != "error" || e["error"].(map[string]any)["type"] != "invalid_request_error" {
		t.Fatalf("scripted error answered %d %s", res.StatusCode, out)
	}
}
