package modelserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// codexTools are codex's tools for a model it knows: apply_patch is a custom
// (free-form) tool.
const codexTools = `[{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"},"workdir":{"type":"string"}}}},
{"type":"custom","name":"apply_patch","format":{"type":"grammar"}},{"type":"web_search"}]`

const codexEnv = `{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/tmp/x/work</cwd>\n</environment_context>"}]}`

// responsesStream parses a streamed Responses answer back into its output
// items (from response.output_item.done) and the completed response.
func responsesStream(t *testing.T, body string) (items []map[string]any, completed map[string]any) {
	t.Helper()
	ev := parseSSE(t, body)
	for i, e := range ev {
		m := decode(t, e.data)
		if m["type"] != e.name || m["sequence_number"] != float64(i) {
			t.Fatalf("event %d %s: type %v sequence %v", i, e.name, m["type"], m["sequence_number"])
		}
		switch e.name {
		case "response.output_item.done":
			items = append(items, m["item"].(map[string]any))
		case "response.completed":
			completed = m["response"].(map[string]any)
		}
	}
	if ev[0].name != "response.created" || completed == nil {
		t.Fatalf("stream is not response.created … response.completed: %v", ev)
	}
	return items, completed
}

func TestResponsesTurns(t *testing.T) {
	srv := newServer(t,
		Turn{Action: ActionWrite, Path: "a.txt", Content: "x\ny\n"},
		Turn{Action: ActionShell, Command: "go test ./..."},
		Turn{Action: ActionText, Text: "done here"},
	)
	cases := []struct {
		results int
		tools   string
		want    string // type and payload of the last output item
	}{
		{0, codexTools, "custom_tool_call apply_patch *** Begin Patch\n*** Add File: /tmp/x/work/a.txt\n+x\n+y\n*** End Patch\n"},
		{1, codexTools, `function_call exec_command {"cmd":"go test ./...","workdir":"/tmp/x/work"}`},
		{2, codexTools, "message  done here"},
		// Without apply_patch (an unknown model) a write goes through the shell.
		{0, `[{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}]`,
			`function_call exec_command {"cmd":"printf '%s' 'x\ny\n' > '/tmp/x/work/a.txt'"}`},
	}
	srvEmpty := newServer(t, Turn{Action: ActionWrite, Path: "empty.txt"})
	_, out := post(t, srvEmpty, "/v1/responses", nil, `{"model":"m","stream":true,"input":[`+codexEnv+`],"tools":`+codexTools+`}`)
	items, _ := responsesStream(t, out)
	if it := items[len(items)-1]; it["name"] != "exec_command" || it["arguments"] != `{"cmd":"printf '%s' '' > '/tmp/x/work/empty.txt'"}` {
		t.Errorf("an empty file is not written through the shell: %v", it)
	}
	for _, c := range cases {
		input := []string{codexEnv}
		for i := 0; i < c.results; i++ {
			input = append(input, `{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"p"}`,
				`{"type":"custom_tool_call_output","call_id":"c","output":"ok"}`)
		}
		body := `{"model":"gpt-5.5","stream":true,"input":[` + strings.Join(input, ",") + `],"tools":` + c.tools + `}`
		res, out := post(t, srv, "/v1/responses", map[string]string{"Authorization": "Bearer sk-resp"}, body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("results=%d: status %d: %s", c.results, res.StatusCode, out)
		}
		items, completed := responsesStream(t, out)
		last := items[len(items)-1]
		var got string
		switch last["type"] {
		case "custom_tool_call":
			got = "custom_tool_call " + last["name"].(string) + " " + last["input"].(string)
		case "function_call":
			got = "function_call " + last["name"].(string) + " " + last["arguments"].(string)
		case "message":
			got = "message  " + last["content"].([]any)[0].(map[string]any)["text"].(string)
		}
		if got != c.want {
			t.Errorf("results=%d: last item %q, want %q", c.results, got, c.want)
		}
		u := completed["usage"].(map[string]any)
		if u["input_tokens"] != float64(UsageInput) || u["input_tokens_details"].(map[string]any)["cached_tokens"] != float64(UsageCached) {
			t.Errorf("results=%d: usage %v", c.results, u)
		}
	}
}

func TestResponsesErrorAndModels(t *testing.T) {
	srv := newServer(t, Turn{Action: ActionError, Status: 400, Body: `{"error":{"message":"nope"}}`})
	res, out := post(t, srv, "/v1/responses", nil, `{"model":"m","stream":true,"input":[],"tools":`+codexTools+`}`)
	if res.StatusCode != 400 || out != `{"error":{"message":"nope"}}` {
		t.Fatalf("scripted error answered %d %s", res.StatusCode, out)
	}
	// Non-streaming answer.
	srv2 := newServer(t, Turn{Action: ActionShell, Command: "true"})
	res, out = post(t, srv2, "/v1/responses", nil, `{"model":"m","input":"hi","tools":`+codexTools+`}`)
	r := decode(t, out)
	item := r["output"].([]any)[0].(map[string]any)
	if res.StatusCode != 200 || r["status"] != "completed" || item["type"] != "function_call" || item["arguments"] != `{"cmd":"true"}` || r["usage"] == nil {
		t.Fatalf("non-stream answer %d %s", res.StatusCode, out)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if m := decode(t, rec.Body.String()); rec.Code != 200 || m["object"] != "list" {
		t.Fatalf("models answered %d %s", rec.Code, rec.Body.String())
	}
	if q := srv.Requests()[1]; q.API != APIOther || q.Method != http.MethodGet || q.Turn != -1 {
		t.Fatalf("models request recorded as %+v", q)
	}
}
