package scan

import (
	"path"
	"strings"
)

// makeVar is one make variable. A recursive variable (=) keeps its text and
// is expanded where it is used; a simple one (:=) was expanded when set.
type makeVar struct {
	value   string
	simple  bool
	cmdline bool // set on make's command line: only `override` changes it
}

// makeDefaults are the variables GNU make defines before reading a makefile
// (the few whose value a recipe commonly runs), so that `$(CC) -o $@ $^` is
// a command the shell scanner can judge.
var makeDefaults = map[string]string{
	"MAKE": "make", "SHELL": "/bin/sh", "CC": "cc", "CXX": "g++", "CPP": "$(CC) -E", "AR": "ar", "ARFLAGS": "rv",
	"AS": "as", "LD": "ld", "RM": "rm -f", "LEX": "lex", "YACC": "yacc",
}

// makeFunctions are make's built-in functions: `$(name args)` calls one.
// The text functions are computed (makefuncs.go); the others' result is
// only known at run time.
var makeFunctions = map[string]bool{
	"abspath": true, "addprefix": true, "addsuffix": true, "and": true, "basename": true, "call": true,
	"dir": true, "error": true, "eval": true, "file": true, "filter": true, "filter-out": true,
	"findstring": true, "firstword": true, "flavor": true, "foreach": true, "guile": true, "if": true,
	"info": true, "intcmp": true, "join": true, "lastword": true, "let": true, "notdir": true, "or": true,
	"origin": true, "patsubst": true, "realpath": true, "shell": true, "sort": true, "strip": true,
	"subst": true, "suffix": true, "value": true, "warning": true, "wildcard": true, "word": true,
	"wordlist": true, "words": true,
}

// maxMakeDepth bounds nested variable references (make itself stops at a
// variable that refers to itself).
const maxMakeDepth = 32

// makeAuto holds the automatic variables of the target a recipe makes.
type makeAuto struct {
	target    string
	stem      string
	prereqs   []string
	orderOnly []string
}

func (a *makeAuto) value(name string) (string, bool) {
	if a == nil {
		if len(name) <= 2 && strings.ContainsAny(name[:1], "@<^+?*|%") {
			return "", true // outside a recipe they are empty
		}
		return "", false
	}
	base, mod := name, byte(0)
	if len(name) == 2 && (name[1] == 'D' || name[1] == 'F') {
		base, mod = name[:1], name[1]
	}
	var words []string
	switch base {
	case "@":
		words = []string{a.target}
	case "<":
		if len(a.prereqs) > 0 {
			words = a.prereqs[:1]
		}
	case "^", "?":
		seen := map[string]bool{}
		for _, p := range a.prereqs {
			if !seen[p] {
				seen[p] = true
				words = append(words, p)
			}
		}
	case "+":
		words = a.prereqs
	case "|":
		words = a.orderOnly
	case "*":
		words = []string{a.stem}
	case "%":
	default:
		return "", false
	}
	out := make([]string, 0, len(words))
	for _, w := range words {
		switch mod {
		case 'D':
			w = path.Dir(w)
		case 'F':
			w = path.Base(w)
		}
		out = append(out, w)
	}
	return strings.Join(out, " "), true
}

// makeExpander expands make text: variable references from vars, the
// automatic variables of auto, `$$` as `$`. What it cannot know (what
// $(shell) prints, a variable no one sets) becomes unknownMark, which the
// shell scanner reads as a value only known at run time, in any quoting.
type makeExpander struct {
	vars   map[string]*makeVar
	auto   *makeAuto
	local  map[string]string // $(foreach) variables
	budget int               // bytes the expansion may still produce
	active map[string]bool
	// undefinedEmpty reads a variable no one sets as empty, its likely
	// value, as conditionals need a decision; elsewhere it is unknown (the
	// config's env may set it).
	undefinedEmpty bool
}

func newMakeExpander(vars map[string]*makeVar, auto *makeAuto) *makeExpander {
	return &makeExpander{vars: vars, auto: auto, local: map[string]string{}, budget: maxValue, active: map[string]bool{}}
}

// expandMake expands s once with vars (no automatic variables).
func expandMake(s string, vars map[string]*makeVar) string {
	return newMakeExpander(vars, nil).expand(s)
}

func (x *makeExpander) expand(s string) string {
	out := x.expandDepth(s, 0)
	if x.budget < 0 {
		return unknownMark
	}
	return out
}

func (x *makeExpander) expandDepth(s string, depth int) string {
	if !strings.Contains(s, "$") {
		x.budget -= len(s)
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if x.budget-b.Len() < 0 {
			break
		}
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			break // a lone trailing $ expands to nothing
		}
		switch c := s[i+1]; c {
		case '$':
			b.WriteByte('$')
			i++
		case '(', '{':
			end := closing(s, i+1)
			if end < 0 {
				b.WriteString(unknownMark) // unterminated: make stops here
				i = len(s)
				continue
			}
			b.WriteString(x.ref(s[i+2:end], depth))
			i = end
		default:
			b.WriteString(x.ref(string(c), depth))
			i++
		}
	}
	x.budget -= b.Len()
	return b.String()
}

// closing finds the bracket that closes the one at s[open], counting only
// brackets of the same kind, as make does.
func closing(s string, open int) int {
	o := s[open]
	c := byte(')')
	if o == '{' {
		c = '}'
	}
	depth := 0
	for j := open; j < len(s); j++ {
		switch s[j] {
		case o:
			depth++
		case c:
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// ref expands the reference $(content).
func (x *makeExpander) ref(content string, depth int) string {
	// Each reference costs, so that values expanding to nothing cannot
	// double without end either.
	if x.budget--; depth > maxMakeDepth || x.budget < 0 {
		return unknownMark
	}
	if i := strings.IndexAny(content, " \t"); i > 0 && makeFunctions[content[:i]] {
		return x.function(content[:i], content[i+1:], depth)
	}
	name, subst := content, ""
	if k := topLevel(content, ':'); k >= 0 && strings.Contains(content[k:], "=") {
		name, subst = content[:k], content[k+1:]
	}
	name = x.expandDepth(name, depth+1)
	if strings.Contains(name, unknownMark) {
		return unknownMark
	}
	v := x.lookup(name, depth)
	if subst == "" {
		return v
	}
	from, to, _ := strings.Cut(x.expandDepth(subst, depth+1), "=")
	if strings.Contains(from+to, unknownMark) {
		return unknownMark
	}
	return substRef(v, from, to)
}

func (x *makeExpander) lookup(name string, depth int) string {
	if name == "" {
		return ""
	}
	if v, ok := x.local[name]; ok {
		return v
	}
	if v, ok := x.auto.value(name); ok {
		return v
	}
	if v, ok := x.vars[name]; ok {
		if v.simple {
			return v.value
		}
		if x.active[name] {
			return unknownMark // refers to itself: make refuses it
		}
		x.active[name] = true
		out := x.expandDepth(v.value, depth+1)
		delete(x.active, name)
		return out
	}
	if v, ok := makeDefaults[name]; ok {
		return x.expandDepth(v, depth+1)
	}
	if v, ok := harnessVars[name]; ok {
		return v // make reads the environment the harness sets
	}
	if x.undefinedEmpty {
		return ""
	}
	return unknownMark // the config's env, or nothing: not known here
}

// substRef is $(VAR:from=to): a suffix substitution, or patsubst when from
// has a %.
func substRef(v, from, to string) string {
	if !strings.Contains(from, "%") {
		from, to = "%"+from, "%"+to
	}
	words := strings.Fields(v)
	for i, w := range words {
		if stem, ok := matchPattern(from, w); ok {
			words[i] = strings.Replace(to, "%", stem, 1)
		}
	}
	return strings.Join(words, " ")
}

// matchPattern matches name against a pattern with one %, returning the stem.
func matchPattern(pat, name string) (string, bool) {
	pre, suf, ok := strings.Cut(pat, "%")
	if !ok {
		return "", pat == name
	}
	if len(name) < len(pre)+len(suf) || !strings.HasPrefix(name, pre) || !strings.HasSuffix(name, suf) {
		return "", false
	}
	return name[len(pre) : len(name)-len(suf)], true
}

// topLevel is the index of the first c in s outside $(...) and ${...}, or -1.
func topLevel(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{'):
			end := closing(s, i+1)
			if end < 0 {
				return -1
			}
			i = end
		case s[i] == '$' && i+1 < len(s):
			i++ // $$, $@, $x: not the character looked for
		case s[i] == c:
			return i
		}
	}
	return -1
}
