package scan

import (
	"path"
	"slices"
	"strconv"
	"strings"
)

// function computes make's text functions, which depend on nothing but
// their arguments, so that conditionals such as
// `ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),s)` and lists built
// with patsubst are known. A word only known at run time stays one unknown
// word; a result that depends on one is unknownMark. $(call), $(eval),
// $(shell), $(wildcard) and the rest are only known at run time.
func (x *makeExpander) function(name, args string, depth int) string {
	arity := map[string]int{
		"subst": 3, "patsubst": 3, "strip": 1, "findstring": 2, "filter": 2, "filter-out": 2, "sort": 1,
		"word": 2, "wordlist": 3, "words": 1, "firstword": 1, "lastword": 1, "dir": 1, "notdir": 1,
		"suffix": 1, "basename": 1, "addsuffix": 2, "addprefix": 2, "join": 2, "if": 3, "or": -1, "and": -1,
		"foreach": 3, "value": 1, "origin": 1, "flavor": 1, "info": 1, "warning": 1,
	}
	n, ok := arity[name]
	if !ok {
		return unknownMark
	}
	raw := splitArgs(strings.TrimLeft(args, " \t"), n)
	switch name {
	case "if":
		return x.fnIf(raw, depth)
	case "or", "and":
		return x.fnOrAnd(name, raw, depth)
	case "foreach":
		return x.fnForeach(raw, depth)
	}
	a := make([]string, len(raw))
	for i, r := range raw {
		a[i] = x.expandDepth(r, depth+1)
	}
	arg := func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
	switch name {
	case "info", "warning":
		return ""
	case "value", "origin", "flavor":
		return x.varInfo(name, strings.TrimSpace(arg(0)))
	case "subst":
		if hasUnknown(arg(0)+arg(1)) || arg(0) == "" {
			return unknownMark
		}
		return strings.ReplaceAll(arg(2), arg(0), arg(1))
	case "patsubst":
		if hasUnknown(arg(0) + arg(1)) {
			return unknownMark
		}
		pat, rep := strings.TrimSpace(arg(0)), strings.TrimSpace(arg(1))
		return mapWords(arg(2), func(w string) string {
			if stem, ok := matchPattern(pat, w); ok {
				if strings.Contains(pat, "%") {
					return strings.Replace(rep, "%", stem, 1)
				}
				return rep
			}
			return w
		})
	case "strip":
		return strings.Join(strings.Fields(arg(0)), " ")
	case "findstring":
		if hasUnknown(arg(0) + arg(1)) {
			return unknownMark
		}
		if strings.Contains(arg(1), arg(0)) {
			return arg(0)
		}
		return ""
	case "filter", "filter-out":
		if hasUnknown(arg(0)) {
			return unknownMark
		}
		pats := strings.Fields(arg(0))
		var out []string
		for _, w := range strings.Fields(arg(1)) {
			m := slices.ContainsFunc(pats, func(p string) bool { _, ok := matchPattern(p, w); return ok })
			if hasUnknown(w) || m == (name == "filter") {
				out = append(out, w) // an unknown word may or may not be filtered: kept
			}
		}
		return strings.Join(out, " ")
	case "sort":
		var out []string
		unknown := false
		for _, w := range strings.Fields(arg(0)) {
			if hasUnknown(w) {
				unknown = true
			} else if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
		slices.Sort(out)
		if unknown {
			out = append(out, unknownMark)
		}
		return strings.Join(out, " ")
	case "words", "word", "wordlist", "firstword", "lastword":
		return wordFunc(name, a)
	case "dir":
		return mapWords(arg(0), func(w string) string {
			if i := strings.LastIndex(w, "/"); i >= 0 {
				return w[:i+1]
			}
			return "./"
		})
	case "notdir":
		return mapWords(arg(0), func(w string) string { return w[strings.LastIndex(w, "/")+1:] })
	case "suffix", "basename":
		var out []string
		for _, w := range strings.Fields(arg(0)) {
			ext := path.Ext(w)
			if strings.Contains(ext, "/") {
				ext = ""
			}
			switch {
			case hasUnknown(w):
				out = append(out, unknownMark)
			case name == "basename":
				out = append(out, strings.TrimSuffix(w, ext))
			case ext != "":
				out = append(out, ext)
			}
		}
		return strings.Join(out, " ")
	case "addsuffix", "addprefix":
		if hasUnknown(arg(0)) {
			return unknownMark
		}
		return mapWords(arg(1), func(w string) string {
			if name == "addsuffix" {
				return w + arg(0)
			}
			return arg(0) + w
		})
	case "join":
		l, r := strings.Fields(arg(0)), strings.Fields(arg(1))
		out := make([]string, max(len(l), len(r)))
		for i := range out {
			if i < len(l) {
				out[i] = l[i]
			}
			if i < len(r) {
				out[i] += r[i]
			}
		}
		return strings.Join(out, " ")
	}
	return unknownMark
}

// splitArgs splits a function's arguments at top-level commas; with n > 0
// the last argument takes the rest, commas included.
func splitArgs(s string, n int) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '{':
			depth++
		case ')', '}':
			depth--
		case ',':
			if depth == 0 && (n <= 0 || len(out) < n-1) {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func hasUnknown(s string) bool { return strings.Contains(s, unknownMark) }

// truth is how a condition of $(if), $(or), $(and) reads: non-empty, empty,
// or only known at run time.
func truth(s string) tri {
	if strings.Trim(s, unknownMark+" \t\n") != "" {
		return triOn
	}
	if hasUnknown(s) {
		return triMaybe
	}
	return triOff
}

func (x *makeExpander) fnIf(a []string, depth int) string {
	switch truth(x.expandDepth(strings.TrimSpace(a[0]), depth+1)) {
	case triOn:
		if len(a) > 1 {
			return x.expandDepth(a[1], depth+1)
		}
		return ""
	case triOff:
		if len(a) > 2 {
			return x.expandDepth(a[2], depth+1)
		}
		return ""
	}
	return unknownMark
}

func (x *makeExpander) fnOrAnd(name string, a []string, depth int) string {
	last := ""
	for _, r := range a {
		v := x.expandDepth(strings.TrimSpace(r), depth+1)
		switch t := truth(v); {
		case t == triMaybe:
			return unknownMark
		case name == "or" && t == triOn:
			return v
		case name == "and" && t == triOff:
			return ""
		}
		last = v
	}
	if name == "or" {
		return ""
	}
	return last
}

func (x *makeExpander) fnForeach(a []string, depth int) string {
	if len(a) < 3 {
		return unknownMark
	}
	name := strings.TrimSpace(x.expandDepth(a[0], depth+1))
	list := x.expandDepth(a[1], depth+1)
	if hasUnknown(name + list) {
		return unknownMark
	}
	saved, had := x.local[name]
	var out []string
	for _, w := range strings.Fields(list) {
		if x.budget < 0 {
			break
		}
		x.local[name] = w
		out = append(out, x.expandDepth(a[2], depth+1))
	}
	if had {
		x.local[name] = saved
	} else {
		delete(x.local, name)
	}
	return strings.Join(out, " ")
}

func (x *makeExpander) varInfo(fn, name string) string {
	if hasUnknown(name) {
		return unknownMark
	}
	v, ok := x.vars[name]
	_, auto := x.auto.value(name)
	switch fn {
	case "value":
		if ok {
			return v.value
		}
		if d, ok := makeDefaults[name]; ok {
			return d
		}
	case "flavor":
		switch {
		case ok && v.simple:
			return "simple"
		case ok || makeDefaults[name] != "":
			return "recursive"
		}
	case "origin":
		switch {
		case auto:
			return "automatic"
		case ok && v.cmdline:
			return "command line"
		case ok:
			return "file"
		case makeDefaults[name] != "":
			return "default"
		case harnessVars[name] != "":
			return "environment"
		}
	}
	if x.undefinedEmpty {
		if fn == "value" {
			return ""
		}
		return "undefined"
	}
	return unknownMark // the environment may define it
}

func mapWords(s string, f func(string) string) string {
	words := strings.Fields(s)
	for i, w := range words {
		if hasUnknown(w) {
			words[i] = unknownMark
			continue
		}
		words[i] = f(w)
	}
	return strings.Join(words, " ")
}

func wordFunc(name string, a []string) string {
	all := strings.Join(a, ",")
	last := a[len(a)-1]
	words := strings.Fields(last)
	switch name {
	case "words":
		if hasUnknown(last) {
			return unknownMark
		}
		return strconv.Itoa(len(words))
	case "firstword", "lastword":
		if len(words) == 0 {
			return ""
		}
		w := words[0]
		if name == "lastword" {
			w = words[len(words)-1]
		}
		if hasUnknown(w) || (name == "lastword" && hasUnknown(last)) {
			return unknownMark
		}
		return w
	}
	if hasUnknown(all) || len(a) < 2 {
		return unknownMark
	}
	from, err := strconv.Atoi(strings.TrimSpace(a[0]))
	if err != nil || from < 1 {
		return unknownMark
	}
	to := from
	if name == "wordlist" {
		if len(a) < 3 {
			return unknownMark
		}
		if to, err = strconv.Atoi(strings.TrimSpace(a[1])); err != nil {
			return unknownMark
		}
	}
	if from > len(words) || to < from {
		return ""
	}
	return strings.Join(words[from-1:min(to, len(words))], " ")
}
