package htmlreport_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
)

// proofOf is a source proof of n entries, shaped like a real tree's.
func proofOf(kind string, n int) ctoharness.SourceProof {
	p := ctoharness.SourceProof{SchemaVersion: "1.0.0", RunID: "20260102T030405Z-s3-abcd0123", Kind: kind, Root: "/home/u/go/src",
		TakenAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Head: ctoharness.HeadState{SymbolicRef: "refs/heads/main", Commit: strings.Repeat("a", 40), Tree: strings.Repeat("b", 40)},
		RefsDigest: strings.Repeat("c", 64), RefCount: 1, StatusClean: true, Status: []ctoharness.StatusEntry{}, StatusRoute: "fast", ManifestDigest: strings.Repeat("d", 64),
		Manifest: []ctoharness.ManifestEntry{}}
	for i := range n {
		p.Manifest = append(p.Manifest, ctoharness.ManifestEntry{Path: fmt.Sprintf("cmd/compile/internal/pkg%03d/file_%05d_test.go", i/40, i),
			Type: ctoharness.EntryFile, Mode: 0o644, Size: int64(1000 + i*37%90000), MtimeNs: 1764547200123456789 + int64(i)*1000003,
			CtimeNs: 1764547200987654321 + int64(i)*999983, Inode: uint64(5242880 + i)})
	}
	return p
}

// proofRun is a run directory whose source proofs list n entries each.
func proofRun(b testing.TB, n int) ([]byte, string) {
	files := map[string]string{"events.normalized.jsonl": events(b, "run_started", "case.started", "case.finished", "run_finished")}
	for _, kind := range []string{"before", "after"} {
		data, err := json.MarshalIndent(proofOf(kind, n), "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		files["proofs/source-"+kind+".json"] = string(data) + "\n"
	}
	dir := b.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	raw, err := json.Marshal(baseReport(ctoharness.StatusPass, nil, nil))
	if err != nil {
		b.Fatal(err)
	}
	return raw, dir
}

// BenchmarkRenderLargeProofs renders the page of a run whose source
// proofs list 12.8k entries each (the Go source tree) beside the page of
// the same run with empty manifests: x-empty-manifests is what the
// proofs' size adds to the page (1.0 would be nothing).
func BenchmarkRenderLargeProofs(b *testing.B) {
	bigRep, bigDir := proofRun(b, 12800)
	smallRep, smallDir := proofRun(b, 0)
	var big, small time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := htmlreport.Render(bigRep, bigDir); err != nil {
			b.Fatal(err)
		}
		big += time.Since(start)
		start = time.Now()
		if _, err := htmlreport.Render(smallRep, smallDir); err != nil {
			b.Fatal(err)
		}
		small += time.Since(start)
	}
	b.ReportMetric(float64(big.Microseconds())/1000/float64(b.N), "ms/page")
	b.ReportMetric(float64(big)/float64(small), "x-empty-manifests")
}

// TestLargeProofCounted: a source proof larger than the page reads of an
// artifact (20k files: about 5 MiB) is still counted, with no note that
// calls an honest proof broken.
func TestLargeProofCounted(t *testing.T) {
	rep, dir := proofRun(t, 20000)
	if st, err := os.Stat(filepath.Join(dir, "proofs", "source-before.json")); err != nil || st.Size() <= 4<<20 {
		t.Fatalf("the proof is %v bytes (%v); the test needs more than 4 MiB", st.Size(), err)
	}
	page, err := htmlreport.Render(rep, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"not valid JSON", "larger than"} {
		if strings.Contains(string(page), bad) {
			t.Fatalf("the page of an honest run with a 20k-entry proof says %q", bad)
		}
	}
	if !strings.Contains(string(page), ">20000<") {
		t.Fatal("the page does not count the proof's 20000 entries")
	}
}
