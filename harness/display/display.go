// Package display turns text the harness did not choose (file names, Case's
// messages, tool output) into forms that cannot act on the medium showing
// them: a terminal, report.md, report.html. A name with an escape sequence
// must not repaint the terminal, a newline must not start a forged Markdown
// heading, a bidi override must not reorder what a reviewer reads. Each such
// character is shown as a visible escape (\x1b, \u202e) instead.
package display

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Hidden reports whether r acts on a terminal or on the layout of text rather
// than showing as itself: C0 and C1 controls and DEL (Cc), format characters
// (Cf: the bidi embeddings, overrides and isolates U+202A–U+202E and
// U+2066–U+2069, the marks U+200E, U+200F and U+061C, zero-width characters,
// soft hyphen), and the line and paragraph separators U+2028 and U+2029.
func Hidden(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// Bidi reports whether r is a bidirectional control: the characters of
// Trojan Source (CVE-2021-42574).
func Bidi(r rune) bool {
	switch {
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return r == '\u200e' || r == '\u200f' || r == '\u061c'
}

// escapeRune is the visible form of a hidden rune: \xNN below U+0100,
// \uNNNN or \UNNNNNNNN above.
func escapeRune(r rune) string {
	switch {
	case r < 0x100:
		return fmt.Sprintf(`\x%02x`, r)
	case r <= 0xffff:
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

// each calls plain for every run of shown text and hidden for the visible
// escape of every hidden rune or byte that is not UTF-8; a hidden rune keep
// accepts counts as shown text.
func each(s string, keep func(rune) bool, plain func(string), hidden func(string)) {
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case r == utf8.RuneError && n == 1:
			esc = fmt.Sprintf(`\x%02x`, s[i]) // a raw byte: 0x9b alone is CSI to some terminals
		case Hidden(r) && (keep == nil || !keep(r)):
			esc = escapeRune(r)
		default:
			i += n
			continue
		}
		if start < i {
			plain(s[start:i])
		}
		hidden(esc)
		i += n
		start = i
	}
	if start < len(s) {
		plain(s[start:])
	}
}

// Terminal is s safe to print on one terminal line: every hidden rune
// (newline and tab included) and every byte that is not UTF-8 becomes its
// visible escape. Use it on anything Case could have chosen, before it is
// printed.
func Terminal(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	each(s, nil, func(t string) { b.WriteString(t) }, func(e string) { b.WriteString(e) })
	return b.String()
}

// clean reports whether s has nothing to escape, the common case.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// MarkdownText is s as inline Markdown that renders as the text itself:
// hidden runes become visible escapes (so no newline can start a heading or
// a list item), HTML-significant characters become entities (no live tag),
// and the characters of emphasis, code spans, links and tables are
// backslash-escaped.
func MarkdownText(s string) string {
	var b strings.Builder
	text := func(t string) {
		for _, r := range t {
			switch r {
			case '&':
				b.WriteString("&amp;")
			case '<':
				b.WriteString("&lt;")
			case '>':
				b.WriteString("&gt;")
			case '\\', '`', '*', '_', '[', ']', '|', '~':
				b.WriteByte('\\')
				b.WriteRune(r)
			default:
				b.WriteRune(r)
			}
		}
	}
	each(s, nil, text, text)
	return b.String()
}

// MarkdownCode is s as a Markdown code span: hidden runes become visible
// escapes, and the fence is one backtick longer than the longest run of
// backticks in s, so s cannot close it. Inside a code span HTML is shown, not
// interpreted.
func MarkdownCode(s string) string {
	t := Terminal(s)
	longest, run := 0, 0
	for i := 0; i < len(t); i++ {
		if t[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(t, "`") || strings.HasSuffix(t, "`") || t == "" {
		t = " " + t + " " // CommonMark strips one space on each side
	}
	return fence + t + fence
}

// JSON makes encoding/json output safe to print: encoding/json escapes C0
// controls but writes a bidi override or another format character as
// itself, which a terminal may act on. Each hidden rune is rewritten as its
// \uXXXX escape (a surrogate pair above U+FFFF); the JSON means the same.
// data must be encoding/json output (hidden runes can only be in strings).
func JSON(data []byte) []byte {
	if clean(string(data)) {
		return data
	}
	var b strings.Builder
	for _, r := range string(data) {
		if !Hidden(r) {
			b.WriteRune(r)
			continue
		}
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return []byte(b.String())
}
