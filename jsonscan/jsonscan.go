// Package jsonscan reads JSON bytes strictly by RFC 8259's grammar
// without decoding them: whatever a Scanner reads without complaint,
// encoding/json decodes. The fast item checks of package schemas and the
// run page's summary of a large source proof read the bytes the harness
// wrote this way, where decoding them into values was most of the cost.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Scanner reads one document's bytes. Each method either consumes what
// it read and reports true, or reports false, and the caller then turns
// to a decoder that says what is wrong; after false, what the Scanner has
// consumed is unspecified.
type Scanner struct {
	b []byte
	i int
}

// New is a Scanner at the start of b.
func New(b []byte) Scanner { return Scanner{b: b} }

// MaxSkipDepth bounds the nesting of a value Skip reads: a deeper one is
// refused (the caller's decoder, with a bound of its own, decides).
const MaxSkipDepth = 32

// Offset is the index in the document of the next byte to read.
func (s *Scanner) Offset() int { return s.i }

// Next consumes the byte Peek returned.
func (s *Scanner) Next() { s.i++ }

// End reports whether only white space is left.
func (s *Scanner) End() bool {
	s.ws()
	return s.i == len(s.b)
}

func (s *Scanner) ws() {
	i := s.i
	for i < len(s.b) && space[s.b[i]] {
		i++
	}
	s.i = i
}

// space marks JSON's white space; the layout the harness writes is one
// run of it before every key and item.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// Peek is the next byte past white space, 0 at the end.
func (s *Scanner) Peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// Str reads a string: raw is what is between its quotes, esc says it has
// escapes (each checked to be one JSON allows).
func (s *Scanner) Str() (raw []byte, esc, ok bool) {
	if s.Peek() != '"' {
		return nil, false, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		for i < len(s.b) && plain[s.b[i]] {
			i++
		}
		if i == len(s.b) {
			break
		}
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

// plain marks the bytes a string holds as they are: not a quote, a
// backslash or a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

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

// Text reads a string as the decoder would give it: its bytes when it is
// plain valid UTF-8, else decoded (escapes resolved, bad bytes replaced,
// as encoding/json does).
func (s *Scanner) Text() ([]byte, bool) {
	start := s.i
	raw, esc, ok := s.Str()
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

// Literal reads the word w (true, false or null).
func (s *Scanner) Literal(w string) bool {
	s.ws()
	if !bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		return false
	}
	s.i += len(w)
	return true
}

// Integer reads a number written as an integer (an optional minus and
// digits): 1.0 or 1e3 are numbers, but not read here.
func (s *Scanner) Integer() (neg bool, digits []byte, ok bool) {
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

// Number reads any JSON number.
func (s *Scanner) Number() bool {
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

// Skip reads any one value, checking its syntax only.
func (s *Scanner) Skip() bool { return s.skip(0) }

func (s *Scanner) skip(depth int) bool {
	if depth > MaxSkipDepth {
		return false
	}
	switch s.Peek() {
	case '"':
		_, _, ok := s.Str()
		return ok
	case 't':
		return s.Literal("true")
	case 'f':
		return s.Literal("false")
	case 'n':
		return s.Literal("null")
	case '[', '{':
		return s.skipMembers(depth)
	}
	return s.Number()
}

// skipMembers is Members for skip, without a function call per member:
// the items of a large array are most of what is skipped.
func (s *Scanner) skipMembers(depth int) bool {
	object := s.b[s.i] == '{'
	end := byte(']')
	if object {
		end = '}'
	}
	s.i++
	if s.Peek() == end {
		s.i++
		return true
	}
	for {
		if object {
			if _, _, ok := s.Str(); !ok || s.Peek() != ':' {
				return false
			}
			s.i++
		}
		if !s.skip(depth + 1) {
			return false
		}
		switch s.Peek() {
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

// Members reads the comma-separated members of an array or object whose
// opening bracket is next, each by member, up to its closing bracket end.
func (s *Scanner) Members(end byte, member func() bool) bool {
	if open := s.Peek(); !(open == '{' && end == '}' || open == '[' && end == ']') {
		return false
	}
	s.i++
	if s.Peek() == end {
		s.i++
		return true
	}
	for {
		if !member() {
			return false
		}
		switch s.Peek() {
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
