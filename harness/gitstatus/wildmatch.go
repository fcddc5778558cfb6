package gitstatus

import "strings"

// wildmatch is git's wildmatch (wildmatch.c), the matcher of ignore and
// attribute patterns. Go's path.Match differs from it where it matters
// here: "[!a]" is a negated class in git, "**" crosses directories, and
// "[[:digit:]]" classes exist. With pathname set (WM_PATHNAME), "*", "?"
// and classes never match '/'.
func wildmatch(pattern, text string, pathname bool) bool {
	return dowild(pattern, text, pathname) == wmMatch
}

const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

func isGlobSpecial(c byte) bool { return c == '*' || c == '?' || c == '[' || c == '\\' }

// at is s[i], or NUL past the end, as the C code reads its strings.
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// dowild follows wildmatch.c's dowild step by step (indexes instead of
// pointers; NUL stands for the end of a string).
func dowild(p, text string, pathname bool) int {
	pi, ti := 0, 0
	for ; at(p, pi) != 0; pi, ti = pi+1, ti+1 {
		pc := p[pi]
		tc := at(text, ti)
		if tc == 0 && pc != '*' {
			return wmAbortAll
		}
		switch pc {
		case '\\':
			pi++
			if tc != at(p, pi) {
				return wmNoMatch
			}
			continue
		default:
			if tc != pc {
				return wmNoMatch
			}
			continue
		case '?':
			if pathname && tc == '/' {
				return wmNoMatch
			}
			continue
		case '*':
			var matchSlash bool
			pi++
			if at(p, pi) == '*' {
				prev := pi - 2
				for pi++; at(p, pi) == '*'; pi++ {
				}
				switch {
				case !pathname:
					matchSlash = true
				case (prev < 0 || p[prev] == '/') && (at(p, pi) == 0 || at(p, pi) == '/' || (at(p, pi) == '\\' && at(p, pi+1) == '/')):
					if at(p, pi) == '/' && dowild(p[pi+1:], text[ti:], pathname) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				default:
					matchSlash = false
				}
			} else {
				matchSlash = !pathname
			}
			if at(p, pi) == 0 {
				if !matchSlash && strings.IndexByte(text[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			} else if !matchSlash && p[pi] == '/' {
				slash := strings.IndexByte(text[ti:], '/')
				if slash < 0 {
					return wmNoMatch
				}
				ti += slash
				// The slash is consumed by the loop's own step.
				continue
			}
			for {
				if tc == 0 {
					break
				}
				if !isGlobSpecial(p[pi]) {
					pc = p[pi]
					for {
						tc = at(text, ti)
						if tc == 0 || (!matchSlash && tc == '/') || tc == pc {
							break
						}
						ti++
					}
					if tc != pc {
						return wmNoMatch
					}
				}
				if m := dowild(p[pi:], text[ti:], pathname); m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tc == '/' {
					return wmAbortToStarStar
				}
				ti++
				tc = at(text, ti)
			}
			return wmAbortAll
		case '[':
			pi++
			pc = at(p, pi)
			negated := pc == '!' || pc == '^'
			if negated {
				pi++
				pc = at(p, pi)
			}
			var prev byte
			matched := false
			for {
				if pc == 0 {
					return wmAbortAll
				}
				switch {
				case pc == '\\':
					pi++
					pc = at(p, pi)
					if pc == 0 {
						return wmAbortAll
					}
					if tc == pc {
						matched = true
					}
				case pc == '-' && prev != 0 && at(p, pi+1) != 0 && at(p, pi+1) != ']':
					pi++
					pc = p[pi]
					if pc == '\\' {
						pi++
						pc = at(p, pi)
						if pc == 0 {
							return wmAbortAll
						}
					}
					if tc <= pc && tc >= prev {
						matched = true
					}
					pc = 0 // so that prev becomes 0
				case pc == '[' && at(p, pi+1) == ':':
					pi += 2
					s := pi
					for at(p, pi) != 0 && p[pi] != ']' {
						pi++
					}
					if at(p, pi) == 0 {
						return wmAbortAll
					}
					if pi-s-1 < 0 || p[pi-1] != ':' {
						// No ":]": an ordinary '[' in the set.
						pi = s - 2
						pc = '['
						if tc == pc {
							matched = true
						}
					} else {
						in, known := charClass(p[s:pi-1], tc)
						if !known {
							return wmAbortAll
						}
						if in {
							matched = true
						}
						pc = 0
					}
				default:
					if tc == pc {
						matched = true
					}
				}
				prev = pc
				pi++
				pc = at(p, pi)
				if pc == ']' {
					break
				}
			}
			if matched == negated || (pathname && tc == '/') {
				return wmNoMatch
			}
			continue
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

// charClass reports whether c is in the named POSIX class, and whether the
// name is one git knows.
func charClass(name string, c byte) (in, known bool) {
	isUpper := c >= 'A' && c <= 'Z'
	isLower := c >= 'a' && c <= 'z'
	isDigit := c >= '0' && c <= '9'
	switch name {
	case "alnum":
		return isUpper || isLower || isDigit, true
	case "alpha":
		return isUpper || isLower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 32 || c == 127, true
	case "digit":
		return isDigit, true
	case "graph":
		return c > 32 && c < 127, true
	case "lower":
		return isLower, true
	case "print":
		return c >= 32 && c < 127, true
	case "punct":
		return c > 32 && c < 127 && !isUpper && !isLower && !isDigit, true
	case "space":
		return c == ' ' || (c >= '\t' && c <= '\r'), true
	case "upper":
		return isUpper, true
	case "xdigit":
		return isDigit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}
