package gitstatus

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	ctoharness "github.com/cto-harness/cto-harness"
)

// TestTreeHasherMatchesBuild: the streaming hasher gives the root hash
// buildIndexTrees gives, on entries in index order (as both decoders
// require), with sparse directory entries, D/F neighbours, empty
// components and names ending in a slash.
func TestTreeHasherMatchesBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"a", "b", "a.c", "a-b", "", "z"}
	modes := []filemode.FileMode{filemode.Regular, filemode.Executable, filemode.Symlink, filemode.Submodule, filemode.Dir}
	for round := range 3000 {
		n := rng.IntN(12)
		entries := make([]Entry, n)
		for i := range entries {
			var name []string
			for range 1 + rng.IntN(4) {
				name = append(name, parts[rng.IntN(len(parts))])
			}
			e := &entries[i]
			if e.Name = strings.Join(name, "/"); e.Name == "" {
				e.Name = "x" // empty names are refused before any hashing
			}
			e.Mode = modes[rng.IntN(len(modes))]
			if e.Mode == filemode.Dir && rng.IntN(2) == 0 {
				e.Name += "/"
			}
			e.Hash[0], e.Hash[19] = byte(i), byte(round)
		}
		slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
		entries = slices.CompactFunc(entries, func(a, b Entry) bool { return a.Name == b.Name })
		n = len(entries)
		want := buildIndexTrees(entries)[""].hash
		if got := TreeHash(entries); got != want {
			names := make([]string, n)
			for i := range entries {
				names[i] = entries[i].Name + " " + entries[i].Mode.String()
			}
			t.Fatalf("round %d: TreeHash = %s, buildIndexTrees = %s, for %q", round, got, want, names)
		}
	}
	if got, want := TreeHash(nil), (plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")); got != want {
		t.Fatalf("no entries: %s, want %s", got, want)
	}
}

// TestManifestNamesShares: a name the manifest lists is its very string,
// in order or after going back; one it does not list is a string of its
// own.
func TestManifestNamesShares(t *testing.T) {
	m := []ctoharness.ManifestEntry{{Path: "."}, {Path: "a"}, {Path: "a/b"}, {Path: "c"}, {Path: "d"}}
	s := &manifestNames{m: m}
	same := func(got string, i int) {
		t.Helper()
		if got != m[i].Path || unsafe.StringData(got) != unsafe.StringData(m[i].Path) {
			t.Fatalf("name %q is not the manifest's own string for %q", got, m[i].Path)
		}
	}
	same(s.name([]byte("a")), 1)
	same(s.name([]byte("a/b")), 2)
	same(s.name([]byte("a/b")), 2) // an unmerged path's next stage
	if got := s.name([]byte("b")); got != "b" {
		t.Fatalf("unlisted name: %q", got)
	}
	same(s.name([]byte("d")), 4)
	same(s.name([]byte("a")), 1) // a second file starts over
	if got := s.name([]byte("e")); got != "e" {
		t.Fatalf("unlisted name past the end: %q", got)
	}
}
