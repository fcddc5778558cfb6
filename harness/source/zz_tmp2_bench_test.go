package source

import (
	"os"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func BenchmarkTmpParts(b *testing.B) {
	root := os.Getenv("BIG_REPO")
	if root == "" {
		b.Skip()
	}
	r, _ := git.PlainOpen(root)
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			idx, err := r.Storer.Index()
			if err != nil || len(idx.Entries) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("readfile-index", func(b *testing.B) {
		for b.Loop() {
			os.ReadFile(root + "/.git/index")
		}
	})
	b.Run("tree", func(b *testing.B) {
		for b.Loop() {
			r2, _ := git.PlainOpen(root)
			h, _ := r2.Head()
			c, _ := r2.CommitObject(h.Hash())
			t, _ := c.Tree()
			n := 0
			var walk func(t *object.Tree)
			walk = func(t *object.Tree) {
				for _, e := range t.Entries {
					if e.Mode == filemode.Dir {
						st, err := r2.TreeObject(e.Hash)
						if err != nil {
							b.Fatal(err)
						}
						walk(st)
					} else {
						n++
					}
				}
			}
			walk(t)
			if n != 15000 {
				b.Fatal(n)
			}
		}
	})
}
