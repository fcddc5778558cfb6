package display

import (
	"bytes"
	"strings"
)

// MarkClass is the class of the span MarkHTML puts around each escape, for
// the page's stylesheet.
const MarkClass = "hidden-char"

// MarkHTML marks, in a page html/template rendered, every hidden rune and
// every byte that is not UTF-8: html/template escapes markup but leaves a
// U+202E in place, where it silently reorders what a reviewer reads. In text
// each one becomes <span class="hidden-char" title="hidden character">\u202e</span>;
// inside a tag, and in <title>, <style>, <script> and <textarea>, where a span
// would not show as one, it becomes the plain escape text. Newline, tab and
// carriage return are left as they are: the page's own layout and logs use
// them.
//
// The input must be html/template output: a '<' in it always opens a tag and
// a '>' closes it, since text and attribute values carry them as entities.
func MarkHTML(page []byte) []byte {
	if clean(string(page)) {
		return page
	}
	var out bytes.Buffer
	out.Grow(len(page) + 256)
	inTag := false
	raw := "" // the element whose text is raw or RCDATA we are in, or ""
	s := string(page)
	plain := func(t string) {
		for len(t) > 0 {
			i := strings.IndexAny(t, "<>")
			if i < 0 {
				out.WriteString(t)
				return
			}
			if t[i] == '<' && !inTag {
				inTag = true
				raw = rawElement(t[i:], raw)
			} else if t[i] == '>' {
				inTag = false
			}
			out.WriteString(t[:i+1])
			t = t[i+1:]
		}
	}
	layout := func(r rune) bool { return r == '\n' || r == '\t' || r == '\r' }
	each(s, layout, plain, func(esc string) {
		switch {
		case inTag || raw != "":
			out.WriteString(esc)
		default:
			out.WriteString(`<span class="` + MarkClass + `" title="hidden character">`)
			out.WriteString(esc)
			out.WriteString(`</span>`)
		}
	})
	return out.Bytes()
}

// rawElement tracks whether the tag starting tag enters or leaves an element
// whose content a span cannot go into; cur is the one we are in.
func rawElement(tag, cur string) string {
	lower := strings.ToLower(tag[:min(len(tag), 12)])
	for _, name := range []string{"title", "style", "script", "textarea"} {
		if cur == "" && strings.HasPrefix(lower, "<"+name) && len(lower) > len(name)+1 && strings.ContainsRune("> \t\n/", rune(lower[len(name)+1])) {
			return name
		}
		if cur == name && strings.HasPrefix(lower, "</"+name) {
			return ""
		}
	}
	return cur
}
