package modelmeter

import (
	"bytes"
	"encoding/json"
	"strings"
)

// API is the wire protocol of one model request, from its path.
type API string

// The model APIs the meter reads usage from.
const (
	APIChat      API = "openai-chat"        // POST …/chat/completions
	APIResponses API = "openai-responses"   // POST …/responses
	APIAnthropic API = "anthropic-messages" // POST …/messages
	APIGemini    API = "gemini"             // POST …/models/M:(stream)generateContent
	APINone      API = ""                   // not a model request (listings, token counts)
)

// Classify names the API a request speaks; APINone for anything that is not
// a model request (it is relayed, but is not a turn and carries no usage).
func Classify(method, path string) API {
	if method != "POST" {
		return APINone
	}
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return APIChat
	case strings.HasSuffix(path, "/responses"):
		return APIResponses
	case strings.HasSuffix(path, "/messages"):
		return APIAnthropic
	case strings.Contains(path, "/models/") && (strings.HasSuffix(path, ":streamGenerateContent") || strings.HasSuffix(path, ":generateContent")):
		return APIGemini
	}
	return APINone
}

// Usage is one model request's tokens in the shape the report uses for
// every agent: the prompt split into what was billed at the full input rate
// (InputUncached), what was read from the provider's prompt cache
// (CacheRead) and what was written to it (CacheWrite); their sum is the
// whole prompt. OpenAI and Gemini count cached tokens inside their prompt
// total, Anthropic outside it: the split undoes both.
type Usage struct {
	InputUncached int64 `json:"input_uncached_tokens"`
	CacheRead     int64 `json:"cache_read_tokens"`
	CacheWrite    int64 `json:"cache_write_tokens"`
	Output        int64 `json:"output_tokens"`
}

// Add sums two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.InputUncached + v.InputUncached, u.CacheRead + v.CacheRead, u.CacheWrite + v.CacheWrite, u.Output + v.Output}
}

// reader collects the usage a response reports, from a JSON body or an SSE
// stream, fed in chunks as they are relayed. Later events overwrite earlier
// values field by field (Anthropic's message_delta carries only the final
// output count; streamed Gemini chunks carry running totals).
type reader struct {
	api  API
	line []byte
	body []byte // a non-streamed body, kept up to maxBody to parse whole
	seen bool

	prompt, cacheRead, cacheWrite, uncached, output, thoughts *int64
}

const (
	maxLine = 4 << 20
	maxBody = 8 << 20
)

func (r *reader) write(p []byte) {
	if len(r.body) < maxBody {
		r.body = append(r.body, p[:min(len(p), maxBody-len(r.body))]...)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(r.line) < maxLine {
				r.line = append(r.line, p[:min(len(p), maxLine-len(r.line))]...)
			}
			return
		}
		r.feed(append(r.line, p[:i]...))
		r.line = r.line[:0]
		p = p[i+1:]
	}
}

// finish parses what is left: the last line, or a body that was one JSON
// document over several lines.
func (r *reader) finish() {
	if len(r.line) > 0 {
		r.feed(r.line)
		r.line = nil
	}
	if !r.seen && len(r.body) > 0 {
		r.feed(r.body)
	}
}

func (r *reader) feed(l []byte) {
	l = bytes.TrimSpace(l)
	l = bytes.TrimSpace(bytes.TrimPrefix(l, []byte("data:")))
	if len(l) > 0 && l[0] == '[' { // Gemini's non-SSE stream is a JSON array
		var arr []json.RawMessage
		if json.Unmarshal(l, &arr) == nil {
			for _, e := range arr {
				r.feed(e)
			}
		}
		return
	}
	if len(l) == 0 || l[0] != '{' {
		return
	}
	var ev struct {
		Usage    *usageFields                  `json:"usage"`
		Message  *struct{ Usage *usageFields } `json:"message"`  // Anthropic message_start
		Response *struct{ Usage *usageFields } `json:"response"` // OpenAI Responses response.completed
		Gemini   *struct {
			Prompt     *int64 `json:"promptTokenCount"`
			Candidates *int64 `json:"candidatesTokenCount"`
			Cached     *int64 `json:"cachedContentTokenCount"`
			Thoughts   *int64 `json:"thoughtsTokenCount"`
		} `json:"usageMetadata"`
	}
	if json.Unmarshal(l, &ev) != nil {
		return
	}
	for _, u := range []*usageFields{ev.Usage, msgUsage(ev.Message), msgUsage(ev.Response)} {
		if u != nil {
			r.apply(u)
		}
	}
	if g := ev.Gemini; g != nil {
		r.seen = true
		set(&r.prompt, g.Prompt)
		set(&r.cacheRead, g.Cached)
		set(&r.output, g.Candidates)
		set(&r.thoughts, g.Thoughts)
	}
}

func msgUsage(m *struct{ Usage *usageFields }) *usageFields {
	if m == nil {
		return nil
	}
	return m.Usage
}

// usageFields are the usage fields of the three JSON shapes that use a
// "usage" object.
type usageFields struct {
	// OpenAI Chat Completions
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	PromptDetails    *struct {
		Cached *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// Anthropic Messages and OpenAI Responses
	InputTokens  *int64 `json:"input_tokens"`
	OutputTokens *int64 `json:"output_tokens"`
	CacheRead    *int64 `json:"cache_read_input_tokens"`
	CacheWrite   *int64 `json:"cache_creation_input_tokens"`
	InputDetails *struct {
		Cached *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

func (r *reader) apply(u *usageFields) {
	r.seen = true
	switch r.api {
	case APIAnthropic:
		set(&r.uncached, u.InputTokens)
		set(&r.cacheRead, u.CacheRead)
		set(&r.cacheWrite, u.CacheWrite)
		set(&r.output, u.OutputTokens)
	case APIResponses:
		set(&r.prompt, u.InputTokens)
		if u.InputDetails != nil {
			set(&r.cacheRead, u.InputDetails.Cached)
		}
		set(&r.output, u.OutputTokens)
	default: // Chat Completions, and any OpenAI-compatible server
		set(&r.prompt, u.PromptTokens)
		if u.PromptDetails != nil {
			set(&r.cacheRead, u.PromptDetails.Cached)
		}
		set(&r.output, u.CompletionTokens)
	}
}

func set(dst **int64, v *int64) {
	if v != nil {
		x := *v
		*dst = &x
	}
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// usage is what the response reported, and whether it reported any.
func (r *reader) usage() (Usage, bool) {
	u := Usage{CacheRead: val(r.cacheRead), CacheWrite: val(r.cacheWrite), Output: val(r.output) + val(r.thoughts)}
	if r.api == APIAnthropic {
		u.InputUncached = val(r.uncached)
	} else {
		u.InputUncached = max(val(r.prompt)-u.CacheRead-u.CacheWrite, 0)
	}
	return u, r.seen
}
