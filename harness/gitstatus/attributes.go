package gitstatus

import (
	"bytes"
	"strings"

	"github.com/cto-harness/cto-harness/harness/gitquote"
)

// Attribute values beyond plain strings: set ("attr"), unset ("-attr").
// An attribute no line speaks of is absent from the result.
const (
	attrTrue  = "\x00true"
	attrFalse = "\x00false"
)

// attrAssign is one "name", "-name", "!name" or "name=value" of a line.
type attrAssign struct {
	name  string
	value string // attrTrue, attrFalse, "" for "!name" (unspecified), or the value
}

type attrLine struct {
	pat     ignorePattern
	assigns []attrAssign
}

// attrFile is one gitattributes file: its lines and, for the files that
// may define them, its macros.
type attrFile struct {
	lines  []attrLine
	macros map[string][]attrAssign
}

// parseAttrFile parses a gitattributes file whose directory is base ("" or
// ending in "/"). Macro definitions ("[attr]name ...") are kept only when
// macros is set (the root file, info/attributes, global and system
// files); negative patterns are ignored, as git ignores them.
func parseAttrFile(data []byte, base string, macros bool) *attrFile {
	f := &attrFile{}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	for _, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimRight(raw, "\r")
		line = strings.TrimLeft(line, " \t")
		if line == "" || line[0] == '#' {
			continue
		}
		blank := func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' }
		var pat string
		var rest []string
		if name, tail, err := gitquote.Unquote(line); err == nil {
			// A C-quoted pattern ("my file.txt" -text); what follows the
			// closing quote are the assignments, even without a blank.
			pat, rest = name, strings.FieldsFunc(tail, blank)
		} else {
			fields := strings.FieldsFunc(line, blank)
			if len(fields) == 0 {
				continue
			}
			pat, rest = fields[0], fields[1:]
		}
		var assigns []attrAssign
		for _, a := range rest {
			switch {
			case strings.HasPrefix(a, "-"):
				assigns = append(assigns, attrAssign{name: a[1:], value: attrFalse})
			case strings.HasPrefix(a, "!"):
				assigns = append(assigns, attrAssign{name: a[1:]})
			default:
				name, val, ok := strings.Cut(a, "=")
				if !ok {
					val = attrTrue
				}
				assigns = append(assigns, attrAssign{name: name, value: val})
			}
		}
		if strings.HasPrefix(pat, "[attr]") {
			if macros {
				if f.macros == nil {
					f.macros = map[string][]attrAssign{}
				}
				f.macros[pat[len("[attr]"):]] = assigns
			}
			continue
		}
		p := parsePattern(pat, base)
		if p.flags&patNegative != 0 {
			continue
		}
		f.lines = append(f.lines, attrLine{pat: p, assigns: assigns})
	}
	return f
}

// builtinMacros are git's predefined macros.
var builtinMacros = map[string][]attrAssign{
	"binary": {{name: "diff", value: attrFalse}, {name: "merge", value: attrFalse}, {name: "text", value: attrFalse}},
}

// attrStack resolves attributes for paths: files in precedence order,
// highest first (info/attributes, the deepest .gitattributes ... the root
// one, global, system), and the macros they define.
type attrStack struct {
	files  []*attrFile
	macros map[string][]attrAssign
}

// stackFor is the attribute files that apply to path (a file), in git's
// order: info/attributes, the in-tree .gitattributes from path's directory
// up to the root (dirs is keyed "" or "dir/"), then global and system.
func stackFor(path string, macros map[string][]attrAssign, info *attrFile, dirs map[string]*attrFile, global []*attrFile) attrStack {
	s := attrStack{macros: macros}
	if info != nil {
		s.files = append(s.files, info)
	}
	dir := path
	for {
		slash := strings.LastIndexByte(dir, '/')
		if slash < 0 {
			break
		}
		dir = dir[:slash]
		if f := dirs[dir+"/"]; f != nil {
			s.files = append(s.files, f)
		}
	}
	if f := dirs[""]; f != nil {
		s.files = append(s.files, f)
	}
	s.files = append(s.files, global...)
	return s
}

// lookup returns the states of the wanted attributes for path (a file):
// for each, the first file in precedence order, and within it the last
// matching line, that speaks of it (directly or through a macro) decides.
func (s *attrStack) lookup(path string, wanted ...string) map[string]string {
	out := make(map[string]string, len(wanted))
	decided := map[string]bool{}
	var fill func(a attrAssign)
	fill = func(a attrAssign) {
		if decided[a.name] {
			return
		}
		decided[a.name] = true
		if a.value != "" {
			out[a.name] = a.value
		}
		if a.value == attrTrue {
			if m, ok := s.macros[a.name]; ok {
				for i := len(m) - 1; i >= 0; i-- {
					fill(m[i])
				}
			}
		}
	}
	for _, f := range s.files {
		for i := len(f.lines) - 1; i >= 0; i-- {
			l := &f.lines[i]
			if !l.pat.matches(path, false) {
				continue
			}
			for k := len(l.assigns) - 1; k >= 0; k-- {
				fill(l.assigns[k])
			}
		}
	}
	res := make(map[string]string, len(wanted))
	for _, w := range wanted {
		if v, ok := out[w]; ok {
			res[w] = v
		}
	}
	return res
}
