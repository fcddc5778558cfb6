package gitstatus

import (
	"bytes"
	"strings"
)

// Pattern flags, as git's dir.c names them.
const (
	patNegative  = 1 << iota // "!pattern"
	patMustBeDir             // "pattern/"
	patNoDir                 // no slash: matched against the basename
	patEndsWith              // "*literal"
)

// ignorePattern is one line of an ignore file, parsed as git's
// parse_path_pattern does.
type ignorePattern struct {
	pattern string // without "!" and trailing "/"
	base    string // directory of the file ("" or "dir/sub/"), for anchored patterns
	flags   int
	prefix  int // length of the leading part without wildcards
}

// ignoreList is the patterns of one ignore file, in file order.
type ignoreList []ignorePattern

// parseIgnoreFile splits an ignore file into patterns the way git's
// add_patterns_from_buffer does: a UTF-8 byte order mark is skipped, CR
// before LF is dropped, comment and empty lines are skipped, unescaped
// trailing spaces are trimmed. base is the file's directory relative to
// the worktree root, "" or ending in "/".
func parseIgnoreFile(data []byte, base string) ignoreList {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out ignoreList
	for len(data) > 0 {
		line := data
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			line, data = data[:nl], data[nl+1:]
		} else {
			data = nil
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if z := bytes.IndexByte(line, 0); z >= 0 {
			line = line[:z] // C strings end at NUL
		}
		s := trimTrailingSpaces(string(line))
		out = append(out, parsePattern(s, base))
	}
	return out
}

// trimTrailingSpaces is git's trim_trailing_spaces: trailing spaces go
// unless escaped with a backslash.
func trimTrailingSpaces(s string) string {
	lastSpace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if lastSpace < 0 {
				lastSpace = i
			}
		case '\\':
			i++
			if i >= len(s) {
				return s
			}
			lastSpace = -1
		default:
			lastSpace = -1
		}
	}
	if lastSpace >= 0 {
		return s[:lastSpace]
	}
	return s
}

func parsePattern(s, base string) ignorePattern {
	p := ignorePattern{base: base}
	if strings.HasPrefix(s, "!") {
		p.flags |= patNegative
		s = s[1:]
	}
	if strings.HasSuffix(s, "/") {
		s = s[:len(s)-1]
		p.flags |= patMustBeDir
	}
	if strings.IndexByte(s, '/') < 0 {
		p.flags |= patNoDir
	}
	p.prefix = simpleLength(s)
	if strings.HasPrefix(s, "*") && simpleLength(s[1:]) == len(s)-1 {
		p.flags |= patEndsWith
	}
	p.pattern = s
	return p
}

// simpleLength is the length of the leading part of s without wildcards.
func simpleLength(s string) int {
	for i := 0; i < len(s); i++ {
		if isGlobSpecial(s[i]) {
			return i
		}
	}
	return len(s)
}

// matches reports whether path (relative to the worktree root, no trailing
// slash) matches the pattern, ignoring negation.
func (p *ignorePattern) matches(path string, isDir bool) bool {
	if p.flags&patMustBeDir != 0 && !isDir {
		return false
	}
	if p.flags&patNoDir != 0 {
		return matchBasename(path[strings.LastIndexByte(path, '/')+1:], p)
	}
	return matchPathname(path, p)
}

// matchBasename is dir.c's match_basename.
func matchBasename(name string, p *ignorePattern) bool {
	switch {
	case p.prefix == len(p.pattern):
		return name == p.pattern
	case p.flags&patEndsWith != 0:
		return strings.HasSuffix(name, p.pattern[1:])
	}
	return wildmatch(p.pattern, name, false)
}

// matchPathname is dir.c's match_pathname: the pattern is relative to the
// directory of its file, and a leading slash only anchors it there.
func matchPathname(path string, p *ignorePattern) bool {
	pat, prefix := p.pattern, p.prefix
	if strings.HasPrefix(pat, "/") {
		pat = pat[1:]
		prefix--
	}
	if !strings.HasPrefix(path, p.base) || len(path) <= len(p.base) {
		return false
	}
	name := path[len(p.base):]
	if prefix > 0 {
		if prefix > len(name) || name[:prefix] != pat[:prefix] {
			return false
		}
		pat, name = pat[prefix:], name[prefix:]
		if pat == "" && name == "" {
			return true
		}
	}
	return wildmatch(pat, name, true)
}

// lastMatch returns the last pattern of the list matching path, or nil.
func (l ignoreList) lastMatch(path string, isDir bool) *ignorePattern {
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].matches(path, isDir) {
			return &l[i]
		}
	}
	return nil
}

// excluder decides exclusion the way git's is_excluded does: the per-
// directory .gitignore lists from the deepest to the root, then
// .git/info/exclude, then core.excludesFile; the first list with a match
// decides, by its last matching pattern. Anything under an excluded
// directory is excluded; a "!" pattern cannot re-include it.
type excluder struct {
	global []ignoreList // info/exclude, then core.excludesFile
}

// excluded reports whether path is excluded, given the per-directory lists
// in effect for its directory (root first) and whether its parent
// directory is excluded.
func (x *excluder) excluded(dirs []ignoreList, path string, isDir bool) bool {
	for i := len(dirs) - 1; i >= 0; i-- {
		if m := dirs[i].lastMatch(path, isDir); m != nil {
			return m.flags&patNegative == 0
		}
	}
	for _, l := range x.global {
		if m := l.lastMatch(path, isDir); m != nil {
			return m.flags&patNegative == 0
		}
	}
	return false
}
