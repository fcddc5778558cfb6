package scan

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// makefileNames are the files GNU make reads when none is named, in order.
var makefileNames = []string{"GNUmakefile", "makefile", "Makefile"}

// makeRule is one rule of a makefile: its prerequisites and recipe lines.
type makeRule struct {
	prereqs []string
	recipe  []makeLine
}

// makeLine is one recipe line (continuations joined) and where it starts.
type makeLine struct {
	file string // fixture-relative
	line int
	text string
}

// makefile is what the scan knows of a makefile: its rules, its simple
// variables, and the default goal.
type makefile struct {
	rules map[string]*makeRule
	vars  map[string]string
	first string
}

var (
	makeAssign  = regexp.MustCompile(`^\s*(?:export\s+|override\s+)*([A-Za-z0-9_.-]+)\s*(:::?=|\?=|\+=|!=|=)\s*(.*)$`)
	makeRef     = regexp.MustCompile(`\$\(([A-Za-z0-9_.-]+)\)|\$\{([A-Za-z0-9_.-]+)\}`)
	makeInclude = regexp.MustCompile(`^\s*-?(?:include|sinclude)\s+(.+)$`)
)

// make follows `make [options] [targets]`: the recipe lines of each target,
// and of its prerequisites, are shell run by make, so they are scanned like
// the command itself, each finding naming the makefile and its line.
func (s *scanner) make(u *unit, at *stmtRef, ops []arg, e *env) {
	line, cmd := at.pos(u)
	dir, file := e.cwd, ""
	if dir == "" {
		dir = s.root
	}
	var targets []string
	for i := 0; i < len(ops); i++ {
		a := ops[i].s
		val := func(short, long string) (string, bool) {
			switch {
			case a == short || a == long:
				if i+1 < len(ops) {
					i++
					return ops[i].s, true
				}
				return "", true
			case strings.HasPrefix(a, long+"="):
				return a[len(long)+1:], true
			case strings.HasPrefix(a, short) && len(a) > len(short) && !strings.HasPrefix(a, "--"):
				return a[len(short):], true
			}
			return "", false
		}
		if v, ok := val("-C", "--directory"); ok {
			if strings.HasPrefix(v, "/") {
				dir = v
			} else {
				dir = filepath.Join(dir, v)
			}
			continue
		}
		if v, ok := val("-f", "--file"); ok {
			file = v
			continue
		}
		if v, ok := val("-f", "--makefile"); ok {
			file = v
			continue
		}
		if _, ok := val("-I", "--include-dir"); ok {
			continue
		}
		if _, ok := val("-o", "--old-file"); ok {
			continue
		}
		if _, ok := val("-W", "--what-if"); ok {
			continue
		}
		if a == "-j" || a == "-l" || a == "--jobs" || a == "--load-average" {
			if i+1 < len(ops) && isNumber(ops[i+1].s) {
				i++
			}
			continue
		}
		switch {
		case strings.HasPrefix(a, "-"):
		case strings.Contains(a, "="):
		default:
			targets = append(targets, a)
		}
	}
	if strings.Contains(dir, unknownMark) || strings.Contains(file, unknownMark) {
		s.add(u, line, PatDynamicEval, cmd, "runs make on a makefile whose path is only known at run time")
		return
	}
	var path string
	if file != "" {
		path = file
		if !strings.HasPrefix(path, "/") {
			path = filepath.Join(dir, path)
		}
	} else {
		for _, n := range makefileNames {
			p := filepath.Join(dir, n)
			if _, exists, err := s.resolve(p); err == nil && exists {
				path = p
				break
			}
		}
		if path == "" {
			return // no makefile: make fails before running anything
		}
	}
	mf := &makefile{rules: map[string]*makeRule{}, vars: map[string]string{"MAKE": "make", "SHELL": "/bin/sh"}}
	if !s.readMakefile(u, at, path, mf, 0) {
		return
	}
	if len(targets) == 0 && mf.first != "" {
		targets = []string{mf.first}
	}
	menv := e.clone()
	menv.cwd = filepath.Clean(dir)
	seen := map[string]bool{}
	var visit func(t string, depth int)
	visit = func(t string, depth int) {
		r, ok := mf.rules[t]
		if !ok || seen[t] || depth > MaxDepth*4 {
			return
		}
		seen[t] = true
		for _, p := range r.prereqs {
			visit(p, depth+1)
		}
		for _, l := range r.recipe {
			if s.ctx.Err() != nil {
				return
			}
			src := expandMake(l.text, mf.vars)
			// Each recipe line runs in a shell of its own.
			s.shellSource(&unit{file: l.file, src: src, lineBase: l.line, depth: u.depth + 1}, menv.clone())
		}
	}
	for _, t := range targets {
		visit(t, 0)
	}
}

// readMakefile parses path (inside the fixture) into mf: rules, simple
// variables and literal includes. A makefile outside the fixture, or one
// that cannot be read, is a finding, as a script would be.
func (s *scanner) readMakefile(u *unit, at *stmtRef, path string, mf *makefile, depth int) bool {
	line, cmd := at.pos(u)
	abs := filepath.Clean(path)
	if !within(abs, s.root) && !within(abs, s.realRoot) {
		s.add(u, line, PatScriptOutside, cmd, fmt.Sprintf("makefile %s is outside the fixture and cannot be checked", abs))
		return false
	}
	real, exists, err := s.resolve(abs)
	if err != nil {
		s.add(u, line, PatScriptOutside, cmd, fmt.Sprintf("makefile %s resolves outside the fixture: %v", s.rel(abs), err))
		return false
	}
	if !exists {
		if depth == 0 {
			s.add(u, line, PatScriptMissing, cmd, fmt.Sprintf("makefile %s does not exist at scan time", s.rel(abs)))
		}
		return false
	}
	fi, err := os.Lstat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	name := s.rel(real)
	switch {
	case depth > MaxDepth:
		s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("makefile %s is included deeper than %d levels", name, MaxDepth))
		return false
	case fi.Size() > MaxFileBytes:
		s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("makefile %s is larger than %d bytes", name, MaxFileBytes))
		return false
	case !s.files[name] && (len(s.files) >= MaxFiles || s.total+fi.Size() > MaxTotalBytes):
		s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("makefile %s exceeds the scan budget (%d files, %d bytes)", name, MaxFiles, MaxTotalBytes))
		return false
	}
	data, err := os.ReadFile(real)
	if err != nil {
		s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("makefile %s cannot be read: %v", name, err))
		return false
	}
	if !s.files[name] {
		s.files[name] = true
		s.total += int64(len(data))
	}
	lines := strings.Split(string(data), "\n")
	var cur []*makeRule
	for i := 0; i < len(lines); i++ {
		start := i + 1
		text := lines[i]
		for strings.HasSuffix(text, "\\") && i+1 < len(lines) {
			i++
			text = text[:len(text)-1] + "\n" + lines[i]
		}
		if strings.HasPrefix(text, "\t") {
			if cur != nil {
				l := makeLine{file: name, line: start, text: strings.TrimLeft(strings.TrimPrefix(text, "\t"), "@-+ \t")}
				for _, r := range cur {
					r.recipe = append(r.recipe, l)
				}
			}
			continue
		}
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		cur = nil
		if m := makeInclude.FindStringSubmatch(text); m != nil {
			for _, inc := range strings.Fields(expandMake(m[1], mf.vars)) {
				if strings.Contains(inc, "${"+unknownVar+"}") {
					continue // computed: make reads what exists at run time
				}
				if !strings.HasPrefix(inc, "/") {
					inc = filepath.Join(filepath.Dir(abs), inc)
				}
				s.readMakefile(u, at, inc, mf, depth+1)
			}
			continue
		}
		if m := makeAssign.FindStringSubmatch(text); m != nil {
			v := strings.TrimSpace(m[3])
			switch m[2] {
			case "?=":
				if _, ok := mf.vars[m[1]]; !ok {
					mf.vars[m[1]] = v
				}
			case "+=":
				mf.vars[m[1]] = strings.TrimSpace(mf.vars[m[1]] + " " + v)
			case "!=":
				mf.vars[m[1]] = "${" + unknownVar + "}"
			default:
				mf.vars[m[1]] = v
			}
			continue
		}
		head, rest, ok := strings.Cut(text, ":")
		if !ok || strings.HasPrefix(trimmed, ".") && !strings.Contains(head, " ") && strings.ToUpper(head) == head {
			continue // a directive (ifeq, define, ...) or a special target (.PHONY)
		}
		rest = strings.TrimPrefix(rest, ":")
		prereqs, inline, _ := strings.Cut(rest, ";")
		if i := strings.Index(prereqs, "|"); i >= 0 {
			prereqs = prereqs[:i] + " " + prereqs[i+1:]
		}
		for _, t := range strings.Fields(expandMake(head, mf.vars)) {
			if strings.Contains(t, "%") {
				continue // pattern rules run for files, not for named targets
			}
			r, ok := mf.rules[t]
			if !ok {
				r = &makeRule{}
				mf.rules[t] = r
			}
			r.prereqs = append(r.prereqs, strings.Fields(expandMake(prereqs, mf.vars))...)
			if strings.TrimSpace(inline) != "" {
				r.recipe = append(r.recipe, makeLine{file: name, line: start, text: strings.TrimSpace(inline)})
			}
			cur = append(cur, r)
			if mf.first == "" && !strings.HasPrefix(t, ".") {
				mf.first = t
			}
		}
	}
	return true
}

// expandMake expands make's $(VAR) and ${VAR} from vars (recursively, a few
// levels), turns $$ into the shell's $, and leaves whatever it cannot know
// (automatic variables, functions such as $(shell ...)) as a run-time value.
func expandMake(s string, vars map[string]string) string {
	unknown := "${" + unknownVar + "}"
	for range 8 {
		next := makeRef.ReplaceAllStringFunc(s, func(m string) string {
			sub := makeRef.FindStringSubmatch(m)
			name := sub[1] + sub[2]
			if v, ok := vars[name]; ok {
				return v
			}
			return unknown
		})
		if next == s {
			break
		}
		s = next
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch c := s[i+1]; {
		case c == '$':
			b.WriteByte('$')
			i++
		case c == '{' && strings.HasPrefix(s[i:], unknown):
			b.WriteString(unknown)
			i += len(unknown) - 1
		case c == '(' || c == '{':
			// A function call or a nested reference: skip to its close.
			depth, j := 0, i+1
			for ; j < len(s); j++ {
				if s[j] == '(' || s[j] == '{' {
					depth++
				} else if s[j] == ')' || s[j] == '}' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			b.WriteString(unknown)
			i = j
		default:
			b.WriteString(unknown) // $@, $<, $^, $*
			i++
		}
	}
	return b.String()
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
