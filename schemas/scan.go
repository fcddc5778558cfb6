package schemas

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// scanner reads JSON bytes strictly by RFC 8259's grammar, for the fast
// checks: whatever it reads without complaint, encoding/json decodes.
// Each method either consumes what it read and reports true, or reports
// false (the value is then left to the full validator, which decodes it
// and says what is wrong).
type scanner struct {
	b []byte
	i int
}

// maxSkipDepth bounds the nesting of a value skipped whole.
const maxSkipDepth = 32

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next byte past white space, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str reads a string: raw is what is between its quotes, esc says it has
// escapes (each checked to be one JSON allows).
func (s *scanner) str() (raw []byte, esc, ok bool) {
	if s.peek() != '"' {
		return nil, false, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], esc, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			esc = true
			n := escapeLen(s.b[i+1:])
			if n == 0 {
				return nil, false, false
			}
			i += n
		}
	}
	return nil, false, false
}

// escapeLen is the length of the escape that b starts with (after its
// backslash), 0 when it is not one.
func escapeLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(b) < 5 {
			return 0
		}
		for _, c := range b[1:5] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return 0
			}
		}
		return 5
	}
	return 0
}

// text reads a string as the decoder would give it: its bytes when it is
// plain valid UTF-8, else decoded (escapes resolved, bad bytes replaced,
// as encoding/json does).
func (s *scanner) text() ([]byte, bool) {
	start := s.i
	raw, esc, ok := s.str()
	switch {
	case !ok:
		return nil, false
	case !esc && utf8.Valid(raw):
		return raw, true
	}
	var t string
	if json.Unmarshal(s.b[start:s.i], &t) != nil {
		return nil, false
	}
	return []byte(t), true
}

// literal reads the word w (true, false or null).
func (s *scanner) literal(w string) bool {
	s.ws()
	if !bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		return false
	}
	s.i += len(w)
	return true
}

// integer reads a number written as an integer (an optional minus and
// digits): 1.0 or 1e3 are numbers, but not read here.
func (s *scanner) integer() (neg bool, digits []byte, ok bool) {
	s.ws()
	i := s.i
	if i < len(s.b) && s.b[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(s.b) && '0' <= s.b[i] && s.b[i] <= '9' {
		i++
	}
	d := s.b[start:i]
	if len(d) == 0 || (d[0] == '0' && len(d) > 1) {
		return false, nil, false
	}
	if i < len(s.b) && (s.b[i] == '.' || s.b[i] == 'e' || s.b[i] == 'E') {
		return false, nil, false
	}
	s.i = i
	return neg, d, true
}

// number reads any JSON number.
func (s *scanner) number() bool {
	s.ws()
	i := s.i
	if i < len(s.b) && s.b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s.b) && '0' <= s.b[i] && s.b[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	switch {
	case i < len(s.b) && s.b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s.b) && s.b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	s.i = i
	return true
}

// skip reads any one value, checking its syntax only.
func (s *scanner) skip(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	switch s.peek() {
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	case '[':
		return s.list(']', func() bool { return s.skip(depth + 1) })
	case '{':
		return s.list('}', func() bool {
			_, _, ok := s.str()
			if !ok || s.peek() != ':' {
				return false
			}
			s.i++
			return s.skip(depth + 1)
		})
	}
	return s.number()
}

// list reads the comma-separated members of an array or object whose
// opening bracket is next, each by member, up to end.
func (s *scanner) list(end byte, member func() bool) bool {
	s.i++
	if s.peek() == end {
		s.i++
		return true
	}
	for {
		if !member() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case end:
			s.i++
			return true
		default:
			return false
		}
	}
}
