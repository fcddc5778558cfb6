// Package agent is what the harness knows about real coding agents run as
// Case: the table of supported agents and their pinned releases, where they
// are installed, the adapter interface each agent package implements (how to
// start it headless and how to read its native stream), and the redaction of
// the API key from evidence.
package agent

import (
	"fmt"
	"sort"
	"strings"
)

// Name identifies a supported agent.
type Name string

// Supported agents.
const (
	QwenCode   Name = "qwen-code"
	Codex      Name = "codex"
	ClaudeCode Name = "claude-code"
	GeminiCLI  Name = "gemini-cli"
)

// Spec is one supported agent: its pinned npm release and the binary the
// package installs.
type Spec struct {
	Name    Name
	Package string // npm package
	Version string // pinned release
	Bin     string // executable under node_modules/.bin
	// KeyVar is the variable the agent reads its API key from; the harness
	// passes the key under this name only.
	KeyVar string
	// BaseURLShape says what the agent's base-URL setting expects.
	BaseURLShape string
}

// table is the registry: one row per agent, in display order.
var table = []Spec{
	{Name: QwenCode, Package: "@qwen-code/qwen-code", Version: "0.24.4", Bin: "qwen", KeyVar: "OPENAI_API_KEY",
		BaseURLShape: "OpenAI Chat Completions, ending in /v1"},
	{Name: Codex, Package: "@openai/codex", Version: "0.169.0", Bin: "codex", KeyVar: "OPENAI_API_KEY",
		BaseURLShape: "OpenAI Responses, ending in /v1"},
	{Name: ClaudeCode, Package: "@anthropic-ai/claude-code", Version: "2.1.331", Bin: "claude", KeyVar: "ANTHROPIC_API_KEY",
		BaseURLShape: "Anthropic Messages, the server root"},
	{Name: GeminiCLI, Package: "@google/gemini-cli", Version: "0.61.0", Bin: "gemini", KeyVar: "GEMINI_API_KEY",
		BaseURLShape: "Gemini API, the server root"},
}

// All returns every supported agent, in display order.
func All() []Spec { return append([]Spec(nil), table...) }

// Names returns the supported agent names.
func Names() []string {
	out := make([]string, len(table))
	for i, s := range table {
		out[i] = string(s.Name)
	}
	return out
}

// Lookup returns the spec of a supported agent.
func Lookup(name string) (Spec, error) {
	for _, s := range table {
		if string(s.Name) == name {
			return s, nil
		}
	}
	names := Names()
	sort.Strings(names)
	return Spec{}, fmt.Errorf("unknown agent %q; supported agents: %s", name, strings.Join(names, ", "))
}
