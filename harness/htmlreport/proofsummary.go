package htmlreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/cto-harness/cto-harness/jsonscan"
)

// proof reads a source proof's summary. The manifest and status items
// are counted by the scanner, not decoded: a proof of the Go source tree
// is 3 MB, and decoding it whole cost more than the rest of the page.
// Bytes that are not as the harness writes them are decoded whole, as
// before, so that the page says what the decoder says of them.
func (r reader) proof(name string, p *proofSummary) bool {
	if st, err := os.Stat(r.path(name)); err == nil && st.Size() > maxProofRead {
		*r.notes = append(*r.notes, fmt.Sprintf("%s is %d MiB, more than the page counts (%d MiB); its entries are in the file itself", name, st.Size()>>20, maxProofRead>>20))
		return false
	}
	b, ok := r.readUpTo(name, maxProofRead)
	if !ok {
		return false
	}
	if sum, ok := summarize(b); ok {
		*p = sum
		return true
	}
	return r.decode(name, b, p)
}

// summarize is what json.Unmarshal of data into a proofSummary gives,
// when data is one object whose manifest and status keys each appear at
// most once, spelled so, with arrays of objects as values, and nothing
// in it the scanner refuses; ok is false otherwise. The other fields are
// decoded from data with those arrays left empty.
func summarize(data []byte) (p proofSummary, ok bool) {
	s := jsonscan.New(data)
	var cuts [][2]int // the arrays' spans, in order
	counts := map[string]int{}
	ok = s.Members('}', func() bool {
		key, esc, ok := s.Str()
		if !ok || esc || s.Peek() != ':' {
			return false
		}
		s.Next()
		name := ""
		for _, n := range []string{"manifest", "status"} {
			if bytes.EqualFold(key, []byte(n)) { // the decoder matches field names so
				name = n
			}
		}
		if name == "" {
			return s.Skip()
		}
		if _, twice := counts[name]; twice || string(key) != name || s.Peek() != '[' {
			return false
		}
		start, n := s.Offset(), 0
		if !s.Members(']', func() bool { n++; return s.Peek() == '{' && s.Skip() }) {
			return false
		}
		counts[name] = n
		cuts = append(cuts, [2]int{start, s.Offset()})
		return true
	}) && s.End()
	if !ok {
		return proofSummary{}, false
	}
	rest := make([]byte, 0, 4<<10)
	at := 0
	for _, c := range cuts {
		rest = append(append(rest, data[at:c[0]]...), "[]"...)
		at = c[1]
	}
	rest = append(rest, data[at:]...)
	if json.Unmarshal(rest, &p) != nil {
		return proofSummary{}, false
	}
	if n, ok := counts["manifest"]; ok {
		p.Manifest = make([]struct{}, n)
	}
	if n, ok := counts["status"]; ok {
		p.Status = make([]struct{}, n)
	}
	return p, true
}
