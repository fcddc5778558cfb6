package jsonscan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkSkipProof reads a source proof of 12.8k entries, laid out as
// the harness writes it, beside encoding/json's own syntax check of the
// same bytes (json.Valid), the direct alternative: x-json-valid is their
// ratio.
func BenchmarkSkipProof(b *testing.B) {
	var entries []string
	for i := range 12800 {
		entries = append(entries, fmt.Sprintf(`{"path":"cmd/compile/internal/pkg%03d/file_%05d_test.go","type":"file","mode":420,"size":%d,"mtime_ns":%d,"ctime_ns":%d,"inode":%d}`,
			i/40, i, 1000+i*37%90000, 1764547200123456789+int64(i)*1000003, 1764547200987654321+int64(i)*999983, 5242880+i))
	}
	var v any
	if err := json.Unmarshal([]byte(`{"root":"/src","manifest":[`+strings.Join(entries, ",")+`]}`), &v); err != nil {
		b.Fatal(err)
	}
	data, _ := json.MarshalIndent(v, "", "  ")
	b.SetBytes(int64(len(data)))
	var scan, valid time.Duration
	for b.Loop() {
		start := time.Now()
		s := New(data)
		if !s.Skip() || !s.End() {
			b.Fatal("the proof is not read")
		}
		scan += time.Since(start)
		start = time.Now()
		if !json.Valid(data) {
			b.Fatal("not valid")
		}
		valid += time.Since(start)
	}
	b.ReportMetric(float64(scan.Microseconds())/1000/float64(b.N), "ms/proof")
	b.ReportMetric(float64(scan)/float64(valid), "x-json-valid")
}
