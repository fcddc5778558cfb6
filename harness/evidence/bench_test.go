package evidence_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/schemas"
)

// goTreeProof is a source proof the size of the Go source tree's (12.8k
// entries), with the paths, sizes and stat values such a tree has.
func goTreeProof() ctoharness.SourceProof {
	p := ctoharness.SourceProof{SchemaVersion: "1.0.0", RunID: "20261121T000000Z-s3-00000000", Kind: "before", Root: "/home/u/go/src",
		TakenAt: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), Head: ctoharness.HeadState{SymbolicRef: "refs/heads/main", Commit: strings.Repeat("a", 40), Tree: strings.Repeat("b", 40)},
		RefsDigest: strings.Repeat("c", 64), RefCount: 1, StatusClean: true, Status: []ctoharness.StatusEntry{}, StatusRoute: "fast", ManifestDigest: strings.Repeat("d", 64)}
	const n = 12800
	for i := range n {
		e := ctoharness.ManifestEntry{Path: fmt.Sprintf("cmd/compile/internal/pkg%03d/file_%05d_test.go", i/40, i), Type: ctoharness.EntryFile,
			Mode: 0o644, Size: int64(1000 + i*37%90000), MtimeNs: 1764547200123456789 + int64(i)*1000003, CtimeNs: 1764547200987654321 + int64(i)*999983, Inode: uint64(5242880 + i)}
		switch {
		case i%20 == 0:
			e.Type, e.Mode, e.Size, e.Path = ctoharness.EntryDir, 0o20000000755, 4096, fmt.Sprintf("cmd/compile/internal/pkg%03d", i/20)
		case i%500 == 1:
			e.Type, e.Mode = ctoharness.EntrySymlink, 0o1000000777
			e.SetTarget("../testdata/x")
		case i%300 == 2:
			e.Path = fmt.Sprintf(".git/objects/info/packs%d", i)
			e.SetSHA256(strings.Repeat("e", 64))
		}
		p.Manifest = append(p.Manifest, e)
	}
	return p
}

// BenchmarkWriteSourceProof writes a 12.8k-entry source proof item by
// item (the run's route, validation included) beside the encoding alone
// of the same proof by json.MarshalIndent and os.WriteFile, the direct
// alternative that checks nothing; x-marshalindent is their ratio.
func BenchmarkWriteSourceProof(b *testing.B) {
	d, _ := newDir(b)
	ctx := context.Background()
	p := goTreeProof()
	doc := p
	doc.Manifest = []ctoharness.ManifestEntry{}
	var items, plain time.Duration
	for b.Loop() {
		start := time.Now()
		if err := d.WriteJSONItems(ctx, "proofs/source-before.json", schemas.SourceProof, doc, "manifest", len(p.Manifest), func(i int) any { return &p.Manifest[i] }); err != nil {
			b.Fatal(err)
		}
		items += time.Since(start)
		start = time.Now()
		data, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.Root(), "plain.json"), append(data, '\n'), 0o644); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(start)
	}
	b.ReportMetric(float64(items.Microseconds())/1000/float64(b.N), "ms/proof")
	b.ReportMetric(float64(items)/float64(plain), "x-marshalindent")
}
