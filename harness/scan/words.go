package scan

import (
	"path"
	"sort"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// env is what the scanner knows about the shell state at one point of a script.
type env struct {
	vars     map[string]string // literal values; unknownMark marks parts known only at run time
	assigned map[string]bool   // names assigned anywhere in the script (so never "unset")
	cwd      string            // absolute (lexical) working directory; "" when unknown
	remotes  map[string]string // git remotes added in the script: name -> URL
	makeVars []string          // command-line variables of the make running this shell: sub-makes get them too
}

func newEnv(cwd string) *env {
	return &env{vars: map[string]string{}, assigned: map[string]bool{}, cwd: cwd, remotes: map[string]string{}}
}

func (e *env) clone() *env {
	c := newEnv(e.cwd)
	for k, v := range e.vars {
		c.vars[k] = v
	}
	for k := range e.assigned {
		c.assigned[k] = true
	}
	for k, v := range e.remotes {
		c.remotes[k] = v
	}
	c.makeVars = e.makeVars
	return c
}

// key sums up what a command run in e may depend on, so that a run that
// was scanned in the same state need not be scanned again.
func (e *env) key() string {
	var parts []string
	for k, v := range e.vars {
		parts = append(parts, k+"="+v)
	}
	for k := range e.assigned {
		parts = append(parts, k)
	}
	for k, v := range e.remotes {
		parts = append(parts, "remote "+k+"="+v)
	}
	sort.Strings(parts)
	return e.cwd + "\x00" + strings.Join(parts, "\x00")
}

// harnessVars are the variables the harness sets for the verification
// command; every other variable not assigned by the script is unset.
var harnessVars = map[string]string{
	"HOME": homeSentinel, "TMPDIR": scratchSent, "XDG_CACHE_HOME": scratchSent, "GOCACHE": scratchSent,
	"GOPATH": scratchSent, "PATH": unknownMark, "LANG": unknownMark, "CASE_TASK_FILE": unknownMark,
}

func (e *env) lookup(name string) string {
	if v, ok := e.vars[name]; ok {
		return v
	}
	if name == "PWD" {
		if e.cwd == "" {
			return unknownMark
		}
		return e.cwd
	}
	if v, ok := harnessVars[name]; ok {
		return v
	}
	// Positional and special parameters, names set somewhere the scan
	// cannot follow, and names only the config's env or a toolchain may
	// set: their value is only known at run time.
	return unknownMark
}

// external reports whether name is a plain variable that neither the
// script nor the harness sets: only the config's env could, so its value is
// unknown (lookup), and the script's own default for it is the likely one.
func (e *env) external(name string) bool {
	if _, ok := e.vars[name]; ok {
		return false
	}
	if _, ok := harnessVars[name]; ok || name == "PWD" || e.assigned[name] || !plainName(name) {
		return false
	}
	switch name {
	case "RANDOM", "LINENO", "SECONDS", "UID", "EUID", "PPID", "BASHPID", "BASH_SOURCE", "FUNCNAME", "OLDPWD",
		"REPLY", "OPTARG", "OPTIND", "IFS", "SHELL", "HOSTNAME", "BASH", "BASH_VERSION", "PIPESTATUS":
		return false
	}
	return true
}

func plainName(n string) bool {
	if n == "" || (n[0] >= '0' && n[0] <= '9') {
		return false
	}
	for _, c := range n {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// markAssigned records every name the source could assign, so that a
// variable set in a function or a loop is never taken for unset.
func markAssigned(f *syntax.File, e *env) {
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			if n.Name != nil {
				e.assigned[n.Name.Value] = true
			}
		case *syntax.WordIter:
			e.assigned[n.Name.Value] = true
		case *syntax.CallExpr:
			if len(n.Args) > 1 {
				switch n.Args[0].Lit() {
				case "read", "mapfile", "readarray", "getopts", "printf":
					for _, w := range n.Args[1:] {
						if l := w.Lit(); plainName(l) {
							e.assigned[l] = true
						}
					}
				}
			}
		}
		return true
	})
}

// resolver turns words into the strings the shell would produce, as far as
// that is known before run time.
type resolver struct{ e *env }

// maxValue bounds a resolved value: `x=$x$x` repeated must not grow without
// end. A longer value is treated as known only at run time.
const maxValue = 64 << 10

// word resolves w into one string.
func (r resolver) word(w *syntax.Word) string {
	if w == nil {
		return ""
	}
	var b strings.Builder
	for i, p := range w.Parts {
		b.WriteString(r.part(p, i == 0, false))
		if b.Len() > maxValue {
			return unknownMark
		}
	}
	return b.String()
}

// fields resolves w and splits unquoted expansions on blanks, as the shell does.
func (r resolver) fields(w *syntax.Word) []string {
	s := r.word(w)
	split := false
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.ParamExp:
			split = true
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return []string{s}
		}
	}
	if !split {
		return []string{s}
	}
	fs := strings.Fields(s)
	if len(fs) == 0 {
		return nil
	}
	return fs
}

func (r resolver) part(p syntax.WordPart, first, quoted bool) string {
	switch p := p.(type) {
	case *syntax.Lit:
		v := p.Value
		if quoted {
			return unescapeDouble(v)
		}
		if first && strings.HasPrefix(v, "~") {
			rest := v[1:]
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				rest = rest[i:]
			} else {
				rest = ""
			}
			return homeSentinel + unescapeBare(rest)
		}
		return unescapeBare(v)
	case *syntax.SglQuoted:
		if p.Dollar {
			return ansiC(p.Value)
		}
		return p.Value
	case *syntax.DblQuoted:
		var b strings.Builder
		for _, q := range p.Parts {
			b.WriteString(r.part(q, false, true))
			if b.Len() > maxValue {
				return unknownMark
			}
		}
		return b.String()
	case *syntax.ParamExp:
		return r.param(p)
	case *syntax.CmdSubst:
		return r.cmdSubst(p)
	case *syntax.ProcSubst:
		return devFdSentinel
	}
	return unknownMark
}

func (r resolver) param(p *syntax.ParamExp) string {
	if p.Param == nil || p.Excl || p.Length || p.Width || p.Index != nil || p.Slice != nil || p.Repl != nil ||
		p.NestedParam != nil || p.Names != 0 {
		return unknownMark
	}
	v := r.e.lookup(p.Param.Value)
	if p.Exp == nil {
		return v
	}
	switch p.Exp.Op {
	case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull:
		// A variable only the outside could set is most likely unset, and
		// the default is what a script relies on: ${OUT:-/opt} is /opt.
		if v == "" || r.e.external(p.Param.Value) {
			return r.word(p.Exp.Word)
		}
		return v
	case syntax.ErrorUnset, syntax.ErrorUnsetOrNull:
		if v == "" {
			return unknownMark // the shell stops here; the value is never empty
		}
		return v
	case syntax.AlternateUnset, syntax.AlternateUnsetOrNull:
		if v == "" {
			return ""
		}
		if strings.Contains(v, unknownMark) {
			return unknownMark
		}
		return r.word(p.Exp.Word)
	}
	return unknownMark
}

// cmdSubst knows a few commands whose output is a path of known kind.
func (r resolver) cmdSubst(c *syntax.CmdSubst) string {
	if len(c.Stmts) == 1 {
		if call, ok := c.Stmts[0].Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			switch call.Args[0].Lit() {
			case "mktemp":
				return scratchSent + "/" + unknownMark
			case "pwd":
				if r.e.cwd != "" {
					return r.e.cwd
				}
			case "dirname":
				if len(call.Args) == 2 {
					if p := r.word(call.Args[1]); p != "" && !strings.Contains(p, unknownMark) {
						return path.Dir(p)
					}
				}
			case "realpath", "readlink":
				if len(call.Args) >= 2 {
					if p := r.word(call.Args[len(call.Args)-1]); strings.HasPrefix(p, "/") && !strings.Contains(p, unknownMark) {
						return path.Clean(p)
					}
				}
			}
		}
	}
	return unknownMark
}

func unescapeBare(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ansiC decodes $'...' strings (the common escapes).
func ansiC(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'e', 'E':
			b.WriteByte(27)
		case 'x':
			j := i + 1
			for j < len(s) && j < i+3 && isHex(s[j]) {
				j++
			}
			if n, err := strconv.ParseUint(s[i+1:j], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i = j - 1
			} else {
				b.WriteString(`\x`)
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 8)
			b.WriteByte(byte(n))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// Literal resolves a word's quoting without evaluating anything. Each
// expansion becomes "?" and ok is false when there was one, so callers that
// need an exact value can refuse and callers that only classify can go on.
func Literal(w *syntax.Word) (s string, ok bool) {
	var b strings.Builder
	ok = true
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if l, isLit := q.(*syntax.Lit); isLit {
					b.WriteString(l.Value)
				} else {
					b.WriteString("?")
					ok = false
				}
			}
		default:
			b.WriteString("?")
			ok = false
		}
	}
	return b.String(), ok
}
