package modelserver

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// toolKind is how a tool is called on the wire.
type toolKind string

const (
	kindFunction toolKind = "function" // JSON arguments
	kindCustom   toolKind = "custom"   // free-form input (codex apply_patch)
)

// tool is one tool the agent offered in its request.
type tool struct {
	name   string
	kind   toolKind
	params map[string]any // JSON schema of a function's arguments
}

// conversation is what the planner needs from a request, whatever its API.
type conversation struct {
	tools   []tool
	results int // tool results already in the conversation
}

// reply is the model's answer to one request.
type reply struct {
	text string
	call *toolCall
	// errStatus, when non-zero, answers with an HTTP error instead.
	errStatus int
	errBody   string
}

// toolCall is one tool call the model makes.
type toolCall struct {
	id    string
	name  string
	kind  toolKind
	args  map[string]any // kindFunction
	input string         // kindCustom
}

// plan picks the scripted turn for the conversation and maps its abstract
// action onto a tool the agent offered.
func (ex *exchange) plan(c conversation, idPrefix string) reply {
	if len(c.tools) == 0 {
		return reply{text: DefaultFinalText}
	}
	ex.turn = c.results
	t := ex.srv.opts.Script.turn(c.results)
	if t.FailFirst > 0 && ex.srv.failOnce(c.results, t.FailFirst) {
		return reply{errStatus: t.FailStatus}
	}
	switch t.Action {
	case ActionText:
		return reply{text: t.Text}
	case ActionError:
		return reply{errStatus: t.Status, errBody: t.Body}
	case ActionStall:
		return reply{errStatus: stallStatus}
	}
	cwd := findCwd(ex.body)
	if cwd == "" {
		cwd = ex.srv.opts.WorkDir
	}
	var (
		call *toolCall
		err  error
	)
	switch t.Action {
	case ActionWrite:
		call, err = writeCall(c.tools, resolve(cwd, t.Path), t.Content)
	case ActionLeakKey:
		call, err = writeCall(c.tools, resolve(cwd, t.Path), ex.key)
	case ActionShell:
		call, err = shellCall(c.tools, t.Command, cwd)
	}
	if err != nil {
		return reply{text: fmt.Sprintf("modelserver: turn %d (%s): %v; offered tools: %s", c.results+1, t.Action, err, toolNames(c.tools))}
	}
	call.id = fmt.Sprintf("%s%d", idPrefix, c.results+1)
	return reply{text: t.Text, call: call}
}

func toolNames(ts []tool) string {
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// resolve makes a script path absolute against the agent's working directory.
func resolve(cwd, p string) string {
	if filepath.IsAbs(p) || cwd == "" {
		return p
	}
	return filepath.Join(cwd, p)
}

// cwdPatterns find the agent's working directory in its request (system
// prompt or environment context), one per agent family.
var cwdPatterns = []*regexp.Regexp{
	regexp.MustCompile(`<cwd>(/[^<]+)</cwd>`),                                  // codex environment_context
	regexp.MustCompile(`Primary working directory: (/[^\s"\\]+)`),              // claude-code
	regexp.MustCompile(`currently working in the directory: (/[^\s"\\]+)`),     // qwen-code
	regexp.MustCompile(`Workspace Directories:\*\*(?:\\n|\s)+- (/[^\s"\\]+)`),  // gemini-cli: its first workspace directory
	regexp.MustCompile(`(?i)working directory: (/[^\s"\\]+)`),                  // others
	regexp.MustCompile(`(?i)current working directory(?: is)?:? (/[^\s"\\]+)`), // others
}

// findCwd returns the working directory the request reports, or "".
func findCwd(body []byte) string {
	for _, re := range cwdPatterns {
		if m := re.FindSubmatch(body); m != nil {
			return strings.TrimRight(string(m[1]), ".,;:'`")
		}
	}
	return ""
}

// writeNames and shellNames are the file-writing and shell tools of the
// supported agents, in order of preference.
var (
	writeNames = []string{"write_file", "Write", "apply_patch"}
	shellNames = []string{"run_shell_command", "Bash", "exec_command", "shell_command", "shell"}
)

func findTool(ts []tool, names []string) (tool, bool) {
	for _, n := range names {
		for _, t := range ts {
			if t.name == n {
				return t, true
			}
		}
	}
	return tool{}, false
}

// props returns a function tool's argument names and their JSON types.
func props(t tool) map[string]string {
	out := map[string]string{}
	p, _ := t.params["properties"].(map[string]any)
	for k, v := range p {
		typ := ""
		if m, ok := v.(map[string]any); ok {
			typ, _ = m["type"].(string)
		}
		out[k] = typ
	}
	return out
}

// writeCall writes content to path with the best write tool offered.
func writeCall(ts []tool, path, content string) (*toolCall, error) {
	t, ok := findTool(ts, writeNames)
	if !ok {
		for _, c := range ts {
			p := props(c)
			if _, hasContent := p["content"]; hasContent && (has(p, "file_path") || has(p, "path")) {
				t, ok = c, true
				break
			}
		}
	}
	if !ok {
		// No write tool (codex with a model it has no metadata for offers
		// only exec_command): write through the shell instead.
		call, err := shellCall(ts, shellWrite(path, content), "")
		if err != nil {
			return nil, fmt.Errorf("write: %w", errNoTool)
		}
		return call, nil
	}
	if t.name == "apply_patch" {
		if content == "" {
			// An Add File hunk needs at least one line: an empty file
			// is made through the shell.
			if call, err := shellCall(ts, shellWrite(path, content), ""); err == nil {
				return call, nil
			}
		}
		patch := addFilePatch(path, content)
		if t.kind == kindCustom {
			return &toolCall{name: t.name, kind: kindCustom, input: patch}, nil
		}
		return &toolCall{name: t.name, kind: kindFunction, args: map[string]any{"input": patch}}, nil
	}
	p := props(t)
	pathArg := "file_path"
	if !has(p, pathArg) && has(p, "path") {
		pathArg = "path"
	}
	return &toolCall{name: t.name, kind: kindFunction, args: map[string]any{pathArg: path, "content": content}}, nil
}

// shellWrite is a POSIX shell command that writes content to path exactly.
func shellWrite(path, content string) string {
	return "printf '%s' " + shellQuote(content) + " > " + shellQuote(path)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// addFilePatch is an apply_patch envelope that creates path with content.
func addFilePatch(path, content string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	lines := strings.SplitAfter(content, "\n")
	for _, l := range lines {
		if l == "" {
			continue
		}
		b.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// shellCall runs command with the best shell tool offered.
func shellCall(ts []tool, command, cwd string) (*toolCall, error) {
	t, ok := findTool(ts, shellNames)
	if !ok {
		for _, c := range ts {
			p := props(c)
			if has(p, "command") || has(p, "cmd") {
				t, ok = c, true
				break
			}
		}
	}
	if !ok || t.kind != kindFunction {
		return nil, fmt.Errorf("shell: %w", errNoTool)
	}
	p := props(t)
	args := map[string]any{}
	switch {
	case has(p, "cmd"):
		args["cmd"] = command
	case p["command"] == "array":
		args["command"] = []string{"bash", "-lc", command}
	default:
		args["command"] = command
	}
	if has(p, "workdir") && cwd != "" {
		args["workdir"] = cwd
	}
	return &toolCall{name: t.name, kind: kindFunction, args: args}, nil
}

func has(m map[string]string, k string) bool { _, ok := m[k]; return ok }
