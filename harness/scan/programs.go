package scan

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// shellBuiltins are run by the shell itself: they never need to resolve on
// PATH.
var shellBuiltins = []string{".", ":", "[", "alias", "bg", "break", "cd", "command", "continue", "echo", "eval", "exec",
	"exit", "export", "false", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd", "read", "readonly",
	"return", "set", "shift", "source", "test", "times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset", "wait"}

// Programs lists the programs a shell command line starts by name or path:
// the literal first word of each simple command, in order, once each.
// Builtins and words that are not literal (a variable) are left out, so a
// caller can check that each one resolves where the command will run.
func Programs(command string) []string {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return nil
	}
	var out []string
	syntax.Walk(f, func(n syntax.Node) bool {
		c, ok := n.(*syntax.CallExpr)
		if !ok || len(c.Args) == 0 {
			return true
		}
		w, ok := Literal(c.Args[0])
		if ok && w != "" && !slices.Contains(shellBuiltins, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
		return true
	})
	return out
}

// CommandPrograms are Programs as Program values, with File CommandFile:
// what a check of the command's programs and its recipes' takes.
func CommandPrograms(command string) []Program {
	var out []Program
	for _, name := range Programs(command) {
		out = append(out, Program{Name: name, File: CommandFile})
	}
	return out
}
