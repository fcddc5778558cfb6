package scan

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// makefileNames are the files GNU make reads when none is named, in order.
var makefileNames = []string{"GNUmakefile", "makefile", "Makefile"}

// maxMakeChain bounds how deep prerequisites are followed; a longer chain
// is not followed to its end, which is itself a finding.
const maxMakeChain = 200

// makeRun is one make invocation as its arguments describe it.
type makeRun struct {
	dir         string
	files       []string // -f, in order
	includeDirs []string // -I
	targets     []string
	vars        []string // NAME=value (and :=, +=, ...), the enclosing make's first
	evals       []string // --eval text
	flags       string   // the one-letter options, as MAKEFLAGS shows them (makefiles test for s and w)
}

// makeLetters are make's one-letter options that take no value, and the
// long names of the ones makefiles look for in MAKEFLAGS.
var (
	makeLetters = regexp.MustCompile(`^-[BbeiknqrRsStw]+$`)
	makeLong    = map[string]string{"--silent": "s", "--quiet": "s", "--print-directory": "w", "--keep-going": "k",
		"--dry-run": "n", "--just-print": "n", "--recon": "n", "--ignore-errors": "i", "--touch": "t"}
)

// parseMakeArgs reads `make [options] [VAR=value] [targets]`. inherited are
// the command-line variables of an enclosing make (make passes them down).
func parseMakeArgs(ops []arg, cwd string, inherited []string) makeRun {
	run := makeRun{dir: cwd, vars: slices.Clone(inherited)}
	for i := 0; i < len(ops); i++ {
		a := ops[i].s
		val := func(short, long string) (string, bool) {
			switch {
			case (short != "" && a == short) || a == long:
				if i+1 < len(ops) {
					i++
					return ops[i].s, true
				}
				return "", true
			case strings.HasPrefix(a, long+"="):
				return a[len(long)+1:], true
			case short != "" && strings.HasPrefix(a, short) && len(a) > len(short) && !strings.HasPrefix(a, "--"):
				return a[len(short):], true
			}
			return "", false
		}
		if v, ok := val("-C", "--directory"); ok {
			if strings.HasPrefix(v, "/") {
				run.dir = v
			} else {
				run.dir = filepath.Join(run.dir, v)
			}
			continue
		}
		if v, ok := val("-f", "--file"); ok {
			run.files = append(run.files, v)
			continue
		}
		if v, ok := val("", "--makefile"); ok {
			run.files = append(run.files, v)
			continue
		}
		if v, ok := val("-I", "--include-dir"); ok {
			run.includeDirs = append(run.includeDirs, v)
			continue
		}
		if v, ok := val("", "--eval"); ok {
			run.evals = append(run.evals, v)
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
		case makeLetters.MatchString(a):
			run.flags += a[1:]
		case makeLong[a] != "":
			run.flags += makeLong[a]
		case strings.HasPrefix(a, "-"):
		case strings.Contains(a, "="):
			run.vars = append(run.vars, a)
		default:
			run.targets = append(run.targets, a)
		}
	}
	for i, d := range run.includeDirs {
		if !strings.HasPrefix(d, "/") {
			run.includeDirs[i] = filepath.Join(run.dir, d)
		}
	}
	return run
}

// key identifies a make run: the same makefiles, goals, variables and
// shell environment scan the same, so a recursive $(MAKE) of them adds
// nothing and is not followed again.
func (run makeRun) key(paths []string, e *env) string {
	t := slices.Clone(run.targets)
	sort.Strings(t)
	return strings.Join([]string{run.dir, strings.Join(paths, "\x00"), strings.Join(t, "\x00"),
		strings.Join(run.vars, "\x00"), strings.Join(run.evals, "\x00"), run.flags, e.key()}, "\x01")
}

// make follows `make [options] [targets]`: the recipe lines that make would
// run for the goals (the targets named, or the default goal) and for what
// they depend on, transitively, are shell run by make, so they are scanned
// like the command itself, each finding naming the makefile and its line.
// Recipes of targets the goals do not reach are not run and not scanned;
// define bodies are variable values, not recipes.
func (s *scanner) make(u *unit, at *stmtRef, ops []arg, e *env) {
	line, cmd := at.pos(u)
	dir := e.cwd
	if dir == "" {
		dir = s.root
	}
	run := parseMakeArgs(ops, dir, e.makeVars)
	unknown := strings.Contains(run.dir, unknownMark)
	for _, f := range run.files {
		unknown = unknown || strings.Contains(f, unknownMark) || f == "-"
	}
	if unknown {
		s.add(u, line, PatDynamicEval, cmd, "runs make on a makefile whose path is only known at run time")
		return
	}
	var paths []string
	for _, f := range run.files {
		if !strings.HasPrefix(f, "/") {
			f = filepath.Join(run.dir, f)
		}
		paths = append(paths, f)
	}
	if len(paths) == 0 {
		for _, n := range makefileNames {
			p := filepath.Join(run.dir, n)
			if _, exists, err := s.resolve(p); err == nil && exists {
				paths = append(paths, p)
				break
			}
		}
		if len(paths) == 0 && len(run.evals) == 0 {
			return // no makefile: make fails before running anything
		}
	}
	key := run.key(paths, e)
	if s.makes[key] {
		return
	}
	s.makes[key] = true

	mf := newMakefile(filepath.Clean(run.dir))
	mf.includeDirs = run.includeDirs
	mf.vars["CURDIR"] = &makeVar{value: mf.dir, simple: true}
	flags := run.flags
	if len(run.vars) > 0 {
		flags = strings.TrimSpace(flags + " -- " + strings.Join(run.vars, " "))
	}
	mf.vars["MAKEFLAGS"] = &makeVar{value: flags, simple: true}
	for _, a := range run.vars {
		if name, op, value, ok := splitAssign(a); ok && plainMakeName(name) {
			(&makeReader{mf: mf}).assign(name, op, value, true)
			if v, ok := mf.vars[name]; ok {
				v.cmdline = true
			}
		}
	}
	for _, text := range run.evals {
		r := &makeReader{s: s, u: u, at: at, mf: mf, name: u.file}
		r.parse(text, line)
	}
	for _, p := range paths {
		if !s.readMakefile(u, at, p, mf, 0) {
			return
		}
	}
	goals := run.targets
	if len(goals) == 0 {
		if v, ok := mf.vars[".DEFAULT_GOAL"]; ok {
			goals = strings.Fields(expandMake(v.value, mf.vars))
		}
		if len(goals) == 0 && mf.first != "" {
			goals = []string{mf.first}
		}
	}
	menv := e.clone()
	menv.cwd = mf.dir
	menv.makeVars = run.vars
	v := &makeVisit{s: s, u: u, at: at, mf: mf, env: menv, envKey: menv.key(), seen: map[string]bool{}}
	for _, g := range mf.included {
		if len(mf.rules[g]) > 0 {
			v.visit(g, 0, nil)
		}
	}
	for _, g := range goals {
		v.visit(g, 0, nil)
	}
}

func plainMakeName(n string) bool {
	return n != "" && !strings.ContainsAny(n, " \t$:#=")
}

// makeVisit walks the rules one make run would use.
type makeVisit struct {
	s         *scanner
	u         *unit
	at        *stmtRef
	mf        *makefile
	env       *env
	envKey    string // env.key() of env
	seen      map[string]bool
	computed  bool // the rules with computed targets were visited
	deflt     bool // the .DEFAULT recipe was scanned
	deepFound bool
}

// visit makes target t: its prerequisites first, then its recipes. A target
// without a recipe gets one from the implicit rules that match it, each at
// most once on a chain, as in make. A name only known at run time may be
// any target whose name is computed too.
func (v *makeVisit) visit(t string, depth int, chain []*makeRule) {
	if v.s.ctx.Err() != nil || v.seen[t] {
		return
	}
	if depth > maxMakeChain {
		if !v.deepFound {
			v.deepFound = true
			line, cmd := v.at.pos(v.u)
			v.s.add(v.u, line, PatUnscannable, cmd, fmt.Sprintf("make prerequisites nest deeper than %d levels", maxMakeChain))
		}
		return
	}
	v.seen[t] = true
	if hasUnknown(t) {
		// Any computed target may be the one meant; so may every
		// target the known parts of the name match (t/helper/… is
		// any of t/helper/*).
		v.visitComputed(depth)
		if strings.Trim(t, unknownMark) != "" {
			for _, n := range v.mf.names {
				if unknownMatch(t, n) {
					v.visit(n, depth+1, chain)
				}
			}
		}
		return
	}
	rules := v.mf.rules[t]
	if !slices.ContainsFunc(rules, func(r *makeRule) bool { return len(r.recipe) > 0 }) {
		for _, r := range v.mf.computed {
			if strings.Trim(r.target, unknownMark) != "" && unknownMatch(r.target, t) {
				rules = append(slices.Clip(rules), r) // git$X is git when X is empty
			}
		}
	}
	hasRecipe := false
	for _, r := range rules {
		// An explicit rule's prerequisites start implicit chains afresh.
		for _, p := range r.prereqs {
			v.visit(p, depth+1, nil)
		}
		for _, p := range r.orderOnly {
			v.visit(p, depth+1, nil)
		}
		hasRecipe = hasRecipe || len(r.recipe) > 0
	}
	for _, r := range rules {
		v.recipe(r, t)
	}
	if hasRecipe || v.mf.phony[t] {
		return
	}
	matched := false
	for _, p := range v.mf.patterns {
		if slices.Contains(chain, p) {
			continue
		}
		stem, ok := matchTarget(p.target, t)
		if !ok {
			continue
		}
		matched = true
		inst := &makeRule{target: t, stem: stem, prereqs: substStem(p.prereqs, stem),
			orderOnly: substStem(p.orderOnly, stem), recipe: p.recipe}
		next := append(slices.Clone(chain), p)
		if p.terminal {
			next = append(next, v.mf.patterns...) // no implicit rule makes its prerequisites
		}
		for _, q := range inst.prereqs {
			v.visit(q, depth+1, next)
		}
		for _, q := range inst.orderOnly {
			v.visit(q, depth+1, next)
		}
		v.recipe(inst, t)
	}
	if !matched && len(rules) == 0 && !v.deflt {
		for _, d := range v.mf.rules[".DEFAULT"] {
			if len(d.recipe) > 0 {
				v.deflt = true
				v.recipe(d, t)
			}
		}
	}
}

// unknownMatch reports whether name can be what glob, a name with parts
// only known at run time, turns out to be.
func unknownMatch(glob, name string) bool {
	parts := strings.Split(glob, unknownMark)
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(name, p)
		if i < 0 {
			return false
		}
		name = name[i+len(p):]
	}
	return strings.HasSuffix(name, last)
}

// visitComputed follows every rule whose target is only known at run time,
// once: any of them may be the one a computed prerequisite names.
func (v *makeVisit) visitComputed(depth int) {
	if v.computed {
		return
	}
	v.computed = true
	for _, r := range v.mf.computed {
		for _, p := range r.prereqs {
			v.visit(p, depth+1, nil)
		}
		for _, p := range r.orderOnly {
			v.visit(p, depth+1, nil)
		}
	}
	for _, r := range v.mf.computed {
		v.recipe(r, r.target)
	}
}

// recipe scans the recipe of rule r making target t. Each line is expanded
// with the makefile's variables and t's automatic variables; each command
// of it ($(define) values may add lines) runs in a shell of its own.
func (v *makeVisit) recipe(r *makeRule, t string) {
	if len(r.recipe) == 0 {
		return
	}
	stem := r.stem
	if stem == "" && !strings.Contains(r.target, "%") {
		stem = strings.TrimSuffix(t, path.Ext(t))
	}
	auto := &makeAuto{target: t, stem: stem, prereqs: r.prereqs, orderOnly: r.orderOnly}
	for _, l := range r.recipe {
		if v.s.ctx.Err() != nil {
			return
		}
		text := newMakeExpander(v.mf.vars, auto).expand(l.text)
		fixed := 0
		if strings.Count(text, "\n") != strings.Count(l.text, "\n") {
			fixed = l.line // lines from a variable's value: report the recipe line
		}
		for _, c := range recipeCommands(text) {
			c = separateUnknown(strings.TrimLeft(c, "@-+ \t"))
			if strings.TrimSpace(c) == "" {
				continue
			}
			key := strings.Join([]string{l.file, fmt.Sprint(l.line), v.envKey, c}, "\x00")
			if v.s.recipes[key] {
				continue
			}
			v.s.recipes[key] = true
			v.s.shellSource(&unit{file: l.file, src: c, lineBase: l.line, depth: v.u.depth + 1, fixed: fixed, recipe: true}, v.env.clone())
		}
	}
}

// separateUnknown makes a value only known at run time that starts a
// recipe command a command of its own: it is most often a quiet prefix
// ($(QUIET_CC) is empty or `@echo CC $@;`), and the rest is then a command
// the shell scanner can judge rather than the arguments of an unknown one.
func separateUnknown(c string) string {
	rest := strings.TrimLeft(c, unknownMark)
	if len(rest) == len(c) {
		return c
	}
	next := strings.TrimLeft(strings.ReplaceAll(rest, "\\\n", ""), " \t")
	if next == "" || strings.ContainsAny(next[:1], ";&|)") {
		return c
	}
	return c[:len(c)-len(rest)] + ";" + rest
}

// recipeCommands splits an expanded recipe line at newlines that are not
// escaped: make runs each part in a shell of its own.
func recipeCommands(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' && !(i > 0 && text[i-1] == '\\') {
			out = append(out, text[start:i])
			start = i + 1
		}
	}
	return append(out, text[start:])
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
