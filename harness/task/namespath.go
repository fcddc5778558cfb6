package task

import (
	"encoding/json"
	"strings"
)

// RevealsPath reports whether the encoded contract data names the absolute
// path p. Go's encoder escapes some bytes of a path (& < > as \u0026 …), so
// the path is looked for in its encoded form too.
func RevealsPath(data []byte, p string) bool {
	s := string(data)
	if NamesPath(s, p) {
		return true
	}
	enc, err := json.Marshal(p)
	return err == nil && NamesPath(s, strings.Trim(string(enc), `"`))
}

// NamesPath reports whether the text s names the absolute path p, or a path
// below it. p must not carry on a longer name on either side: a runs
// directory beside the source (/tmp/uuid-runs) or a source below another
// root (/var/tmp/uuid) is not /tmp/uuid, while "/tmp/uuid/x", "//tmp/uuid"
// and "cd /tmp/uuid." all name it.
func NamesPath(s, p string) bool {
	for from := 0; ; {
		i := strings.Index(s[from:], p)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(p)
		before := start == 0 || !nameByte(s[start-1])
		after := end == len(s) || !continuesName(s[end:])
		if before && after {
			return true
		}
		from = start + 1
	}
}

// continuesName reports whether rest, what follows a match, carries the
// name on: a name byte, or a dot followed by a name byte or another dot
// (a dot that ends a sentence does not).
func continuesName(rest string) bool {
	if nameByte(rest[0]) {
		return true
	}
	return rest[0] == '.' && len(rest) > 1 && (nameByte(rest[1]) || rest[1] == '.')
}

// nameByte is a byte that carries a file name on: a letter, a digit, _ or -,
// and any byte of a multi-byte character.
func nameByte(b byte) bool {
	return b == '_' || b == '-' || b >= 0x80 || ('0' <= b && b <= '9') || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z')
}
