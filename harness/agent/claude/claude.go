// Package claude runs Claude Code as Case: `claude -p PROMPT --output-format
// stream-json --verbose --dangerously-skip-permissions --model MODEL`,
// talking Anthropic Messages to ANTHROPIC_BASE_URL (the server root), with
// its state in CLAUDE_CONFIG_DIR and its temporary files in
// CLAUDE_CODE_TMPDIR.
package claude

import (
	"path/filepath"

	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/sdkstream"
)

// Adapter is Claude Code's.
type Adapter struct{ Spec agent.Spec }

// Tools are Claude Code's file-writing and shell tools.
var Tools = sdkstream.Tools{
	Write: map[string][]string{"Write": {"file_path"}, "Edit": {"file_path"}, "MultiEdit": {"file_path"}, "NotebookEdit": {"notebook_path"}},
	Shell: map[string]string{"Bash": "command"},
}

// Command builds the command line and environment.
func (a Adapter) Command(l agent.Launch) (agent.Command, error) {
	cfg := filepath.Join(l.State, "claude-config")
	tmp := filepath.Join(l.State, "claude-tmp")
	argv := append(append([]string(nil), l.Exe...), "-p", l.Prompt,
		"--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "--model", l.Model)
	env := append(append([]string(nil), l.BaseEnv...),
		"ANTHROPIC_BASE_URL="+l.BaseURL,
		a.Spec.KeyVar+"="+l.Key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CONFIG_DIR="+cfg,
		"CLAUDE_CODE_TMPDIR="+tmp,
	)
	var notes []string
	if l.Root {
		// Claude Code refuses --dangerously-skip-permissions as root unless
		// told it is sandboxed; it is, by the harness.
		env = append(env, "IS_SANDBOX=1")
		notes = append(notes, "IS_SANDBOX=1 set: the harness runs as root, and Claude Code accepts skipped permissions as root only inside a sandbox")
	}
	return agent.Command{Argv: argv, Env: env, Dirs: []string{cfg, tmp}, Notes: notes}, nil
}

// NewTranslator reads Claude Code's stream-json.
func (a Adapter) NewTranslator(fixture string) agent.Translator {
	return sdkstream.New(sdkstream.Config{Agent: agent.ClaudeCode, PinnedVersion: a.Spec.Version,
		VersionField: "claude_code_version", Tools: Tools}, fixture)
}
