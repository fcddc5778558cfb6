package agent

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"unicode/utf8"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Launch is what an adapter needs to start its agent.
type Launch struct {
	Exe     []string // the agent's executable (argv prefix): the installed release or the config's command
	Prompt  string
	Model   string
	BaseURL string // handed unchanged to the agent's own base-URL setting
	Key     string // the API key; passed only under Spec.KeyVar
	Fixture string // the working directory
	State   string // the agent's private state root inside Case's scratch (config, sessions, caches, temp)
	BaseEnv []string
	Root    bool // the harness runs as uid 0
}

// File is a file the adapter needs written before the agent starts (its
// settings). Path is absolute, inside Launch.State.
type File struct {
	Path string
	Data []byte
}

// Command is how to start one agent run.
type Command struct {
	Argv  []string
	Env   []string // the complete environment: BaseEnv plus the agent's own variables
	Dirs  []string // directories to create first (inside Launch.State)
	Files []File
	// Notes are facts the report records about the run, such as an agent
	// sandbox that was replaced by the harness's.
	Notes []string
}

// Adapter is one agent's knowledge: its command line and how to read its
// native stream.
type Adapter interface {
	Command(Launch) (Command, error)
	// NewTranslator reads one run's native stream; fixture is the agent's
	// working directory, against which tool-call paths are resolved.
	NewTranslator(fixture string) Translator
}

// Translator turns the agent's native stdout, line by line, into case.*
// events. Lines it does not know are kept (the stream file holds every
// line) and counted, never fatal.
type Translator interface {
	Line(line []byte) []Event
	Result() Result
}

// Event is one translated case.* event.
type Event struct {
	Type ctoharness.EventType
	Data map[string]any
}

// Result is what the stream said about the run as a whole.
type Result struct {
	Started      bool   // the init event was seen
	Finished     bool   // the final result was seen
	IsError      bool   // the final result (or a fatal stream error) reports a model or API error
	ErrorMessage string // the agent's own words for the error
	Version      string // as reported by the agent, if it does
	Model        string // as reported by the agent, if it does
	Turns        int
	InputTokens  int64
	OutputTokens int64
	CachedTokens int64
	APIMs        int64
	CostUSD      float64
	Commands     int // shell tool calls
	FileWrites   int // file-writing tool calls
	Escapes      []string
	Unknown      int // native lines of a type the translator does not know
	Malformed    int // stdout lines that are not JSON objects
}

// Decode parses one native stream line into v. A blank line is skipped and a
// line that is not JSON is counted in Malformed, never fatal; either way it
// reports false and the translator emits nothing for the line.
func (r *Result) Decode(raw []byte, v any) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		r.Malformed++
		return false
	}
	return true
}

// Relative resolves a tool call's path against the fixture: the
// fixture-relative slash path and true, or the cleaned absolute path and
// false when it lies outside the fixture (an attempted escape).
func Relative(fixture, p string) (string, bool) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(fixture, p)
	}
	p = filepath.Clean(p)
	rel, err := filepath.Rel(fixture, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p, false
	}
	return filepath.ToSlash(rel), true
}

// FileEvent is the case.file_changed event of a file-writing tool call, or
// the record of an attempted escape.
func FileEvent(fixture, tool, p string, res *Result) Event {
	res.FileWrites++
	rel, inside := Relative(fixture, p)
	if !inside {
		res.Escapes = append(res.Escapes, rel)
		return Event{Type: ctoharness.EvCaseFileChanged, Data: map[string]any{"path": rel, "tool": tool, "outside_fixture": true,
			"note": "attempted write outside the fixture"}}
	}
	return Event{Type: ctoharness.EvCaseFileChanged, Data: map[string]any{"path": rel, "tool": tool}}
}

// CommandEvent is the case.command event of a shell tool call.
func CommandEvent(tool, cmd string, res *Result) Event {
	res.Commands++
	return Event{Type: ctoharness.EvCaseCommand, Data: map[string]any{"command": cmd, "tool": tool}}
}

// Conversation kinds of case.log events beyond assistant text: a tool call
// that neither writes nor runs a shell command (a read, a search), and the
// result of any tool call. The page shows the whole conversation from them.
const (
	KindToolCall   = "tool_call"
	KindToolResult = "tool_result"
)

// maxToolText bounds a tool call's arguments and a tool result's output in
// one event; the agent's stream file holds them whole.
const maxToolText = 4000

func capText(s string) (string, bool) {
	if len(s) <= maxToolText {
		return s, false
	}
	cut := maxToolText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…", true
}

// ToolCallEvent is the case.log event of a tool call that is not a write or
// a shell command, with its arguments.
func ToolCallEvent(tool, id string, input any) Event {
	args := ""
	switch v := input.(type) {
	case string:
		args = v
	case nil:
	default:
		b, _ := json.Marshal(v)
		args = string(b)
	}
	args, cut := capText(args)
	d := map[string]any{"message": tool + " " + args, "kind": KindToolCall, "tool": tool, "arguments": args}
	if id != "" {
		d["call_id"] = id
	}
	if cut {
		d["truncated"] = true
	}
	return Event{Type: ctoharness.EvCaseLog, Data: d}
}

// ToolResultEvent is the case.log event of a tool call's result: its
// output (capped) and whether the tool reported an error.
func ToolResultEvent(tool, id, output string, isError bool) Event {
	out, cut := capText(output)
	d := map[string]any{"message": out, "kind": KindToolResult, "is_error": isError}
	if tool != "" {
		d["tool"] = tool
	}
	if id != "" {
		d["call_id"] = id
	}
	if cut {
		d["truncated"] = true
	}
	return Event{Type: ctoharness.EvCaseLog, Data: d}
}

// WithCallID adds the tool call's id to a file or command event, so the
// page can pair it with its result.
func WithCallID(ev Event, id string) Event {
	if id != "" {
		ev.Data["call_id"] = id
	}
	return ev
}

// LogEvent is the case.log event of assistant text.
func LogEvent(text string) Event {
	const max = 4000
	if len(text) > max {
		text = text[:max] + "…"
	}
	return Event{Type: ctoharness.EvCaseLog, Data: map[string]any{"message": text}}
}

// FinishedEvent is the case.finished event of the final result.
func FinishedEvent(res Result) Event {
	status := "success"
	if res.IsError {
		status = "error"
	}
	d := map[string]any{"status": status, "turns": res.Turns, "input_tokens": res.InputTokens,
		"output_tokens": res.OutputTokens, "cached_tokens": res.CachedTokens}
	if res.ErrorMessage != "" {
		d["error"] = res.ErrorMessage
	}
	return Event{Type: ctoharness.EvCaseFinished, Data: d}
}

// StartedEvent is the case.started event of the init event.
func StartedEvent(name Name, version, model string) Event {
	return Event{Type: ctoharness.EvCaseStarted, Data: map[string]any{"agent": string(name), "version": version, "model": model}}
}
