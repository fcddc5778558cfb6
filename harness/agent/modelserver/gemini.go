package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
)

// geminiRequest is the part of a Gemini generateContent request the server
// reads.
type geminiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			FunctionResponse json.RawMessage `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string         `json:"name"`
			Parameters           map[string]any `json:"parameters"`
			ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string         `json:"responseMimeType"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		ResponseSchema     map[string]any `json:"responseSchema"`
	} `json:"generationConfig"`
}

func (q geminiRequest) conversation() conversation {
	var c conversation
	for _, t := range q.Tools {
		for _, f := range t.FunctionDeclarations {
			p := f.ParametersJSONSchema
			if p == nil {
				p = f.Parameters
			}
			c.tools = append(c.tools, tool{name: f.Name, kind: kindFunction, params: p})
		}
	}
	for _, m := range q.Contents {
		for _, p := range m.Parts {
			if len(p.FunctionResponse) > 0 && string(p.FunctionResponse) != "null" {
				c.results++
			}
		}
	}
	return c
}

// jsonAnswer answers gemini-cli's structured side requests (next-speaker
// check, model routing) with an object that fits their schema.
func (q geminiRequest) jsonAnswer() string {
	schema := q.GenerationConfig.ResponseJSONSchema
	if schema == nil {
		schema = q.GenerationConfig.ResponseSchema
	}
	props, _ := schema["properties"].(map[string]any)
	out := map[string]any{}
	for k, v := range props {
		m, _ := v.(map[string]any)
		typ, _ := m["type"].(string)
		switch {
		case k == "next_speaker":
			out[k] = "user"
		case strings.EqualFold(typ, "boolean"):
			out[k] = false
		case strings.EqualFold(typ, "number"), strings.EqualFold(typ, "integer"):
			out[k] = 0
		case strings.EqualFold(typ, "array"):
			out[k] = []any{}
		default:
			if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
				out[k] = enum[0]
			} else {
				out[k] = DefaultFinalText
			}
		}
	}
	return compactJSON(out)
}

func geminiUsage() map[string]any {
	return map[string]any{
		"promptTokenCount":        UsageInput,
		"candidatesTokenCount":    UsageOutput,
		"totalTokenCount":         UsageInput + UsageOutput,
		"cachedContentTokenCount": UsageCached,
	}
}

// serveGemini answers POST /v1beta/models/MODEL:streamGenerateContent and
// :generateContent.
func serveGemini(ex *exchange) {
	var q geminiRequest
	if err := json.Unmarshal(ex.body, &q); err != nil {
		ex.badRequest(APIGemini, err)
		return
	}
	model, _, _ := strings.Cut(ex.r.URL.Path[strings.LastIndex(ex.r.URL.Path, "/models/")+len("/models/"):], ":")
	var rp reply
	if q.GenerationConfig.ResponseMimeType == "application/json" && len(q.Tools) == 0 {
		rp = reply{text: q.jsonAnswer()}
	} else {
		rp = ex.plan(q.conversation(), "")
	}
	if rp.errStatus != 0 {
		ex.writeError(APIGemini, rp.errStatus, rp.errBody, "")
		return
	}
	var parts []any
	if rp.text != "" {
		parts = append(parts, map[string]any{"text": rp.text})
	}
	if rp.call != nil {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": rp.call.name, "args": rp.call.args}})
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": geminiUsage(),
		"modelVersion":  model,
		"responseId":    "ms-response",
	}
	if !strings.HasSuffix(ex.r.URL.Path, ":streamGenerateContent") {
		ex.writeJSON(http.StatusOK, resp)
		return
	}
	s := startSSE(ex.w)
	s.event("", resp)
}
