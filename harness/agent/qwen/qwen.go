// Package qwen runs Qwen Code as Case: `qwen PROMPT --output-format
// stream-json --approval-mode yolo --auth-type openai`, talking OpenAI Chat
// Completions to OPENAI_BASE_URL (…/v1), with its state in QWEN_HOME.
package qwen

import (
	"path/filepath"

	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/agent/sdkstream"
)

// Adapter is Qwen Code's.
type Adapter struct{ Spec agent.Spec }

// Tools are Qwen Code's file-writing and shell tools.
var Tools = sdkstream.Tools{
	Write: map[string][]string{"write_file": {"file_path"}, "edit": {"file_path"}, "replace": {"file_path"}, "notebook_edit": {"notebook_path", "file_path"}},
	Shell: map[string]string{"run_shell_command": "command"},
}

// Command builds the command line and environment.
func (a Adapter) Command(l agent.Launch) (agent.Command, error) {
	home := filepath.Join(l.State, "qwen-home")
	argv := append(append([]string(nil), l.Exe...), l.Prompt,
		"--output-format", "stream-json", "--approval-mode", "yolo", "--auth-type", "openai")
	env := append(append([]string(nil), l.BaseEnv...),
		"OPENAI_BASE_URL="+l.BaseURL,
		a.Spec.KeyVar+"="+l.Key,
		"OPENAI_MODEL="+l.Model,
		"QWEN_HOME="+home,
		"QWEN_USAGE_STATISTICS_ENABLED=false",
		"QWEN_CODE_NO_RELAUNCH=true",
		"QWEN_CODE_SUPPRESS_YOLO_WARNING=1",
	)
	return agent.Command{Argv: argv, Env: env, Dirs: []string{home}}, nil
}

// NewTranslator reads Qwen Code's stream-json.
func (a Adapter) NewTranslator(fixture string) agent.Translator {
	return sdkstream.New(sdkstream.Config{Agent: agent.QwenCode, PinnedVersion: a.Spec.Version,
		VersionField: "qwen_code_version", Tools: Tools}, fixture)
}
