package htmlreport

import "strings"

// tok is a run of text with a highlight class ("" for plain). The template
// escapes the text; the class names come only from this file.
type tok struct{ C, T string }

var keywords = map[string]map[string]bool{
	"go": set("break case chan const continue default defer else fallthrough for func go goto if import interface " +
		"map package range return select struct switch type var nil true false"),
	"python": set("and as assert async await break class continue def del elif else except finally for from global if " +
		"import in is lambda nonlocal not or pass raise return try while with yield None True False"),
	"js": set("async await break case catch class const continue default delete do else export extends finally for " +
		"function if import in instanceof let new return switch this throw try typeof var void while yield null " +
		"undefined true false interface type"),
	"shell": set("if then else elif fi for while until do done case esac function in return exit export local set"),
	"c": set("auto break case char const continue default do double else enum extern float for goto if int long " +
		"return short signed sizeof static struct switch typedef union unsigned void volatile while fn let mut impl " +
		"pub use match class public private new true false null"),
	"json":   set("true false null"),
	"config": set("true false null yes no"),
}

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// lineComment is the comment leader of a language, if it has one.
func lineComment(lang string) string {
	switch lang {
	case "go", "js", "c":
		return "//"
	case "python", "shell", "config":
		return "#"
	}
	return ""
}

// highlight splits one line of code into comment, string, number, keyword
// and plain tokens. It is a line-local lexer: good enough to read a diff,
// and it never needs more than the line it is given.
func highlight(s, lang string) []tok {
	kw := keywords[lang]
	if kw == nil {
		if lang == "markdown" && strings.HasPrefix(strings.TrimSpace(s), "#") {
			return []tok{{"kw", s}}
		}
		return []tok{{"", s}}
	}
	cm := lineComment(lang)
	var out []tok
	plain := func(t string) {
		if t == "" {
			return
		}
		if n := len(out); n > 0 && out[n-1].C == "" {
			out[n-1].T += t
			return
		}
		out = append(out, tok{"", t})
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case cm != "" && strings.HasPrefix(s[i:], cm):
			out = append(out, tok{"com", s[i:]})
			return out
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(s) {
				j = len(s) - 1
			}
			out = append(out, tok{"str", s[i : j+1]})
			i = j + 1
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && (isWord(s[j]) || s[j] == '.') {
				j++
			}
			out = append(out, tok{"num", s[i:j]})
			i = j
		case isWord(c):
			j := i
			for j < len(s) && isWord(s[j]) {
				j++
			}
			if kw[s[i:j]] {
				out = append(out, tok{"kw", s[i:j]})
			} else {
				plain(s[i:j])
			}
			i = j
		default:
			plain(s[i : i+1])
			i++
		}
	}
	return out
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
