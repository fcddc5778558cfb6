package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// responsesRequest is the part of an OpenAI Responses request the server
// reads. Input is a string or a list of items.
type responsesRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"`
	Tools  []struct {
		Type       string         `json:"type"`
		Name       string         `json:"name"`
		Parameters map[string]any `json:"parameters"`
	} `json:"tools"`
}

func (q responsesRequest) conversation() conversation {
	var c conversation
	for _, t := range q.Tools {
		switch t.Type {
		case "function":
			c.tools = append(c.tools, tool{name: t.Name, kind: kindFunction, params: t.Parameters})
		case "custom":
			c.tools = append(c.tools, tool{name: t.Name, kind: kindCustom})
		}
	}
	var items []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(q.Input, &items) == nil {
		for _, it := range items {
			if strings.HasSuffix(it.Type, "_call_output") {
				c.results++
			}
		}
	}
	return c
}

func responsesUsage() map[string]any {
	return map[string]any{
		"input_tokens":          UsageInput,
		"input_tokens_details":  map[string]any{"cached_tokens": UsageCached},
		"output_tokens":         UsageOutput,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          UsageInput + UsageOutput,
	}
}

// serveResponses answers POST /v1/responses.
func serveResponses(ex *exchange) {
	var q responsesRequest
	if err := json.Unmarshal(ex.body, &q); err != nil {
		ex.badRequest(APIResponses, err)
		return
	}
	rp := ex.plan(q.conversation(), "call_ms_")
	if rp.errStatus != 0 {
		ex.writeError(APIResponses, rp.errStatus, rp.errBody, "")
		return
	}
	created := time.Now().Unix()
	var output []map[string]any
	if rp.text != "" {
		output = append(output, map[string]any{"id": "msg_ms", "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": rp.text, "annotations": []any{}}}})
	}
	if c := rp.call; c != nil {
		if c.kind == kindCustom {
			output = append(output, map[string]any{"id": "ctc_ms", "type": "custom_tool_call", "status": "completed",
				"call_id": c.id, "name": c.name, "input": c.input})
		} else {
			output = append(output, map[string]any{"id": "fc_ms", "type": "function_call", "status": "completed",
				"call_id": c.id, "name": c.name, "arguments": compactJSON(c.args)})
		}
	}
	response := func(status string, out []map[string]any) map[string]any {
		r := map[string]any{"id": "resp_ms", "object": "response", "created_at": created, "status": status,
			"model": q.Model, "output": out}
		if status == "completed" {
			r["usage"] = responsesUsage()
		}
		return r
	}
	if !q.Stream {
		ex.writeJSON(http.StatusOK, response("completed", output))
		return
	}
	s := startSSE(ex.w)
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		s.event(typ, fields)
	}
	emit("response.created", map[string]any{"response": response("in_progress", []map[string]any{})})
	emit("response.in_progress", map[string]any{"response": response("in_progress", []map[string]any{})})
	for i, it := range output {
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		added["status"] = "in_progress"
		id := it["id"]
		switch it["type"] {
		case "message":
			added["content"] = []any{}
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			emit("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			emit("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": rp.text})
			emit("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": rp.text})
			emit("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": rp.text, "annotations": []any{}}})
		case "function_call":
			added["arguments"] = ""
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": it["arguments"]})
			emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": it["arguments"]})
		case "custom_tool_call":
			added["input"] = ""
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			emit("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": it["input"]})
			emit("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": it["input"]})
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	if output == nil {
		output = []map[string]any{}
	}
	emit("response.completed", map[string]any{"response": response("completed", output)})
}
