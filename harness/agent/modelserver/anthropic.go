package modelserver

import (
	"encoding/json"
	"net/http"
)

// anthropicRequest is the part of an Anthropic Messages request the server
// reads. Content is a string or a list of blocks.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string         `json:"name"`
		Type        string         `json:"type"`
		InputSchema map[string]any `json:"input_schema"`
	} `json:"tools"`
}

func (q anthropicRequest) conversation() conversation {
	var c conversation
	for _, t := range q.Tools {
		if t.Name != "" && t.InputSchema != nil {
			c.tools = append(c.tools, tool{name: t.Name, kind: kindFunction, params: t.InputSchema})
		}
	}
	for _, m := range q.Messages {
		var blocks []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				c.results++
			}
		}
	}
	return c
}

func anthropicUsage(output int) map[string]any {
	return map[string]any{
		"input_tokens":                UsageInput - UsageCached,
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     UsageCached,
		"output_tokens":               output,
	}
}

// serveAnthropic answers POST /v1/messages (claude-code adds ?beta=true).
func serveAnthropic(ex *exchange) {
	var q anthropicRequest
	if err := json.Unmarshal(ex.body, &q); err != nil {
		ex.badRequest(APIAnthropic, err)
		return
	}
	rp := ex.plan(q.conversation(), "toolu_ms_")
	if rp.errStatus != 0 {
		ex.writeError(APIAnthropic, rp.errStatus, rp.errBody, "")
		return
	}
	id := "msg_ms"
	stop := "end_turn"
	var content []any
	if rp.text != "" {
		content = append(content, map[string]any{"type": "text", "text": rp.text})
	}
	if rp.call != nil {
		stop = "tool_use"
		content = append(content, map[string]any{"type": "tool_use", "id": rp.call.id, "name": rp.call.name, "input": rp.call.args})
	}
	if !q.Stream {
		if content == nil {
			content = []any{}
		}
		ex.writeJSON(http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": q.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(UsageOutput)})
		return
	}
	s := startSSE(ex.w)
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": q.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(1)}})
	idx := 0
	if rp.text != "" {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": rp.text}})
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if rp.call != nil {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": rp.call.id, "name": rp.call.name, "input": map[string]any{}}})
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": compactJSON(rp.call.args)}})
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": UsageOutput}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}
