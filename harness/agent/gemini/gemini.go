// Package gemini runs Gemini CLI as Case: `gemini -p PROMPT --output-format
// stream-json --yolo --skip-trust -m MODEL`, talking the Gemini API
// (streamGenerateContent?alt=sse) to GOOGLE_GEMINI_BASE_URL (the server
// root), with its home (settings, state) in GEMINI_CLI_HOME.
package gemini

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/cto-harness/cto-harness/harness/agent"
)

// Adapter is Gemini CLI's.
type Adapter struct{ Spec agent.Spec }

// settings select API-key auth and turn off usage statistics, telemetry and
// auto-update, so the agent contacts nothing but the model endpoint.
const settings = `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}
}
`

// Command builds the command line, environment and settings file.
func (a Adapter) Command(l agent.Launch) (agent.Command, error) {
	home := filepath.Join(l.State, "gemini-home")
	argv := append(append([]string(nil), l.Exe...), "-p", l.Prompt,
		"--output-format", "stream-json", "--yolo", "--skip-trust", "-m", l.Model)
	env := append(append([]string(nil), l.BaseEnv...),
		"GOOGLE_GEMINI_BASE_URL="+l.BaseURL,
		a.Spec.KeyVar+"="+l.Key,
		"GEMINI_CLI_HOME="+home,
		"GEMINI_CLI_NO_RELAUNCH=true",
	)
	return agent.Command{Argv: argv, Env: env, Dirs: []string{home, filepath.Join(home, ".gemini")},
		Files: []agent.File{{Path: filepath.Join(home, ".gemini", "settings.json"), Data: []byte(settings)}}}, nil
}

// Write and Shell are Gemini CLI's file-writing and shell tools.
var (
	Write = map[string]string{"write_file": "file_path", "replace": "file_path", "edit": "file_path"}
	Shell = map[string]string{"run_shell_command": "command"}
)

// NewTranslator reads Gemini CLI's stream-json.
func (a Adapter) NewTranslator(fixture string) agent.Translator {
	return &translator{fixture: fixture, res: agent.Result{Version: a.Spec.Version}, tools: map[string]string{}}
}

type translator struct {
	fixture string
	res     agent.Result
	inTurn  bool   // a model response is being streamed
	text    string // assistant text deltas, flushed as one case.log
	lastErr string
	tools   map[string]string // tool_id -> tool name, to name results
}

func (t *translator) Result() agent.Result { return t.res }

type line struct {
	Type       string                     `json:"type"`
	Model      string                     `json:"model"`
	Role       string                     `json:"role"`
	Content    string                     `json:"content"`
	ToolName   string                     `json:"tool_name"`
	ToolID     string                     `json:"tool_id"`
	Output     string                     `json:"output"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Severity   string                     `json:"severity"`
	Message    string                     `json:"message"`
	Status     string                     `json:"status"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats struct {
		Input    int64 `json:"input_tokens"`
		Output   int64 `json:"output_tokens"`
		Cached   int64 `json:"cached"`
		Duration int64 `json:"duration_ms"`
	} `json:"stats"`
}

// Line translates one line. Assistant text arrives in deltas; they are
// joined and logged when the turn moves on (a tool call or the result).
func (t *translator) Line(raw []byte) []agent.Event {
	var l line
	if !t.res.Decode(raw, &l) {
		return nil
	}
	switch l.Type {
	case "init":
		t.res.Started = true
		t.res.Model = l.Model
		return []agent.Event{agent.StartedEvent(agent.GeminiCLI, t.res.Version, l.Model)}
	case "message":
		if l.Role != "assistant" {
			return nil
		}
		t.turn()
		t.text += l.Content
		return nil
	case "tool_use":
		t.turn()
		out := t.flush()
		n := len(out)
		if f, ok := Write[l.ToolName]; ok {
			if p := str(l.Parameters[f]); p != "" {
				out = append(out, agent.WithCallID(agent.FileEvent(t.fixture, l.ToolName, p, &t.res), l.ToolID))
			}
		}
		if f, ok := Shell[l.ToolName]; ok {
			out = append(out, agent.WithCallID(agent.CommandEvent(l.ToolName, str(l.Parameters[f]), &t.res), l.ToolID))
		}
		if len(out) == n {
			out = append(out, agent.ToolCallEvent(l.ToolName, l.ToolID, l.Parameters))
		}
		t.tools[l.ToolID] = l.ToolName
		return out
	case "tool_result":
		t.inTurn = false
		text := l.Output
		if l.Error != nil && l.Error.Message != "" {
			text = strings.TrimSpace(text + "\n" + l.Error.Message)
		}
		return []agent.Event{agent.ToolResultEvent(t.tools[l.ToolID], l.ToolID, text, l.Status != "" && l.Status != "success")}
	case "error":
		if l.Severity == "error" || l.Severity == "" {
			t.lastErr = l.Message
		}
		return nil
	case "result":
		out := t.flush()
		r := &t.res
		r.Finished = true
		r.IsError = l.Status != "success"
		r.InputTokens, r.OutputTokens, r.CachedTokens = l.Stats.Input, l.Stats.Output, l.Stats.Cached
		if r.IsError {
			switch {
			case l.Error != nil && l.Error.Message != "":
				r.ErrorMessage = l.Error.Message
			case t.lastErr != "":
				r.ErrorMessage = t.lastErr
			default:
				r.ErrorMessage = "the agent reported status " + l.Status
			}
		}
		return append(out, agent.FinishedEvent(*r))
	}
	t.res.Unknown++
	return nil
}

// turn counts model responses: the first assistant output after the start
// or after a tool result begins a new one.
func (t *translator) turn() {
	if !t.inTurn {
		t.inTurn = true
		t.res.Turns++
	}
}

func (t *translator) flush() []agent.Event {
	if strings.TrimSpace(t.text) == "" {
		t.text = ""
		return nil
	}
	ev := agent.LogEvent(t.text)
	t.text = ""
	return []agent.Event{ev}
}

func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
