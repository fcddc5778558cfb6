package scan

import (
	"fmt"
	"strings"
)

// pyTok is one Python token: 'n' name, 'o' operator, 's' string, 'x' other.
type pyTok struct {
	kind byte
	val  string
	line int
}

// pyTokens is a small Python tokenizer: enough to skip comments and string
// contents reliably and to see names, dots, parentheses and keywords.
func pyTokens(src string) []pyTok {
	var toks []pyTok
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			line++
			i += 2
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case c == '\'' || c == '"':
			val, n, lines := pyString(src[i:], false)
			toks = append(toks, pyTok{'s', val, line})
			line += lines
			i += n
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' ||
				src[j] >= '0' && src[j] <= '9' || src[j] >= 0x80) {
				j++
			}
			word := src[i:j]
			if j < len(src) && (src[j] == '\'' || src[j] == '"') && len(word) <= 2 && strings.Trim(strings.ToLower(word), "rbuf") == "" {
				raw := strings.ContainsAny(word, "rR")
				val, n, lines := pyString(src[j:], raw)
				toks = append(toks, pyTok{'s', val, line})
				line += lines
				i = j + n
				continue
			}
			toks = append(toks, pyTok{'n', word, line})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (src[j] == '.' || src[j] == '_' || src[j] >= '0' && src[j] <= '9' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z') {
				j++
			}
			toks = append(toks, pyTok{'x', src[i:j], line})
			i = j
		default:
			toks = append(toks, pyTok{'o', string(c), line})
			i++
		}
	}
	return toks
}

// pyString reads a string literal at the start of s; it returns the contents,
// the bytes consumed and the newlines inside.
func pyString(s string, raw bool) (string, int, int) {
	q := s[:1]
	if strings.HasPrefix(s, q+q+q) {
		q = q + q + q
	}
	var b strings.Builder
	lines := 0
	i := len(q)
	for i < len(s) {
		if strings.HasPrefix(s[i:], q) {
			return b.String(), i + len(q), lines
		}
		c := s[i]
		if c == '\n' {
			lines++
			if len(q) == 1 { // unterminated single-line string
				return b.String(), i, lines - 1
			}
		}
		if c == '\\' && i+1 < len(s) {
			if s[i+1] == '\n' {
				lines++
			}
			if raw {
				b.WriteByte(c)
			}
			b.WriteByte(s[i+1])
			i += 2
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), len(s), lines
}

// python checks one Python source for shell execution and absolute deletions.
func (s *scanner) python(u *unit) {
	if u.depth > MaxDepth {
		s.add(u, u.lineBase, PatUnscannable, "", fmt.Sprintf("nested deeper than %d levels", MaxDepth))
		return
	}
	toks := pyTokens(u.src)
	lines := strings.Split(u.src, "\n")
	text := func(l int) string {
		if l-1 < len(lines) {
			return cmdText(lines[l-1])
		}
		return ""
	}
	alias := map[string]string{} // local name -> dotted origin
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != 'n' {
			continue
		}
		switch t.val {
		case "import":
			if i > 0 && toks[i-1].kind == 'n' && isFromClause(toks, i) {
				continue
			}
			i = pyImport(toks, i+1, "", alias)
			continue
		case "from":
			j := i + 1
			mod := ""
			for j < len(toks) && (toks[j].kind == 'n' || toks[j].val == ".") && toks[j].val != "import" {
				mod += toks[j].val
				j++
			}
			if j < len(toks) && toks[j].val == "import" {
				i = pyImport(toks, j+1, mod, alias)
			}
			continue
		}
		if i > 0 && toks[i-1].val == "." {
			continue // not the start of a dotted name
		}
		name, j := t.val, i+1
		for j+1 < len(toks) && toks[j].val == "." && toks[j+1].kind == 'n' {
			name += "." + toks[j+1].val
			j += 2
		}
		if j >= len(toks) || toks[j].val != "(" {
			continue
		}
		head, tail, _ := strings.Cut(name, ".")
		if origin, ok := alias[head]; ok {
			name = origin
			if tail != "" {
				name += "." + tail
			}
		}
		line := u.lineBase + t.line - 1
		args := pyArgs(toks, j)
		switch name {
		case "os.system", "os.popen", "os.popen2", "os.popen3", "os.popen4":
			s.add(u, line, PatPyOsSystem, text(t.line), name+" runs a shell command")
		case "subprocess.getoutput", "subprocess.getstatusoutput":
			s.add(u, line, PatPySubprocessShell, text(t.line), name+" always runs through a shell")
		case "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output", "subprocess.Popen":
			for k := 0; k+2 < len(args); k++ {
				if args[k].val == "shell" && args[k+1].val == "=" && args[k+2].val == "True" {
					s.add(u, line, PatPySubprocessShell, text(t.line), name+" with shell=True runs a shell command")
					break
				}
			}
		case "shutil.rmtree":
			if len(args) > 0 && args[0].kind == 's' && (len(args) == 1 || args[1].val == ",") &&
				(strings.HasPrefix(args[0].val, "/") || strings.HasPrefix(args[0].val, "~")) {
				s.add(u, line, PatPyRmtreeAbsolute, text(t.line), fmt.Sprintf("shutil.rmtree of the absolute path %q", args[0].val))
			}
		}
	}
}

func isFromClause(toks []pyTok, i int) bool {
	for j := i - 1; j >= 0 && toks[j].line == toks[i].line; j-- {
		if toks[j].val == "from" {
			return true
		}
	}
	return false
}

// pyImport reads `a.b as c, d` (or the names after `from mod import`) into alias.
func pyImport(toks []pyTok, i int, from string, alias map[string]string) int {
	line := 0
	if i < len(toks) {
		line = toks[i].line
	}
	paren := false
	for i < len(toks) {
		if toks[i].val == "(" {
			paren = true
			i++
			continue
		}
		if toks[i].val == ")" {
			return i
		}
		if !paren && toks[i].line != line {
			return i - 1
		}
		if toks[i].kind != 'n' {
			if toks[i].val == "," {
				i++
				continue
			}
			return i - 1
		}
		name := toks[i].val
		i++
		for i+1 < len(toks) && toks[i].val == "." && toks[i+1].kind == 'n' {
			name += "." + toks[i+1].val
			i += 2
		}
		origin := name
		if from != "" {
			origin = from + "." + name
		}
		if i+1 < len(toks) && toks[i].val == "as" && toks[i+1].kind == 'n' {
			alias[toks[i+1].val] = origin
			i += 2
		} else if from != "" {
			alias[name] = origin
		} else {
			first, _, _ := strings.Cut(name, ".")
			alias[first] = first
		}
	}
	return i
}

// pyArgs returns the tokens at depth one of the call whose "(" is at toks[open].
func pyArgs(toks []pyTok, open int) []pyTok {
	depth := 0
	var args []pyTok
	for i := open; i < len(toks); i++ {
		switch toks[i].val {
		case "(", "[", "{":
			if toks[i].kind == 'o' {
				depth++
				if depth == 1 {
					continue
				}
			}
		case ")", "]", "}":
			if toks[i].kind == 'o' {
				depth--
				if depth == 0 {
					return args
				}
			}
		}
		if depth == 1 {
			args = append(args, toks[i])
		}
	}
	return args
}
