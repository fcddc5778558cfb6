package dataset

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// filePatch is one file's part of a unified diff in git's format.
type filePatch struct {
	oldPath, newPath string // "" for /dev/null
	hunks            []hunk
	binary, rename   bool
}

type hunk struct {
	oldStart int      // 1-based line of the first old line (0 for an empty file)
	lines    []string // each with its ' ', '-' or '+' prefix, without the newline
	noEOL    []bool   // the line has "\ No newline at end of file" after it
}

// parsePatch reads a git-format unified diff (the form SWE-bench's
// test_patch and patch fields take) into its files.
func parsePatch(data []byte) ([]filePatch, error) {
	var out []filePatch
	var cur *filePatch
	var h *hunk
	lines := strings.Split(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "diff --git "):
			out = append(out, filePatch{})
			cur, h = &out[len(out)-1], nil
		case cur == nil:
			continue // text before the first file
		case strings.HasPrefix(l, "--- ") && h == nil:
			cur.oldPath = diffPath(l[4:])
		case strings.HasPrefix(l, "+++ ") && h == nil:
			cur.newPath = diffPath(l[4:])
		case strings.HasPrefix(l, "Binary files ") || strings.HasPrefix(l, "GIT binary patch"):
			cur.binary = true
		case strings.HasPrefix(l, "rename from ") || strings.HasPrefix(l, "copy from "):
			cur.rename = true
		case strings.HasPrefix(l, "@@ "):
			start, err := hunkStart(l)
			if err != nil {
				return nil, err
			}
			cur.hunks = append(cur.hunks, hunk{oldStart: start})
			h = &cur.hunks[len(cur.hunks)-1]
		case h != nil && l != "" && (l[0] == ' ' || l[0] == '-' || l[0] == '+'):
			h.lines = append(h.lines, l)
			h.noEOL = append(h.noEOL, false)
		case h != nil && strings.HasPrefix(l, `\ `):
			if len(h.noEOL) > 0 {
				h.noEOL[len(h.noEOL)-1] = true
			}
		case h != nil && l == "":
			// An empty context line whose space an editor removed.
			h.lines = append(h.lines, " ")
			h.noEOL = append(h.noEOL, false)
		default:
			h = nil // a header line (index, mode) ends the hunk
		}
	}
	return out, nil
}

func diffPath(s string) string {
	s = strings.TrimRight(s, "\t")
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	if s == "/dev/null" {
		return ""
	}
	if len(s) > 2 && (s[:2] == "a/" || s[:2] == "b/") {
		return s[2:]
	}
	return s
}

// hunkStart reads the old start line of "@@ -a,b +c,d @@".
func hunkStart(l string) (int, error) {
	f := strings.Fields(l)
	if len(f) < 3 || !strings.HasPrefix(f[1], "-") {
		return 0, fmt.Errorf("malformed hunk header %q", l)
	}
	n, err := strconv.Atoi(strings.SplitN(f[1][1:], ",", 2)[0])
	if err != nil {
		return 0, fmt.Errorf("malformed hunk header %q", l)
	}
	return n, nil
}

// apply applies p's hunks to old (the file's content, nil for a new
// file): every context and removed line must be where the hunk says, or
// the patch does not fit (no fuzz, no offset: the base is exact).
func (p filePatch) apply(old []byte) ([]byte, error) {
	var lines []string
	endsNL := true
	if len(old) > 0 {
		s := string(old)
		endsNL = strings.HasSuffix(s, "\n")
		lines = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	var out []string
	pos := 0 // next old line to copy, 0-based
	outEndsNL := endsNL
	for _, h := range p.hunks {
		at := h.oldStart - 1
		if h.oldStart == 0 {
			at = 0
		}
		if at < pos || at > len(lines) {
			return nil, fmt.Errorf("a hunk of %s starts at line %d, outside the file", p.path(), h.oldStart)
		}
		out = append(out, lines[pos:at]...)
		pos = at
		for i, l := range h.lines {
			body := l[1:]
			switch l[0] {
			case ' ', '-':
				if pos >= len(lines) || lines[pos] != body {
					return nil, fmt.Errorf("%s does not match the patch at line %d", p.path(), pos+1)
				}
				pos++
				if l[0] == ' ' {
					out = append(out, body)
					outEndsNL = !h.noEOL[i]
				}
			case '+':
				out = append(out, body)
				outEndsNL = !h.noEOL[i]
			}
		}
	}
	if pos < len(lines) {
		out = append(out, lines[pos:]...)
		outEndsNL = endsNL
	}
	if len(out) == 0 {
		return []byte{}, nil
	}
	var b bytes.Buffer
	b.WriteString(strings.Join(out, "\n"))
	if outEndsNL {
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

func (p filePatch) path() string {
	if p.newPath != "" {
		return p.newPath
	}
	return p.oldPath
}
