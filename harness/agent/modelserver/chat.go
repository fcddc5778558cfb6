package modelserver

import (
	"encoding/json"
	"net/http"
	"time"
)

// chatRequest is the part of an OpenAI Chat Completions request the server
// reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func (q chatRequest) conversation() conversation {
	var c conversation
	for _, t := range q.Tools {
		if t.Function.Name != "" {
			c.tools = append(c.tools, tool{name: t.Function.Name, kind: kindFunction, params: t.Function.Parameters})
		}
	}
	for _, m := range q.Messages {
		if m.Role == "tool" {
			c.results++
		}
	}
	return c
}

func chatUsage() map[string]any {
	return map[string]any{
		"prompt_tokens":         UsageInput,
		"completion_tokens":     UsageOutput,
		"total_tokens":          UsageInput + UsageOutput,
		"prompt_tokens_details": map[string]any{"cached_tokens": UsageCached},
	}
}

// serveChat answers POST /v1/chat/completions.
func serveChat(ex *exchange) {
	var q chatRequest
	if err := json.Unmarshal(ex.body, &q); err != nil {
		ex.badRequest(APIChat, err)
		return
	}
	rp := ex.plan(q.conversation(), "call_ms_")
	if rp.errStatus != 0 {
		ex.writeError(APIChat, rp.errStatus, rp.errBody, "")
		return
	}
	id := "chatcmpl-ms"
	created := time.Now().Unix()
	finish := "stop"
	var calls []any
	if rp.call != nil {
		finish = "tool_calls"
		calls = []any{map[string]any{"index": 0, "id": rp.call.id, "type": "function",
			"function": map[string]any{"name": rp.call.name, "arguments": compactJSON(rp.call.args)}}}
	}
	if !q.Stream {
		msg := map[string]any{"role": "assistant", "content": nilIfEmpty(rp.text)}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		ex.writeJSON(http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": q.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   chatUsage(),
		})
		return
	}
	s := startSSE(ex.w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": q.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	s.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if rp.text != "" {
		s.event("", chunk(map[string]any{"content": rp.text}, nil))
	}
	if rp.call != nil {
		s.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": rp.call.id, "type": "function",
			"function": map[string]any{"name": rp.call.name, "arguments": ""}}}}, nil))
		s.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
			"function": map[string]any{"arguments": compactJSON(rp.call.args)}}}}, nil))
	}
	s.event("", chunk(map[string]any{}, finish))
	s.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": q.Model,
		"choices": []any{}, "usage": chatUsage()})
	s.event("", "[DONE]")
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
