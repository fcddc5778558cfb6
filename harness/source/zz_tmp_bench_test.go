package source

import (
	"context"
	"os"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

func BenchmarkTmpBig(b *testing.B) {
	root := os.Getenv("BIG_REPO")
	if root == "" {
		b.Skip()
	}
	repo := Repo{Given: root, Root: root, GitDir: root + "/.git"}
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			walkManifest(context.Background(), root, false)
		}
	})
	b.Run("git", func(b *testing.B) {
		for b.Loop() {
			readGit(repo)
		}
	})
	b.Run("prove", func(b *testing.B) {
		for b.Loop() {
			Prove(context.Background(), repo, ProofOptions{Kind: KindBefore}, ctoharness.NopTracer{})
		}
	})
}
