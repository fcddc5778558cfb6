package evidence

// appendIndented appends src, one JSON value as json.Marshal encodes it
// (compact: no space outside strings), to dst as json.MarshalIndent with
// prefix and indent lays it out, byte for byte. It only tracks strings,
// where encoding/json's Indent steps a full scanner through every byte:
// that was a third of the cost of writing a large source proof. Space
// outside strings is dropped, as Indent drops it.
func appendIndented(dst, src []byte, prefix, indent string) []byte {
	depth := 0
	open := false // after { or [: the line break waits, so that empty ones stay {} and []
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if open && c != '}' && c != ']' {
			open = false
			depth++
			dst = newline(dst, prefix, indent, depth)
		}
		switch c {
		case '"':
			j := stringEnd(src, i)
			dst = append(dst, src[i:j]...)
			i = j - 1
		case '{', '[':
			open = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			dst = newline(dst, prefix, indent, depth)
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				dst = newline(dst, prefix, indent, depth)
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// stringEnd is the index just past the string whose opening quote is at
// src[i] (len(src) when it does not end).
func stringEnd(src []byte, i int) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(src)
}

func newline(dst []byte, prefix, indent string, depth int) []byte {
	dst = append(dst, '\n')
	dst = append(dst, prefix...)
	for range depth {
		dst = append(dst, indent...)
	}
	return dst
}
