package gitstatus

import "bytes"

// crlfAction is git's convert_crlf_action, reduced to what matters when
// content goes from the worktree into the repository (convert_to_git).
type crlfAction int

const (
	crlfBinary    crlfAction = iota // no conversion
	crlfText                        // CRLF -> LF, always
	crlfAuto                        // CRLF -> LF if the content looks like text and the index copy has no CRLF
	crlfUndefined                   // decided by core.autocrlf
)

// conversion is what git does to a file's content before hashing it.
type conversion struct {
	crlf  crlfAction
	ident bool
}

func (c conversion) none() bool { return c.crlf == crlfBinary && !c.ident }

// conversionFor applies git's convert_attrs to the attribute states of
// one path: "text" (or the legacy "crlf"), "eol", "ident", and then
// core.autocrlf for paths the attributes leave undecided.
func conversionFor(attrs map[string]string, autocrlf string) conversion {
	check := func(v string, present bool) crlfAction {
		switch {
		case !present:
			return crlfUndefined
		case v == attrTrue:
			return crlfText
		case v == attrFalse:
			return crlfBinary
		case v == "input":
			return crlfText
		case v == "auto":
			return crlfAuto
		}
		return crlfUndefined
	}
	tv, tok := attrs["text"]
	action := check(tv, tok)
	if action == crlfUndefined {
		cv, cok := attrs["crlf"]
		action = check(cv, cok)
	}
	if action != crlfBinary {
		if eol, ok := attrs["eol"]; ok && (eol == "lf" || eol == "crlf") && action == crlfUndefined {
			action = crlfText // eol implies text
		}
	}
	if action == crlfUndefined {
		switch autocrlf {
		case "true", "input":
			action = crlfAuto
		default:
			action = crlfBinary
		}
	}
	return conversion{crlf: action, ident: attrs["ident"] == attrTrue}
}

// textStats is git's gather_stats.
type textStats struct {
	nul, loneCR, loneLF, crlf, printable, nonPrintable int
}

func gatherStats(b []byte) textStats {
	var s textStats
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				s.crlf++
				i++
			} else {
				s.loneCR++
			}
		case c == '\n':
			s.loneLF++
		case c == 127:
			s.nonPrintable++
		case c < 32:
			switch c {
			case '\b', '\t', '\033', '\014':
				s.printable++
			case 0:
				s.nul++
				s.nonPrintable++
			default:
				s.nonPrintable++
			}
		default:
			s.printable++
		}
	}
	if len(b) > 0 && b[len(b)-1] == '\032' {
		s.nonPrintable--
	}
	return s
}

// isBinary is git's convert_is_binary.
func (s textStats) isBinary() bool {
	return s.loneCR > 0 || s.nul > 0 || (s.printable>>7) < s.nonPrintable
}

// hasCRLFText is what has_crlf_in_index looks for in the index copy: text
// with at least one CRLF.
func hasCRLFText(b []byte) bool {
	if bytes.IndexByte(b, '\r') < 0 {
		return false
	}
	s := gatherStats(b)
	return !s.isBinary() && s.crlf > 0
}

// toGit converts worktree content the way convert_to_git does for a
// status (no renormalization). indexHasCRLF is called, at most once, only
// when an "auto" conversion needs to know whether the index copy already
// has CRLF line endings (then git keeps them).
func (c conversion) toGit(b []byte, indexHasCRLF func() (bool, error)) ([]byte, error) {
	if c.crlf != crlfBinary && len(b) > 0 {
		s := gatherStats(b)
		convert := s.crlf > 0
		if convert && c.crlf == crlfAuto {
			if s.isBinary() {
				convert = false
			} else if has, err := indexHasCRLF(); err != nil {
				return nil, err
			} else if has {
				convert = false
			}
		}
		if convert {
			out := make([]byte, 0, len(b))
			if c.crlf == crlfAuto {
				// Text with no lone CR: dropping every CR is CRLF -> LF.
				for _, ch := range b {
					if ch != '\r' {
						out = append(out, ch)
					}
				}
			} else {
				for i, ch := range b {
					if ch == '\r' && i+1 < len(b) && b[i+1] == '\n' {
						continue
					}
					out = append(out, ch)
				}
			}
			b = out
		}
	}
	if c.ident {
		b = identToGit(b)
	}
	return b, nil
}

// identToGit collapses "$Id: anything $" to "$Id$", as git's ident_to_git.
func identToGit(src []byte) []byte {
	if bytes.Index(src, []byte("$Id")) < 0 {
		return src
	}
	out := make([]byte, 0, len(src))
	for {
		d := bytes.IndexByte(src, '$')
		if d < 0 {
			break
		}
		out = append(out, src[:d+1]...)
		src = src[d+1:]
		if len(src) > 3 && bytes.HasPrefix(src, []byte("Id:")) {
			end := bytes.IndexByte(src[3:], '$')
			if end < 0 {
				break
			}
			if bytes.IndexByte(src[3:3+end], '\n') >= 0 {
				continue // a line break before the next dollar
			}
			out = append(out, "Id$"...)
			src = src[3+end+1:]
		}
	}
	return append(out, src...)
}
