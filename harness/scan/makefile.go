package scan

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// makeRule is one rule for one target: an explicit target, the target
// pattern of an implicit rule ("%.o"), or a target whose name is only known
// at run time (computed).
type makeRule struct {
	target    string
	prereqs   []string
	orderOnly []string
	stem      string // what % matched, in a static pattern rule
	terminal  bool   // a double-colon pattern rule: its prerequisites are not made by implicit rules
	recipe    []makeLine
}

// makeLine is one recipe line as make hands it to the shell (backslash-
// newlines kept) and where it starts.
type makeLine struct {
	file string // fixture-relative
	line int
	text string
}

// makefile is what the scan knows of the makefiles of one make run.
type makefile struct {
	dir         string                 // make's working directory
	includeDirs []string               // -I
	rules       map[string][]*makeRule // explicit rules, by target
	names       []string               // the explicit targets, in the order they appear
	patterns    []*makeRule            // implicit (pattern and suffix) rules, in order
	computed    []*makeRule            // rules whose target is only known at run time
	phony       map[string]bool
	included    []string        // makefiles named by include: make remakes them first
	suffixes    map[string]bool // .SUFFIXES: what makes .c.o a suffix rule
	vars        map[string]*makeVar
	first       string // the default goal: the first target not starting with '.'
}

func newMakefile(dir string) *makefile {
	mf := &makefile{dir: dir, rules: map[string][]*makeRule{}, phony: map[string]bool{}, vars: map[string]*makeVar{},
		suffixes: map[string]bool{}}
	for _, sfx := range strings.Fields(makeSuffixes) {
		mf.suffixes[sfx] = true
	}
	return mf
}

// makeSuffixes is GNU make's default .SUFFIXES list.
const makeSuffixes = ".out .a .ln .o .c .cc .C .cpp .p .f .F .m .r .y .l .ym .yl .s .S .mod .sym .def .h .info .dvi " +
	".tex .texinfo .texi .txinfo .w .ch .web .sh .elc .el"

// makeSpecial are GNU make's special targets: they are settings, not files
// to make.
var makeSpecial = map[string]bool{
	".PHONY": true, ".SUFFIXES": true, ".DEFAULT": true, ".PRECIOUS": true, ".INTERMEDIATE": true,
	".NOTINTERMEDIATE": true, ".SECONDARY": true, ".SECONDEXPANSION": true, ".DELETE_ON_ERROR": true,
	".IGNORE": true, ".LOW_RESOLUTION_TIME": true, ".SILENT": true, ".EXPORT_ALL_VARIABLES": true,
	".NOTPARALLEL": true, ".ONESHELL": true, ".POSIX": true, ".WAIT": true,
}

// suffixRule matches an old-fashioned suffix rule's target (.c.o, .sh).
var suffixRule = regexp.MustCompile(`^(\.[^./%]+)(\.[^./%]+)?$`)

// tri is what the scan knows of a conditional: taken, not taken, or only
// known at run time (then both branches are read, so nothing is missed).
type tri int8

const (
	triOff tri = iota
	triMaybe
	triOn
)

func (t tri) not() tri { return triOn - t }

// makeCond is one open ifeq/ifdef ... endif.
type makeCond struct {
	cur   tri // the branch being read
	taken tri // whether an earlier branch of it was
}

// makeDefine is an open define ... endef: its body is a variable's value,
// never a recipe.
type makeDefine struct {
	name, op string
	override bool
	live     bool // in a branch that is read
	level    int  // nested defines
	body     []string
}

// makeReader reads one makefile into a makefile: each file has its own
// conditionals, all share the rules and variables.
type makeReader struct {
	s      *scanner
	u      *unit // the make command, for findings about included files
	at     *stmtRef
	mf     *makefile
	depth  int    // include depth
	name   string // fixture-relative file name
	conds  []makeCond
	def    *makeDefine
	cur    []*makeRule // the rules recipe lines belong to
	inRule bool        // recipe lines may follow (cur may be empty: a rule with no target)
}

func (r *makeReader) state() tri {
	st := triOn
	for _, c := range r.conds {
		st = min(st, c.cur)
	}
	return st
}

// parse reads text, whose first line is line lineBase of r.name.
func (r *makeReader) parse(text string, lineBase int) {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); {
		start := lineBase + i
		raw := strings.TrimSuffix(lines[i], "\r")
		i++
		for continued(raw) && i < len(lines) {
			raw += "\n" + strings.TrimSuffix(lines[i], "\r")
			i++
		}
		r.line(raw, start)
	}
}

// continued reports whether s ends in a backslash that is not itself escaped.
func continued(s string) bool {
	n := len(s) - len(strings.TrimRight(s, `\`))
	return n%2 == 1
}

func (r *makeReader) line(raw string, start int) {
	if r.def != nil {
		r.defineLine(raw)
		return
	}
	st := r.state()
	if strings.HasPrefix(raw, "\t") && r.inRule {
		if st != triOff {
			l := makeLine{file: r.name, line: start, text: recipeText(raw[1:])}
			for _, rule := range r.cur {
				rule.recipe = append(rule.recipe, l)
			}
		}
		return
	}
	text := collapse(raw)
	hash := commentIndex(text)
	code := unescapeHash(text[:hash])
	trimmed := strings.TrimSpace(code)
	if trimmed == "" {
		return // blank lines and comments do not end a rule
	}
	word, rest := firstWord(trimmed)
	switch word {
	case "ifeq", "ifneq", "ifdef", "ifndef":
		r.ifLine(word, rest)
		return
	case "else":
		r.elseLine(rest)
		return
	case "endif":
		if len(r.conds) > 0 {
			r.conds = r.conds[:len(r.conds)-1]
		}
		return
	}
	override, mods, stmt := makePrefixes(trimmed)
	word, rest = firstWord(stmt)
	if st == triOff {
		if word == "define" {
			r.def = &makeDefine{level: 1}
		}
		return
	}
	r.cur, r.inRule = nil, false
	switch {
	case word == "define":
		r.startDefine(rest, override)
		return
	case mods == 0 && (word == "include" || word == "-include" || word == "sinclude"):
		r.include(rest)
		return
	case word == "undefine":
		r.undefine(rest, override)
		return
	case mods == 0 && word == "vpath":
		return
	}
	if name, op, value, ok := splitAssign(stmt); ok {
		r.assign(name, op, value, override)
		return
	}
	if mods > 0 {
		return // export NAME, unexport NAME
	}
	if colon := topLevel(text[:hash], ':'); colon >= 0 {
		r.rule(text, colon, start)
	}
	// Anything else (a bare $(eval ...), $(foreach ...)) is computed at
	// run time: what it defines cannot be known here.
}

// recipeText is a recipe line as the shell gets it: make removes one tab
// after each backslash-newline and keeps the rest.
func recipeText(s string) string {
	return strings.ReplaceAll(s, "\\\n\t", "\\\n")
}

// collapse turns backslash-newlines, with the blanks around them, into one
// space, as make does outside recipes.
func collapse(raw string) string {
	if !strings.Contains(raw, "\\\n") {
		return raw
	}
	parts := strings.Split(raw, "\\\n")
	out := make([]string, 0, len(parts))
	for i, p := range parts {
		if i > 0 {
			p = strings.TrimLeft(p, " \t")
		}
		if i < len(parts)-1 {
			p = strings.TrimRight(p, " \t")
		}
		if p != "" || i == 0 {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// commentIndex is where a make comment starts in s (an unescaped #), or len(s).
func commentIndex(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] != '#' {
			continue
		}
		n := 0
		for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
	}
	return len(s)
}

func unescapeHash(s string) string { return strings.ReplaceAll(s, `\#`, "#") }

func firstWord(s string) (string, string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

// makePrefixes strips the export, unexport, override and private words
// that may precede an assignment or a define.
func makePrefixes(s string) (override bool, mods int, rest string) {
	rest = s
	for {
		w, after := firstWord(rest)
		if after == "" || (w != "export" && w != "unexport" && w != "override" && w != "private") {
			return override, mods, rest
		}
		override = override || w == "override"
		mods++
		rest = after
	}
}

// splitAssign splits NAME op VALUE, the op being =, :=, ::=, :::=, ?=, +=
// or !=. A ':' met first that is not part of an op makes it a rule.
func splitAssign(s string) (name, op, value string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '$' && i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{'):
			end := closing(s, i+1)
			if end < 0 {
				return "", "", "", false
			}
			i = end
		case c == '=':
			op, n := "=", s[:i]
			if i > 0 && strings.IndexByte("?+!", s[i-1]) >= 0 {
				op, n = s[i-1:i+1], s[:i-1]
			}
			return strings.TrimSpace(n), op, strings.TrimLeft(s[i+1:], " \t"), true
		case c == ':':
			for _, o := range []string{":::=", "::=", ":="} {
				if strings.HasPrefix(s[i:], o) {
					return strings.TrimSpace(s[:i]), o, strings.TrimLeft(s[i+len(o):], " \t"), true
				}
			}
			return "", "", "", false
		}
	}
	return "", "", "", false
}

// assign sets a variable as make would. In a branch only known at run time
// a variable that would change becomes unknown.
func (r *makeReader) assign(name, op, value string, override bool) {
	x := newMakeExpander(r.mf.vars, nil)
	name = strings.TrimSpace(x.expand(name))
	if name == "" || strings.Contains(name, unknownMark) {
		return // a computed name: which variable it sets is not known
	}
	old, had := r.mf.vars[name]
	if !had {
		if d, ok := makeDefaults[name]; ok {
			old, had = &makeVar{value: d}, true
		}
	}
	if had && old.cmdline && !override {
		return
	}
	var nv makeVar
	switch op {
	case ":=", "::=", ":::=":
		nv = makeVar{value: x.expand(value), simple: true}
	case "?=":
		if had {
			return
		}
		nv = makeVar{value: value}
	case "+=":
		switch {
		case !had:
			nv = makeVar{value: value}
		case old.simple:
			nv = makeVar{value: joinWords(old.value, x.expand(value)), simple: true}
		default:
			nv = makeVar{value: joinWords(old.value, value)}
		}
	case "!=":
		nv = makeVar{value: unknownMark, simple: true}
	default:
		nv = makeVar{value: value}
	}
	nv.cmdline = had && old.cmdline
	if r.state() == triMaybe && !(had && *old == nv) {
		nv = makeVar{value: unknownMark, simple: true, cmdline: nv.cmdline}
	}
	r.mf.vars[name] = &nv
}

func joinWords(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

func (r *makeReader) undefine(rest string, override bool) {
	for _, name := range strings.Fields(expandMake(rest, r.mf.vars)) {
		if v, ok := r.mf.vars[name]; ok && v.cmdline && !override {
			continue
		}
		if r.state() == triMaybe {
			r.mf.vars[name] = &makeVar{value: unknownMark, simple: true}
			continue
		}
		delete(r.mf.vars, name)
	}
}

func (r *makeReader) startDefine(rest string, override bool) {
	rest = strings.TrimSpace(rest)
	op := "="
	for _, o := range []string{":::=", "::=", ":=", "+=", "?=", "!=", "="} {
		if strings.HasSuffix(rest, o) {
			op, rest = o, strings.TrimSpace(strings.TrimSuffix(rest, o))
			break
		}
	}
	r.def = &makeDefine{name: rest, op: op, override: override, live: true, level: 1}
}

// defineLine takes one line of a define's body. As in make, a nested
// define (a line whose first word is define) needs its own endef.
func (r *makeReader) defineLine(raw string) {
	d := r.def
	if !strings.HasPrefix(raw, "\t") {
		switch w, _ := firstWord(collapse(raw)); w {
		case "define":
			d.level++
		case "endef":
			if d.level--; d.level == 0 {
				r.def = nil
				if d.live {
					r.assign(d.name, d.op, strings.Join(d.body, "\n"), d.override)
				}
				return
			}
		}
	}
	d.body = append(d.body, raw)
}

func (r *makeReader) ifLine(word, rest string) {
	if r.state() == triOff {
		r.conds = append(r.conds, makeCond{cur: triOff, taken: triOn})
		return
	}
	c := r.eval(word, rest)
	r.conds = append(r.conds, makeCond{cur: c, taken: c})
}

func (r *makeReader) elseLine(rest string) {
	if len(r.conds) == 0 {
		return
	}
	top := &r.conds[len(r.conds)-1]
	outer := triOn
	for _, c := range r.conds[:len(r.conds)-1] {
		outer = min(outer, c.cur)
	}
	if top.taken == triOn || outer == triOff {
		top.cur = triOff
		return
	}
	c := triOn
	if w, cond := firstWord(rest); w == "ifeq" || w == "ifneq" || w == "ifdef" || w == "ifndef" {
		c = r.eval(w, cond)
	}
	if top.taken == triMaybe {
		c = min(c, triMaybe)
	}
	top.cur = c
	top.taken = max(top.taken, c)
}

// eval decides a conditional from the variables known so far.
func (r *makeReader) eval(word, rest string) tri {
	x := newMakeExpander(r.mf.vars, nil)
	x.undefinedEmpty = true
	var t tri
	switch word {
	case "ifdef", "ifndef":
		name := strings.TrimSpace(x.expand(rest))
		t = r.mf.defined(name)
		if word == "ifndef" {
			t = t.not()
		}
		return t
	}
	a, b, ok := condArgs(rest)
	if !ok {
		return triMaybe
	}
	a, b = x.expand(a), x.expand(b)
	switch {
	case strings.Contains(a, unknownMark) || strings.Contains(b, unknownMark):
		t = triMaybe
	case a == b:
		t = triOn
	}
	if word == "ifneq" {
		t = t.not()
	}
	return t
}

// defined is ifdef: a variable with a non-empty value.
func (mf *makefile) defined(name string) tri {
	if strings.Contains(name, unknownMark) {
		return triMaybe
	}
	v, ok := mf.vars[name]
	if !ok {
		if _, ok := makeDefaults[name]; ok {
			return triOn
		}
		if _, ok := harnessVars[name]; ok {
			return triOn
		}
		return triOff
	}
	switch v.value {
	case "":
		return triOff
	case unknownMark:
		return triMaybe
	}
	return triOn
}

// condArgs splits `(a,b)`, `"a" "b"` or `'a' 'b'`.
func condArgs(s string) (string, string, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", "", false
	}
	if s[0] == '(' {
		end := closing(s, 0)
		if end < 0 {
			return "", "", false
		}
		in := s[1:end]
		comma := topLevel(in, ',')
		if comma < 0 {
			return "", "", false
		}
		return strings.TrimSpace(in[:comma]), strings.TrimSpace(in[comma+1:]), true
	}
	var out []string
	for len(out) < 2 {
		s = strings.TrimLeft(s, " \t")
		if s == "" || (s[0] != '"' && s[0] != '\'') {
			return "", "", false
		}
		end := strings.IndexByte(s[1:], s[0])
		if end < 0 {
			return "", "", false
		}
		out = append(out, s[1:end+1])
		s = s[end+2:]
	}
	return out[0], out[1], true
}

func (r *makeReader) include(rest string) {
	for _, inc := range strings.Fields(expandMake(rest, r.mf.vars)) {
		if strings.Contains(inc, unknownMark) {
			continue // computed: make reads what exists at run time
		}
		// make first remakes an included makefile that has a rule.
		r.mf.included = append(r.mf.included, inc)
		p := inc
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.mf.dir, inc)
			for _, d := range r.mf.includeDirs {
				if _, exists, err := r.s.resolve(p); err == nil && exists {
					break
				}
				p = filepath.Join(d, inc)
			}
		}
		r.s.readMakefile(r.u, r.at, p, r.mf, r.depth+1)
	}
}

// rule reads a rule line: text is the whole line, colon the index of its
// first top-level ':'.
func (r *makeReader) rule(text string, colon, start int) {
	x := newMakeExpander(r.mf.vars, nil)
	head := strings.TrimSuffix(strings.TrimSpace(text[:colon]), "&") // a: or grouped a b &:
	after, double := strings.CutPrefix(text[colon+1:], ":")          // a:: is a double-colon rule
	hash := commentIndex(after)
	recipe := ""
	if semi := topLevel(after[:hash], ';'); semi >= 0 {
		after, recipe = after[:semi], after[semi+1:]
	} else {
		after = after[:hash]
	}
	after = unescapeHash(after)
	_, _, stmt := makePrefixes(strings.TrimSpace(after))
	if _, _, _, ok := splitAssign(stmt); ok {
		return // a target-specific variable, not a rule
	}
	r.inRule = true
	tpat := ""
	if c2 := topLevel(after, ':'); c2 >= 0 {
		tpat, after = strings.TrimSpace(x.expand(after[:c2])), after[c2+1:]
	}
	pre, post := after, ""
	if bar := topLevel(after, '|'); bar >= 0 {
		pre, post = after[:bar], after[bar+1:]
	}
	prereqs, orderOnly := strings.Fields(x.expand(pre)), strings.Fields(x.expand(post))
	var line *makeLine
	if strings.TrimSpace(recipe) != "" {
		line = &makeLine{file: r.name, line: start, text: strings.TrimLeft(recipe, " \t")}
	}
	for _, t := range strings.Fields(x.expand(head)) {
		switch t {
		case ".PHONY":
			for _, p := range prereqs {
				r.mf.phony[p] = true
			}
			continue
		case ".SUFFIXES":
			if len(prereqs) == 0 {
				clear(r.mf.suffixes) // git's `.SUFFIXES:` turns suffix rules off
			}
			for _, p := range prereqs {
				r.mf.suffixes[p] = true
			}
			continue
		}
		rule := &makeRule{target: t, prereqs: prereqs, orderOnly: orderOnly}
		if line != nil {
			rule.recipe = append(rule.recipe, *line)
		}
		switch {
		case strings.Contains(t, unknownMark):
			r.mf.computed = append(r.mf.computed, rule)
			if r.mf.first == "" {
				r.mf.first = unknownMark
			}
		case tpat != "":
			if stem, ok := matchTarget(tpat, t); ok {
				rule.stem = stem
				rule.prereqs = substStem(prereqs, stem)
				rule.orderOnly = substStem(orderOnly, stem)
			}
			r.addExplicit(rule)
		case strings.Contains(t, "%"):
			rule.terminal = double
			r.mf.patterns = append(r.mf.patterns, rule)
		case makeSpecial[t] && t != ".DEFAULT":
			continue // recipe lines that follow are swallowed, as make does
		default:
			if m := suffixRule.FindStringSubmatch(t); m != nil && !makeSpecial[t] && len(prereqs) == 0 &&
				r.mf.suffixes[m[1]] && (m[2] == "" || r.mf.suffixes[m[2]]) {
				// .c.o is %.o: %.c and .sh is %: %.sh; a file named so is
				// still a target too.
				p := &makeRule{target: "%" + m[2], prereqs: []string{"%" + m[1]}}
				r.mf.patterns = append(r.mf.patterns, p)
				r.cur = append(r.cur, p)
			}
			r.addExplicit(rule)
		}
		r.cur = append(r.cur, rule)
	}
}

func (r *makeReader) addExplicit(rule *makeRule) {
	t := rule.target
	if _, ok := r.mf.rules[t]; !ok {
		r.mf.names = append(r.mf.names, t)
	}
	r.mf.rules[t] = append(r.mf.rules[t], rule)
	if r.mf.first == "" && (!strings.HasPrefix(t, ".") || strings.Contains(t, "/")) {
		r.mf.first = t
	}
}

// matchTarget matches a target against a rule's pattern. A pattern without
// a slash matches the file name, the directory going into the stem.
func matchTarget(pat, t string) (string, bool) {
	if strings.Contains(pat, "/") {
		return matchPattern(pat, t)
	}
	dir, file := "", t
	if i := strings.LastIndex(t, "/"); i >= 0 {
		dir, file = t[:i+1], t[i+1:]
	}
	stem, ok := matchPattern(pat, file)
	return dir + stem, ok
}

func substStem(words []string, stem string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = strings.Replace(w, "%", stem, 1)
	}
	return out
}

// readMakefile reads path (inside the fixture) into mf. A makefile outside
// the fixture, or one that cannot be read, is a finding, as a script would be.
func (s *scanner) readMakefile(u *unit, at *stmtRef, path string, mf *makefile, depth int) bool {
	line, cmd := at.pos(u)
	abs := s.unalias(filepath.Clean(path))
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
	r := &makeReader{s: s, u: u, at: at, mf: mf, depth: depth, name: name}
	r.parse(string(data), 1)
	mf.cancelPatterns()
	return true
}

// cancelPatterns drops the pattern rules that have no recipe: in make such
// a rule cancels the implicit rule with the same target and prerequisites
// (git's `%:: RCS/%,v`), and one that cancels nothing does nothing.
func (mf *makefile) cancelPatterns() {
	var kept []*makeRule
	for _, p := range mf.patterns {
		if len(p.recipe) > 0 {
			kept = append(kept, p)
			continue
		}
		kept = slices.DeleteFunc(kept, func(k *makeRule) bool {
			return k.target == p.target && slices.Equal(k.prereqs, p.prereqs)
		})
	}
	mf.patterns = kept
}
