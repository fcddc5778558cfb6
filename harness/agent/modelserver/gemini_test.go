package modelserver

import (
	"net/http"
	"strings"
	"testing"
)

const geminiTools = `[{"functionDeclarations":[{"name":"write_file","parametersJsonSchema":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}}}},
{"name":"run_shell_command","parametersJsonSchema":{"type":"object","properties":{"command":{"type":"string"},"is_background":{"type":"boolean"}}}}]}]`

const geminiSystem = `{"parts":[{"text":"- **Workspace Directories:**\n  - /tmp/g/work\n- **Directory Structure:**"}]}`

func TestGeminiTurns(t *testing.T) {
	srv := newServer(t,
		Turn{Action: ActionWrite, Path: "a.txt", Content: "x\n"},
		Turn{Action: ActionShell, Command: "make"},
		Turn{Action: ActionLeakKey, Path: "k.txt"},
		Turn{Action: ActionText, Text: "bye"},
	)
	cases := []struct {
		results int
		want    string // the candidate's parts
	}{
		{0, `[{"functionCall":{"args":{"content":"x\n","file_path":"/tmp/g/work/a.txt"},"name":"write_file"}}]`},
		{1, `[{"functionCall":{"args":{"command":"make"},"name":"run_shell_command"}}]`},
		{2, `[{"functionCall":{"args":{"content":"AIza-test","file_path":"/tmp/g/work/k.txt"},"name":"write_file"}}]`},
		{3, `[{"text":"bye"}]`},
	}
	for _, c := range cases {
		contents := []string{`{"role":"user","parts":[{"text":"go"}]}`}
		for i := 0; i < c.results; i++ {
			contents = append(contents, `{"role":"model","parts":[{"functionCall":{"name":"write_file","args":{}}}]}`,
				`{"role":"user","parts":[{"functionResponse":{"name":"write_file","response":{"output":"ok"}}}]}`)
		}
		body := `{"contents":[` + strings.Join(contents, ",") + `],"systemInstruction":` + geminiSystem + `,"tools":` + geminiTools + `}`
		res, out := post(t, srv, "/v1beta/models/gm:streamGenerateContent?alt=sse", map[string]string{"x-goog-api-key": "AIza-test"}, body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("results=%d: status %d: %s", c.results, res.StatusCode, out)
		}
		ev := parseSSE(t, out)
		if len(ev) != 1 {
			t.Fatalf("results=%d: want one chunk, got %v", c.results, ev)
		}
		m := decode(t, ev[0].data)
		cand := m["candidates"].([]any)[0].(map[string]any)
		if got := compactJSON(cand["content"].(map[string]any)["parts"]); got != c.want {
			t.Errorf("results=%d: parts %s, want %s", c.results, got, c.want)
		}
		u := m["usageMetadata"].(map[string]any)
		if cand["finishReason"] != "STOP" || u["promptTokenCount"] != float64(UsageInput) || m["modelVersion"] != "gm" {
			t.Errorf("results=%d: chunk %s", c.results, ev[0].data)
		}
	}
	if q := srv.Requests()[0]; q.API != APIGemini || !strings.Contains(q.Query, "alt=sse") || q.Header.Get("X-Goog-Api-Key") != Redacted {
		t.Errorf("recorded %+v", q)
	}
}

func TestGeminiSideRequests(t *testing.T) {
	srv := newServer(t, Turn{Action: ActionError, Status: 400})
	// Structured side request (next-speaker check): JSON that fits the schema.
	_, out := post(t, srv, "/v1beta/models/gm:generateContent", nil,
		`{"contents":[],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"reasoning":{"type":"string"},"next_speaker":{"type":"string","enum":["user","model"]}}}}}`)
	text := decode(t, out)["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string)
	if got := decode(t, text); got["next_speaker"] != "user" || got["reasoning"] == nil {
		t.Fatalf("next-speaker answer %s", text)
	}
	_, out = post(t, srv, "/v1beta/models/gm:countTokens", nil, `{"contents":[{"parts":[{"text":"hello"}]}]}`)
	if n, _ := decode(t, out)["totalTokens"].(float64); n <= 0 {
		t.Fatalf("countTokens answered %s", out)
	}
	res, out := post(t, srv, "/v1beta/models/gm:streamGenerateContent?alt=sse", nil, `{"contents":[],"tools":`+geminiTools+`}`)
	if e := decode(t, out)["error"].(map[string]any); res.StatusCode != 400 || e["status"] != "INVALID_ARGUMENT" || e["code"] != float64(400) {
		t.Fatalf("scripted error answered %d %s", res.StatusCode, out)
	}
}
