package scan

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

var (
	privileged  = map[string]bool{"sudo": true, "doas": true, "pkexec": true, "run0": true, "su": true}
	shells      = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true, "busybox-sh": true}
	otherInterp = map[string]bool{"perl": true, "ruby": true, "node": true, "nodejs": true, "php": true, "deno": true, "bun": true}
)

// cmdName is the command's base name (`/usr/bin/sudo` -> sudo).
func cmdName(s string) string {
	return path.Base(s)
}

func isPython(name string) bool {
	if name == "python" || name == "pypy" || name == "pypy3" {
		return true
	}
	if !strings.HasPrefix(name, "python3") {
		return false
	}
	rest := strings.TrimPrefix(name, "python3")
	return rest == "" || strings.Trim(rest, ".0123456789") == ""
}

// interpreterish commands execute code given in their arguments.
func interpreterish(name string) bool {
	return shells[name] || otherInterp[name] || isPython(name) || name == "eval" || name == "source" || name == "." || name == "su"
}

// optSpec describes the options of a command: which short letters and long
// names take a value, so that values are not taken for operands.
type optSpec struct {
	short string
	long  []string
	first bool // options end at the first operand (wrappers: the rest is a command)
}

func (o optSpec) takesLong(n string) bool {
	for _, l := range o.long {
		if l == n {
			return true
		}
	}
	return false
}

// parseOpts splits args (after the command name) into operands and option values.
func parseOpts(args []arg, o optSpec) (ops []arg, vals map[string][]arg) {
	vals = map[string][]arg{}
	for i := 0; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "--":
			return append(ops, args[i+1:]...), vals
		case !strings.HasPrefix(a, "-") || a == "-":
			if o.first {
				return append(ops, args[i:]...), vals
			}
			ops = append(ops, args[i])
		case strings.HasPrefix(a, "--"):
			name, v, eq := strings.Cut(a, "=")
			switch {
			case eq:
				vals[name] = append(vals[name], arg{s: v, w: args[i].w})
			case o.takesLong(name) && i+1 < len(args):
				vals[name] = append(vals[name], args[i+1])
				i++
			default:
				vals[name] = append(vals[name], arg{})
			}
		default:
			for j := 1; j < len(a); j++ {
				c := a[j : j+1]
				if strings.Contains(o.short, c) {
					if j+1 < len(a) {
						vals["-"+c] = append(vals["-"+c], arg{s: a[j+1:], w: args[i].w})
					} else if i+1 < len(args) {
						vals["-"+c] = append(vals["-"+c], args[i+1])
						i++
					}
					break
				}
				vals["-"+c] = append(vals["-"+c], arg{})
			}
		}
	}
	return ops, vals
}

// wrappers run their operands as a command.
var wrappers = map[string]optSpec{
	"sudo":      {short: "ugCDhprtUTR", long: []string{"--user", "--group", "--chdir", "--host", "--prompt", "--role", "--type", "--other-user", "--close-from", "--chroot", "--command-timeout"}, first: true},
	"doas":      {short: "uC", first: true},
	"pkexec":    {long: []string{"--user"}, first: true},
	"run0":      {short: "uDg", long: []string{"--user", "--chdir", "--setenv", "--unit", "--property", "--description", "--slice", "--nice", "--background"}, first: true},
	"nohup":     {first: true},
	"exec":      {short: "a", first: true},
	"builtin":   {first: true},
	"command":   {first: true},
	"time":      {short: "fo", long: []string{"--format", "--output"}, first: true},
	"nice":      {short: "n", long: []string{"--adjustment"}, first: true},
	"ionice":    {short: "cnp", long: []string{"--class", "--classdata", "--pid"}, first: true},
	"stdbuf":    {short: "ioe", long: []string{"--input", "--output", "--error"}, first: true},
	"setsid":    {first: true},
	"chronic":   {first: true},
	"unbuffer":  {first: true},
	"xargs":     {short: "IiEeLlnPsda", long: []string{"--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--delimiter", "--arg-file", "--eof"}, first: true},
	"timeout":   {short: "sk", long: []string{"--signal", "--kill-after"}, first: true},
	"flock":     {short: "wEc", long: []string{"--timeout", "--conflict-exit-code", "--command"}, first: true},
	"busybox":   {first: true},
	"catchsegv": {first: true},
	"strace":    {short: "eoOpPsSuXbEa", first: true},
	"ltrace":    {short: "eoOpPsSuXbEan", first: true},
	"watch":     {short: "dn", long: []string{"--interval"}, first: true},
}

// next returns the command a wrapper runs; ok is false when name is not a wrapper.
func next(name string, args []arg) ([]arg, bool) {
	if name == "env" {
		rest, _ := envCommand(args[1:])
		return rest, true
	}
	spec, ok := wrappers[name]
	if !ok {
		return nil, false
	}
	ops, vals := parseOpts(args[1:], spec)
	switch name {
	case "command":
		if len(vals["-v"]) > 0 || len(vals["-V"]) > 0 {
			return nil, true
		}
	case "timeout", "flock":
		if len(ops) > 0 {
			ops = ops[1:] // duration, lock file
		}
	case "watch":
		if len(ops) == 1 {
			return []arg{{s: "sh"}, {s: "-c"}, ops[0]}, true
		}
	}
	return ops, true
}

// envCommand skips env's options and assignments; dump is true when nothing is left to run.
func envCommand(args []arg) (rest []arg, dump bool) {
	i := 0
	for i < len(args) {
		a := args[i].s
		switch {
		case a == "-i" || a == "-" || a == "-0" || a == "--ignore-environment" || a == "--null" || a == "-v" || a == "--debug":
			i++
		case a == "-u" || a == "-C" || a == "--unset" || a == "--chdir":
			i += 2
		case strings.HasPrefix(a, "--unset=") || strings.HasPrefix(a, "--chdir="):
			i++
		case a == "-S" || a == "--split-string":
			if i+1 < len(args) {
				return append([]arg{{s: "sh"}, {s: "-c"}, args[i+1]}, args[i+2:]...), false
			}
			i++
		case strings.Contains(a, "=") && plainName(a[:strings.Index(a, "=")]):
			i++
		default:
			return args[i:], false
		}
	}
	return nil, true
}

// callInfo classifies a call for pipeline analysis without reporting.
func callInfo(args []arg) info {
	var in info
	for depth := 0; len(args) > 0 && depth < wrapperLimit; depth++ {
		name := cmdName(args[0].s)
		if name == "env" {
			rest, dump := envCommand(args[1:])
			if dump {
				in.envDump = true
				return in
			}
			args = rest
			continue
		}
		if rest, ok := next(name, args); ok {
			args = rest
			continue
		}
		break
	}
	if len(args) == 0 {
		return in
	}
	name := cmdName(args[0].s)
	ops := args[1:]
	switch {
	case name == "printenv" || (name == "set" && len(ops) == 0) || (name == "compgen" && len(ops) == 1 && ops[0].s == "-v"):
		in.envDump = true
	case name == "export" || name == "declare" || name == "typeset":
		in.envDump = true
		for _, a := range ops {
			if !strings.HasPrefix(a.s, "-") {
				in.envDump = false
			}
		}
	case netTools[name]:
		in.netSink = true
		in.downloads = !isListener(name, ops)
	case name == "git":
		if sub, _ := gitSub(ops); sub == "push" {
			in.netSink = true
		}
	}
	for _, a := range ops {
		if strings.Contains(a.s, "/proc/") && strings.Contains(a.s, "environ") {
			in.envDump = true
		}
		if _, ok := devNetHost(a.s); ok {
			in.downloads, in.netSink = true, true
		}
	}
	in.interp = stdinInterp(name, ops)
	return in
}

// stdinInterp says whether the command executes its standard input as a program.
func stdinInterp(name string, ops []arg) string {
	switch {
	case shells[name]:
		cmdMode, rest, readStdin := shellOpts(ops)
		if cmdMode {
			return ""
		}
		if readStdin || len(rest) == 0 || rest[0].s == "-" || rest[0].s == "/dev/stdin" {
			return "sh"
		}
	case name == "source" || name == ".":
		if len(ops) > 0 && (ops[0].s == "/dev/stdin" || ops[0].s == "/proc/self/fd/0" || ops[0].s == "/dev/fd/0") {
			return "sh"
		}
	case isPython(name):
		code, module, file, stdin := pythonOpts(ops)
		if code == nil && !module && (stdin || file == nil) {
			return "py"
		}
	case otherInterp[name]:
		for _, a := range ops {
			if a.s == "-e" || a.s == "-r" || a.s == "--eval" || a.s == "-E" || a.s == "-p" {
				return ""
			}
			if !strings.HasPrefix(a.s, "-") {
				return ""
			}
		}
		return "other"
	}
	return ""
}

// shellOpts parses sh/bash options: -c mode, operands, and -s.
func shellOpts(ops []arg) (cmdMode bool, rest []arg, readStdin bool) {
	i := 0
	for i < len(ops) {
		a := ops[i].s
		switch {
		case a == "--":
			return cmdMode, ops[i+1:], readStdin
		case a == "-" || a == "+":
			return cmdMode, ops[i:], readStdin
		case strings.HasPrefix(a, "--"):
			if a == "--rcfile" || a == "--init-file" {
				i++
			}
			i++
		case (strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+")) && len(a) > 1:
			takes := 0
			for _, c := range a[1:] {
				switch c {
				case 'c':
					if a[0] == '-' {
						cmdMode = true
					}
				case 's':
					readStdin = true
				case 'o', 'O':
					takes++
				}
			}
			i += 1 + takes
		default:
			return cmdMode, ops[i:], readStdin
		}
	}
	return cmdMode, nil, readStdin
}

// pythonOpts parses python options: -c code, -m module, the script operand.
func pythonOpts(ops []arg) (code *arg, module bool, file *arg, stdin bool) {
	for i := 0; i < len(ops); i++ {
		a := ops[i].s
		switch {
		case a == "-c":
			if i+1 < len(ops) {
				return &ops[i+1], false, nil, false
			}
			return nil, false, nil, false
		case strings.HasPrefix(a, "-c") && !strings.HasPrefix(a, "--"):
			c := arg{s: a[2:], w: ops[i].w}
			return &c, false, nil, false
		case a == "-m" || strings.HasPrefix(a, "-m") && !strings.HasPrefix(a, "--"):
			return nil, true, nil, false
		case a == "-W" || a == "-X" || a == "--check-hash-based-pycs":
			i++
		case a == "-":
			return nil, false, nil, true
		case strings.HasPrefix(a, "-"):
		default:
			return nil, false, &ops[i], false
		}
	}
	return nil, false, nil, false
}

// command analyzes one simple command (args already resolved).
func (s *scanner) command(u *unit, at *stmtRef, args []arg, e *env, depth int) {
	if len(args) == 0 || depth > wrapperLimit {
		return
	}
	line, cmd := at.pos(u)
	name := cmdName(args[0].s)
	if args[0].s == "" {
		return // an empty command name runs nothing
	}
	if strings.Contains(args[0].s, unknownMark) {
		s.add(u, line, PatDynamicCommand, cmd, "the command name is only known at run time")
		return
	}
	s.program(u, line, args[0].s)
	ops := args[1:]

	// Checks that apply to any command, whatever it is.
	if interpreterish(name) {
		for _, a := range ops {
			if s.wordDownloads(a.w, e) {
				s.add(u, line, PatRemoteExec, cmd, fmt.Sprintf("%s executes content fetched over the network", name))
				break
			}
		}
	}
	for _, a := range ops {
		if h, ok := devNetHost(a.s); ok {
			s.checkHost(u, line, cmd, name, h)
		}
	}
	if netTools[name] || name == "git" {
		for _, a := range ops {
			if s.wordSubstInfo(a.w, e).envDump || (strings.Contains(a.s, "/proc/") && strings.Contains(a.s, "environ")) {
				s.add(u, line, PatEnvExfiltration, cmd, fmt.Sprintf("%s sends the environment over the network", name))
				break
			}
		}
	}

	if privileged[name] {
		s.add(u, line, PatPrivilege, cmd, fmt.Sprintf("%s escalates privileges", name))
		if name == "su" {
			for i, a := range ops {
				if (a.s == "-c" || a.s == "--command") && i+1 < len(ops) {
					s.nested(u, at, ops[i+1].s, wordLine(u, ops[i+1], line), e)
				}
			}
			return
		}
	}
	if rest, ok := next(name, args); ok {
		s.command(u, at, rest, e, depth+1)
		return
	}

	switch {
	case name == "rm":
		s.rm(u, line, cmd, ops, e)
	case name == "find":
		s.find(u, at, ops, e, depth)
	case name == "rmdir" || name == "unlink" || name == "touch" || name == "mkdir" || name == "truncate" || name == "shred":
		spec := optSpec{short: "mdrtsn", long: []string{"--mode", "--date", "--reference", "--size", "--iterations"}}
		targets, _ := parseOpts(ops, spec)
		for _, t := range targets {
			s.checkWrite(u, line, cmd, t.s, e)
		}
	case name == "chmod" || name == "chown" || name == "chgrp":
		targets, vals := parseOpts(ops, optSpec{long: []string{"--reference"}})
		if len(vals["--reference"]) == 0 && len(targets) > 0 {
			targets = targets[1:]
		}
		for _, t := range targets {
			s.checkWrite(u, line, cmd, t.s, e)
		}
	case name == "cp" || name == "mv" || name == "install" || name == "ln":
		s.copyLike(u, line, cmd, name, ops, e)
	case name == "dd":
		for _, a := range ops {
			if v, ok := strings.CutPrefix(a.s, "of="); ok {
				s.checkWrite(u, line, cmd, v, e)
			}
		}
	case name == "tee":
		targets, _ := parseOpts(ops, optSpec{long: []string{"--output-error"}})
		for _, t := range targets {
			s.checkWrite(u, line, cmd, t.s, e)
		}
	case netTools[name]:
		s.network(u, line, cmd, name, ops)
	case name == "git":
		s.git(u, line, cmd, ops, e)
	case shells[name]:
		cmdMode, rest, readStdin := shellOpts(ops)
		switch {
		case cmdMode && len(rest) > 0:
			if !s.wordDownloads(rest[0].w, e) {
				s.nested(u, at, rest[0].s, wordLine(u, rest[0], line), e.clone())
			}
		case !cmdMode && !readStdin && len(rest) > 0 && rest[0].s != "-" && rest[0].s != "/dev/stdin" && !strings.HasPrefix(rest[0].s, devFdSentinel):
			s.scriptArg(u, at, rest[0], "sh", s.scriptEnv(e, rest[0].s))
		}
	case name == "make" || name == "gmake":
		s.make(u, at, ops, e)
	case name == "eval":
		var parts []string
		size := 0
		for _, a := range ops {
			if size += len(a.s) + 1; size > MaxFileBytes {
				parts = []string{strings.Repeat(" ", MaxFileBytes+1)} // reported as unscannable
				break
			}
			parts = append(parts, a.s)
		}
		if len(ops) > 0 && !s.wordDownloads(ops[0].w, e) {
			s.nested(u, at, strings.Join(parts, " "), line, e)
		}
	case name == "source" || name == ".":
		if len(ops) > 0 && !strings.HasPrefix(ops[0].s, devFdSentinel) && stdinInterp(name, ops) == "" {
			s.scriptArg(u, at, ops[0], "sh", e) // sourced: shares this shell's variables
		}
	case isPython(name):
		code, _, file, _ := pythonOpts(ops)
		switch {
		case code != nil:
			s.python(u.child(code.s, wordLine(u, *code, line)))
		case file != nil && !strings.HasPrefix(file.s, devFdSentinel):
			s.scriptArg(u, at, *file, "py", e)
		}
	case name == "trap":
		if ops2, _ := parseOpts(ops, optSpec{}); len(ops2) > 1 && ops2[0].s != "-" {
			s.nested(u, at, ops2[0].s, wordLine(u, ops2[0], line), e)
		}
	case name == "cd" || name == "pushd":
		s.cd(ops, e)
	case name == "popd":
		e.cwd = ""
	case name == "read" || name == "mapfile" || name == "readarray" || name == "getopts" || name == "printf":
		for _, a := range ops {
			if plainName(a.s) {
				e.vars[a.s] = unknownMark
			}
		}
	case strings.Contains(args[0].s, "/"):
		// A program run by its path: the repository's own (./gradlew,
		// scripts/test.sh) is read; one outside it is an installed program
		// (/usr/local/go/bin/go, a virtualenv's bin/pip under $TMPDIR), like
		// any program found on PATH. Running a script outside the
		// repository through an interpreter (sh /opt/x.sh) is still a
		// finding (scriptArg).
		if loc, _ := s.classify(args[0].s, e.cwd); loc == locInside {
			s.scriptArg(u, at, args[0], "", s.scriptEnv(e, args[0].s))
		}
	}
}

// scriptEnv is the environment a child script starts with: the same
// variables (an over-approximation of what is exported) and its own $0.
func (s *scanner) scriptEnv(e *env, script string) *env {
	c := e.clone()
	if !strings.HasPrefix(script, "/") && e.cwd != "" {
		script = e.cwd + "/" + script
	}
	c.vars["0"] = script
	return c
}

func wordLine(u *unit, a arg, fallback int) int {
	if a.w == nil || len(a.w.Parts) == 0 {
		return fallback
	}
	return u.lineBase + int(a.w.Pos().Line()) - 1
}

func (s *scanner) cd(ops []arg, e *env) {
	targets, _ := parseOpts(ops, optSpec{})
	switch {
	case len(targets) == 0:
		e.cwd = homeSentinel
	case targets[0].s == "-" || strings.Contains(targets[0].s, unknownMark):
		e.cwd = ""
	case strings.HasPrefix(targets[0].s, "/"):
		e.cwd = filepath.Clean(targets[0].s)
	case e.cwd != "":
		e.cwd = filepath.Clean(e.cwd + "/" + targets[0].s)
	}
}

// scriptArg follows a script operand into its file.
func (s *scanner) scriptArg(u *unit, at *stmtRef, a arg, lang string, e *env) {
	p := a.s
	if p == "" {
		return
	}
	if strings.Contains(p, unknownMark) {
		line, cmd := at.pos(u)
		s.add(u, line, PatDynamicEval, cmd, "runs a script whose path is only known at run time")
		return
	}
	if !strings.HasPrefix(p, "/") {
		base := e.cwd
		if base == "" {
			base = s.root
		}
		p = base + "/" + p
	}
	s.script(u, at, p, lang, e)
}

func (s *scanner) rm(u *unit, line int, cmd string, ops []arg, e *env) {
	recursive := false
	var targets []arg
	stop := false
	for _, a := range ops {
		switch {
		case !stop && a.s == "--":
			stop = true
		case !stop && strings.HasPrefix(a.s, "--"):
			if a.s == "--recursive" {
				recursive = true
			}
		case !stop && strings.HasPrefix(a.s, "-") && a.s != "-":
			if strings.ContainsAny(a.s, "rR") {
				recursive = true
			}
		default:
			targets = append(targets, a)
		}
	}
	for _, t := range targets {
		s.deleteTarget(u, line, cmd, t.s, recursive, e)
	}
}

func (s *scanner) deleteTarget(u *unit, line int, cmd, target string, recursive bool, e *env) {
	loc, abs := s.classify(target, e.cwd)
	switch {
	case recursive && loc == locOutside:
		s.add(u, line, PatRecursiveDelete, cmd, fmt.Sprintf("recursive deletion of %s, outside the fixture", abs))
	case recursive && loc == locUnknown:
		s.add(u, line, PatDeleteUnresolved, cmd, fmt.Sprintf("recursive deletion of '%s', which is only known at run time", target))
	case loc == locOutside:
		s.add(u, line, PatWriteOutside, cmd, fmt.Sprintf("deletes %s, outside the fixture and the allowed roots", abs))
	}
}

func (s *scanner) find(u *unit, at *stmtRef, ops []arg, e *env, depth int) {
	line, cmd := at.pos(u)
	var starts []string
	i := 0
	for ; i < len(ops); i++ {
		a := ops[i].s
		if a == "-H" || a == "-L" || a == "-P" {
			continue
		}
		if strings.HasPrefix(a, "-") || a == "(" || a == "!" || a == "\\(" {
			break
		}
		starts = append(starts, a)
	}
	if len(starts) == 0 {
		starts = []string{"."}
	}
	expr := ops[i:]
	for j := 0; j < len(expr); j++ {
		switch expr[j].s {
		case "-delete":
			for _, st := range starts {
				s.deleteTarget(u, line, cmd, st, true, e)
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			k := j + 1
			for k < len(expr) && expr[k].s != ";" && expr[k].s != "+" {
				k++
			}
			for _, st := range starts {
				var sub []arg
				for _, a := range expr[j+1 : k] {
					sub = append(sub, arg{s: strings.ReplaceAll(a.s, "{}", strings.TrimSuffix(st, "/")+"/"+unknownMark), w: a.w})
				}
				s.command(u, at, sub, e, depth+1)
			}
			j = k
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if j+1 < len(expr) {
				s.checkWrite(u, line, cmd, expr[j+1].s, e)
			}
		}
	}
}

func (s *scanner) copyLike(u *unit, line int, cmd, name string, ops []arg, e *env) {
	spec := optSpec{short: "tS", long: []string{"--target-directory", "--suffix"}}
	if name == "install" {
		spec = optSpec{short: "tSmogZ", long: []string{"--target-directory", "--suffix", "--mode", "--owner", "--group", "--context"}}
	}
	targets, vals := parseOpts(ops, spec)
	var dests []arg
	switch {
	case len(vals["-t"]) > 0 || len(vals["--target-directory"]) > 0:
		dests = append(vals["-t"], vals["--target-directory"]...)
	case name == "install" && (len(vals["-d"]) > 0 || len(vals["--directory"]) > 0):
		dests, targets = targets, nil
	case len(targets) >= 2:
		dests, targets = targets[len(targets)-1:], targets[:len(targets)-1]
	default:
		targets = nil
	}
	for _, d := range dests {
		s.checkWrite(u, line, cmd, d.s, e)
	}
	if name == "mv" {
		for _, t := range targets {
			s.checkWrite(u, line, cmd, t.s, e) // the source is removed
		}
	}
}

func (s *scanner) checkWrite(u *unit, line int, cmd, target string, e *env) {
	if h, ok := devNetHost(target); ok {
		s.checkHost(u, line, cmd, "a /dev/tcp write", h)
		return
	}
	if loc, abs := s.classify(target, e.cwd); loc == locOutside {
		s.add(u, line, PatWriteOutside, cmd, fmt.Sprintf("writes %s, outside the fixture and the allowed roots", abs))
	}
}
