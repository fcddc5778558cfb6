// Package gitquote reads and writes file names the way git prints them in
// patch headers: a name with control characters, a quote, a backslash or any
// byte above 0x7e is C-quoted ("docs/caf\303\251.md"). The writer and the
// readers of patch.diff share it, so that every name git can store,
// including ones that are not UTF-8, goes out and comes back byte for byte.
package gitquote

import (
	"errors"
	"fmt"
	"strings"
)

// Quote C-quotes p as git does with core.quotePath=true, or returns it as it
// is when it needs no quoting.
func Quote(p string) string {
	needs := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			needs = true
			break
		}
	}
	if !needs {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		if e := strings.IndexByte(escapes, c); e >= 0 {
			b.WriteByte('\\')
			b.WriteByte(letters[e])
			continue
		}
		if c < 0x20 || c >= 0x7f {
			fmt.Fprintf(&b, `\%03o`, c)
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// escapes and letters pair each byte git writes with a letter escape.
const (
	escapes = "\a\b\t\n\v\f\r\"\\"
	letters = `abtnvfr"\`
)

// ErrQuote is returned for a quoted name git would not have written.
var ErrQuote = errors.New("malformed git-quoted name")

// Unquote reverses Quote for a string that starts with '"': it returns the
// name and the rest of s after the closing quote. Only git's own escapes are
// accepted (\a \b \t \n \v \f \r \" \\ and three octal digits).
func Unquote(s string) (name, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		return "", s, fmt.Errorf("%w: %.40q does not start with a quote", ErrQuote, s)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), s[i+1:], nil
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break
		}
		if e := strings.IndexByte(letters, s[i]); e >= 0 {
			b.WriteByte(escapes[e])
			continue
		}
		if i+3 > len(s) || !octal(s[i]) || !octal(s[i+1]) || !octal(s[i+2]) || s[i] > '3' {
			return "", s, fmt.Errorf("%w: bad escape in %.40q", ErrQuote, s)
		}
		b.WriteByte((s[i]-'0')<<6 | (s[i+1]-'0')<<3 | (s[i+2] - '0'))
		i += 2
	}
	return "", s, fmt.Errorf("%w: %.40q has no closing quote", ErrQuote, s)
}

func octal(c byte) bool { return c >= '0' && c <= '7' }

// Name reads one name from a ---/+++ or rename/copy header: C-quoted, or
// plain up to a tab (git ends a plain name with a space in it with a tab).
func Name(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		name, _, err := Unquote(s)
		return name, err
	}
	s = strings.TrimRight(s, "\r")
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	return s, nil
}

// DiffHeader reads the two names of a "diff --git A B" line, each plain or
// C-quoted, with their a/ and b/ prefixes. A plain pair is split where the
// b/ side starts: at " b/" with equal names on both sides when there is such
// a split (no rename), else at the last " b/".
func DiffHeader(line string) (a, b string, err error) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "diff --git ")
	if !ok {
		return "", "", fmt.Errorf("%w: %.40q is not a diff --git line", ErrQuote, line)
	}
	if strings.HasPrefix(rest, `"`) {
		a, rest, err = Unquote(rest)
		if err != nil {
			return "", "", err
		}
		rest = strings.TrimPrefix(rest, " ")
		if strings.HasPrefix(rest, `"`) {
			b, _, err = Unquote(rest)
			return a, b, err
		}
		return a, rest, nil
	}
	if i := strings.Index(rest, ` "`); i >= 0 {
		if b, tail, err := Unquote(rest[i+1:]); err == nil && tail == "" {
			return rest[:i], b, nil
		}
	}
	for i := 0; i+3 <= len(rest); i++ {
		if strings.HasPrefix(rest[i:], " b/") && strings.TrimPrefix(rest[:i], "a/") == rest[i+3:] {
			return rest[:i], rest[i+1:], nil
		}
	}
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[:i], rest[i+1:], nil
	}
	return rest, "", nil
}
