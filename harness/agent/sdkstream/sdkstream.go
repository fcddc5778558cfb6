// Package sdkstream reads the stream-json message stream that Claude Code
// writes with --output-format stream-json and that Qwen Code writes in the
// same shape: one JSON object per line, typed "system" (subtype "init"
// first), "assistant" and "user" messages whose content blocks carry text,
// tool_use and tool_result, optional "stream_event" partials, and a final
// "result". The agents differ in their tool names, which the Tools table
// gives.
package sdkstream

import (
	"encoding/json"
	"strings"

	"github.com/cto-harness/cto-harness/harness/agent"
)

// Tools says which tool calls write files and which run shell commands, and
// which input field holds the path or the command.
type Tools struct {
	Write map[string][]string // tool name -> input fields holding the path (first non-empty wins)
	Shell map[string]string   // tool name -> input field holding the command
}

// Config is one agent's dialect.
type Config struct {
	Agent         agent.Name
	PinnedVersion string // used when the stream does not say
	VersionField  string // the init message's version field, e.g. "claude_code_version"
	Tools         Tools
}

// Translator is one run's reader.
type Translator struct {
	cfg     Config
	fixture string
	res     agent.Result
	tools   map[string]string // tool_use id -> tool name, to name results
}

// New starts reading one run.
func New(cfg Config, fixture string) *Translator {
	return &Translator{cfg: cfg, fixture: fixture, res: agent.Result{Version: cfg.PinnedVersion}, tools: map[string]string{}}
}

// Result is what the stream said so far.
func (t *Translator) Result() agent.Result { return t.res }

type line struct {
	Type    string          `json:"type"`
	Subtype string          `json:"subtype"`
	Model   string          `json:"model"`
	Message json.RawMessage `json:"message"`
	// result
	IsError     bool            `json:"is_error"`
	NumTurns    int             `json:"num_turns"`
	DurationAPI int64           `json:"duration_api_ms"`
	Cost        float64         `json:"total_cost_usd"`
	Result      json.RawMessage `json:"result"`
	Error       json.RawMessage `json:"error"`
	Usage       usage           `json:"usage"`
}

type usage struct {
	Input       int64 `json:"input_tokens"`
	Output      int64 `json:"output_tokens"`
	CacheRead   int64 `json:"cache_read_input_tokens"`
	CacheCreate int64 `json:"cache_creation_input_tokens"`
}

type message struct {
	Content []block `json:"content"`
}

type block struct {
	Type  string                     `json:"type"`
	Text  string                     `json:"text"`
	ID    string                     `json:"id"`
	Name  string                     `json:"name"`
	Input map[string]json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // a string or a list of text blocks
	IsError   bool            `json:"is_error"`
}

// Line translates one stdout line.
func (t *Translator) Line(raw []byte) []agent.Event {
	var l line
	if !t.res.Decode(raw, &l) {
		return nil
	}
	switch l.Type {
	case "system":
		if l.Subtype != "init" {
			return nil
		}
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(raw, &fields)
		if v := str(fields[t.cfg.VersionField]); v != "" && v != "unknown" {
			t.res.Version = v
		}
		t.res.Model = l.Model
		t.res.Started = true
		return []agent.Event{agent.StartedEvent(t.cfg.Agent, t.res.Version, l.Model)}
	case "assistant":
		return t.assistant(l.Message)
	case "user":
		return t.results(l.Message)
	case "stream_event", "control_request", "control_response", "rate_limit_event", "tool_progress", "keep_alive":
		return nil
	case "result":
		return []agent.Event{t.result(l)}
	}
	t.res.Unknown++
	return nil
}

func (t *Translator) assistant(raw json.RawMessage) []agent.Event {
	var m message
	if json.Unmarshal(raw, &m) != nil {
		t.res.Malformed++
		return nil
	}
	var out []agent.Event
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) != "" {
				out = append(out, agent.LogEvent(b.Text))
			}
		case "tool_use":
			t.tools[b.ID] = b.Name
			n := len(out)
			if fields, ok := t.cfg.Tools.Write[b.Name]; ok {
				for _, f := range fields {
					if p := str(b.Input[f]); p != "" {
						out = append(out, agent.WithCallID(agent.FileEvent(t.fixture, b.Name, p, &t.res), b.ID))
						break
					}
				}
			}
			if field, ok := t.cfg.Tools.Shell[b.Name]; ok {
				out = append(out, agent.WithCallID(agent.CommandEvent(b.Name, str(b.Input[field]), &t.res), b.ID))
			}
			if len(out) == n {
				out = append(out, agent.ToolCallEvent(b.Name, b.ID, b.Input))
			}
		}
	}
	return out
}

// results translates a user message's tool results.
func (t *Translator) results(raw json.RawMessage) []agent.Event {
	var m message
	if json.Unmarshal(raw, &m) != nil {
		return nil // a plain-text user message: the prompt
	}
	var out []agent.Event
	for _, b := range m.Content {
		if b.Type == "tool_result" {
			out = append(out, agent.ToolResultEvent(t.tools[b.ToolUseID], b.ToolUseID, contentText(b.Content), b.IsError))
		}
	}
	return out
}

// contentText is a tool result's content: a string, or the text of its
// blocks.
func contentText(raw json.RawMessage) string {
	if s := str(raw); s != "" {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (t *Translator) result(l line) agent.Event {
	r := &t.res
	r.Finished = true
	r.IsError = l.IsError || strings.HasPrefix(l.Subtype, "error")
	r.Turns = l.NumTurns
	r.InputTokens = l.Usage.Input
	r.OutputTokens = l.Usage.Output
	r.CachedTokens = l.Usage.CacheRead
	r.APIMs = l.DurationAPI
	r.CostUSD = l.Cost
	if r.IsError {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(l.Error, &e) == nil && e.Message != "" {
			r.ErrorMessage = e.Message
		} else if s := str(l.Result); s != "" {
			r.ErrorMessage = s
		} else {
			r.ErrorMessage = "the agent reported an error result (" + l.Subtype + ")"
		}
	}
	return agent.FinishedEvent(*r)
}

func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
