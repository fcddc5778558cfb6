package source

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

// benchRepo builds a committed repository of about n files spread over
// nested directories, the shape of a small real project.
func benchRepo(b *testing.B, n int) Repo {
	b.Helper()
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("pkg%02d/sub%02d/file%04d.go", i%20, (i/20)%10, i)] = fmt.Sprintf("package p\n\n// file %d\nvar x%d = %d\n", i, i, i)
	}
	base := realTempDir(b)
	dir := filepath.Join(base, "repo")
	initRepo(b, dir, files)
	repo, err := Classify(context.Background(), dir, Policy{Owned: []string{base}}, ctoharness.NopTracer{})
	if err != nil {
		b.Fatal(err)
	}
	return repo
}

// BenchmarkProve measures a full proof (go-git HEAD, refs and status plus
// the manifest walk) of a 3000-file repository, shallow and deep.
func BenchmarkProve(b *testing.B) {
	repo := benchRepo(b, 3000)
	for _, deep := range []bool{false, true} {
		b.Run(fmt.Sprintf("deep=%v", deep), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Prove(context.Background(), repo, ProofOptions{Kind: KindBefore, Deep: deep}, ctoharness.NopTracer{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkManifest measures the lstat walk alone, the part Prove adds on
// top of what git status itself costs.
func BenchmarkManifest(b *testing.B) {
	repo := benchRepo(b, 3000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := walkManifest(context.Background(), repo.Root, false); err != nil {
			b.Fatal(err)
		}
	}
}
