package profile

import (
	"path"
	"strings"
)

// shells are the programs whose -c string is the command.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "ksh": true, "mksh": true}

// ShellString returns the command string of a shell invoked with -c (in
// any option cluster: -c, -lc, -ec, ...), and whether argv is one. The
// program is named by the executed file, or by argv[0] when the file's
// name says nothing (a relative or empty path).
func ShellString(file string, argv []string) (string, bool) {
	name := path.Base(file)
	if file == "" || !shells[name] {
		if len(argv) == 0 {
			return "", false
		}
		name = path.Base(strings.TrimPrefix(argv[0], "-"))
	}
	if !shells[name] {
		return "", false
	}
	c := false
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--" || a == "-":
			if c && i+1 < len(argv) {
				return argv[i+1], true
			}
			return "", false
		case a == "-o" || a == "+o" || a == "-O" || a == "+O":
			i++ // the option's name
		case strings.HasPrefix(a, "--"):
			// --login, --norc, --noprofile, ...
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			if a[0] == '-' && strings.Contains(a[1:], "c") {
				c = true
			}
		default:
			if c {
				return a, true
			}
			return "", false // a script file: the shell runs it, it is the command
		}
	}
	return "", false
}

// Launched finds the shell command a launcher runs: a program that runs
// another program named in its own arguments. Codex runs every command as
// `/proc/self/exe --codex-run-as-process-setup … /bin/bash /bin/bash -c
// SCRIPT`, itself re-executed as a helper that then executes bash. argv is
// a shell -c call itself (outer is then empty), or holds one after its
// first word (outer is what comes before it). ok is false when there is no
// shell -c call in argv.
func Launched(file string, argv []string) (outer []string, script string, ok bool) {
	if s, ok := ShellString(file, argv); ok {
		return nil, s, true
	}
	for i := 1; i < len(argv); i++ {
		if !shells[path.Base(argv[i])] {
			continue
		}
		if s, ok := ShellString("", argv[i:]); ok {
			return argv[:i], s, true
		}
	}
	return nil, "", false
}
