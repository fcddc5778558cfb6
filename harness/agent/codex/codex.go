// Package codex runs Codex CLI as Case: `codex exec --json` with a model
// provider of its own pointing at the base URL (Codex ignores
// OPENAI_BASE_URL and speaks only the OpenAI Responses API), its state in
// CODEX_HOME, and its own sandbox switched off (-s danger-full-access):
// Codex's bubblewrap sandbox fails silently under a Landlock parent (no
// command runs, exit 0), so the harness's sandbox takes its place.
package codex

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cto-harness/cto-harness/harness/agent"
)

// Adapter is Codex CLI's.
type Adapter struct{ Spec agent.Spec }

// provider is the model provider id the harness defines on the command line.
const provider = "cto_harness"

// SandboxNote is recorded in the report of every Codex run.
const SandboxNote = "codex's own sandbox was replaced by the harness's: it runs with -s danger-full-access inside the harness sandbox, because its bubblewrap sandbox fails silently under a Landlock parent"

// Command builds the command line and environment.
func (a Adapter) Command(l agent.Launch) (agent.Command, error) {
	home := filepath.Join(l.State, "codex-home")
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // a TOML basic string
	argv := append(append([]string(nil), l.Exe...), "exec", "--json", "-m", l.Model,
		"-c", "model_provider="+provider,
		"-c", "model_providers."+provider+"={name="+q("cto-harness endpoint")+",base_url="+q(l.BaseURL)+",env_key="+q(a.Spec.KeyVar)+",wire_api=\"responses\"}",
		"-c", "analytics.enabled=false",
		"--disable", "plugins",
		"-s", "danger-full-access",
		l.Prompt)
	env := append(append([]string(nil), l.BaseEnv...),
		a.Spec.KeyVar+"="+l.Key,
		"CODEX_HOME="+home,
	)
	return agent.Command{Argv: argv, Env: env, Dirs: []string{home}, Notes: []string{SandboxNote}}, nil
}

// NewTranslator reads `codex exec --json`.
func (a Adapter) NewTranslator(fixture string) agent.Translator {
	return &translator{fixture: fixture, res: agent.Result{Version: a.Spec.Version}, started: map[string]bool{}}
}

type translator struct {
	fixture string
	res     agent.Result
	started map[string]bool // command items already reported at item.started
	lastErr string
}

func (t *translator) Result() agent.Result { return t.res }

type line struct {
	Type  string `json:"type"`
	Item  *item  `json:"item"`
	Usage struct {
		Input  int64 `json:"input_tokens"`
		Cached int64 `json:"cached_input_tokens"`
		Output int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

type item struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Text     string `json:"text"`
	Command  string `json:"command"`
	Message  string `json:"message"`
	Output   string `json:"aggregated_output"`
	ExitCode *int   `json:"exit_code"`
	Status   string `json:"status"`
	Changes  []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
}

// Line translates one line.
func (t *translator) Line(raw []byte) []agent.Event {
	var l line
	if !t.res.Decode(raw, &l) {
		return nil
	}
	switch l.Type {
	case "thread.started":
		t.res.Started = true
		return []agent.Event{agent.StartedEvent(agent.Codex, t.res.Version, "")}
	case "turn.started":
		return nil
	case "item.started", "item.updated", "item.completed":
		if l.Item == nil {
			t.res.Unknown++
			return nil
		}
		return t.item(l.Type, l.Item)
	case "turn.completed":
		r := &t.res
		r.Turns++
		r.InputTokens += l.Usage.Input
		r.CachedTokens += l.Usage.Cached
		r.OutputTokens += l.Usage.Output
		r.Finished = true
		return []agent.Event{agent.FinishedEvent(*r)}
	case "turn.failed":
		r := &t.res
		r.Turns++
		r.Finished = true
		r.IsError = true
		switch {
		case l.Error != nil && l.Error.Message != "":
			r.ErrorMessage = l.Error.Message
		case t.lastErr != "":
			r.ErrorMessage = t.lastErr
		default:
			r.ErrorMessage = "the turn failed"
		}
		return []agent.Event{agent.FinishedEvent(*r)}
	case "error":
		t.lastErr = l.Message
		return nil
	}
	t.res.Unknown++
	return nil
}

func (t *translator) item(phase string, it *item) []agent.Event {
	switch it.Type {
	case "command_execution":
		var out []agent.Event
		if !t.started[it.ID] && phase != "item.updated" {
			t.started[it.ID] = true
			out = append(out, agent.WithCallID(agent.CommandEvent("command_execution", it.Command, &t.res), it.ID))
		}
		if phase == "item.completed" {
			failed := it.Status == "failed" || it.Status == "declined" || it.ExitCode != nil && *it.ExitCode != 0
			text := it.Output
			if it.ExitCode != nil {
				text += fmt.Sprintf("\n(exit code %d)", *it.ExitCode)
			}
			out = append(out, agent.ToolResultEvent("command_execution", it.ID, strings.TrimPrefix(text, "\n"), failed))
		}
		return out
	case "file_change":
		if phase != "item.completed" {
			return nil
		}
		var out []agent.Event
		var paths []string
		for _, c := range it.Changes {
			out = append(out, agent.WithCallID(agent.FileEvent(t.fixture, "file_change:"+c.Kind, c.Path, &t.res), it.ID))
			paths = append(paths, c.Kind+" "+c.Path)
		}
		return append(out, agent.ToolResultEvent("file_change", it.ID, it.Status+": "+strings.Join(paths, ", "), it.Status != "completed"))
	case "agent_message":
		if phase == "item.completed" && it.Text != "" {
			return []agent.Event{agent.LogEvent(it.Text)}
		}
		return nil
	case "error":
		if phase == "item.completed" {
			t.lastErr = it.Message
		}
		return nil
	case "reasoning", "mcp_tool_call", "web_search", "todo_list", "collab_tool_call":
		return nil
	}
	if phase == "item.completed" {
		t.res.Unknown++
	}
	return nil
}
