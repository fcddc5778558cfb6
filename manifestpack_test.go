package ctoharness

import (
	"reflect"
	"testing"
)

// TestPackedManifestRoundTrip packs entries of every kind, with the edge
// values a manifest can hold, and reads back exactly what was packed, in
// order, through both All and Unpack.
func TestPackedManifestRoundTrip(t *testing.T) {
	entries := []ManifestEntry{
		{Path: ".", Type: EntryDir, Mode: 0o755 | 1<<31, MtimeNs: 1, CtimeNs: 1, Inode: 2, Dev: 64769},
		{Path: ".git", Type: EntryDir, Mode: 0o755 | 1<<31, Size: 4096, MtimeNs: 1700000000123456789, CtimeNs: 1700000000000000000, Inode: 1 << 40, UID: 1000, GID: 1000},
		{Path: ".git/objects/ab/cdef", Type: EntryFile, Mode: 0o444, Size: 17, MtimeNs: -5, CtimeNs: 9, Inode: ^uint64(0), Dev: ^uint64(0), UID: ^uint32(0), GID: ^uint32(0), ObjectVerified: true},
		{Path: "a", Type: EntrySymlink, Mode: 0o777 | 1<<27, Size: 5, Target: "b/../c", MtimeNs: 3, CtimeNs: 3},
		{Path: "a b", Type: EntryFile, Size: 1<<62 + 3, SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{Path: "a b/\xff\x00name", Type: EntryOther, Mode: 0o600 | 1<<26},
		{Path: "a b/\xff\x00name/x", Type: EntryType("future-kind"), Target: "t", SHA256: "s"},
		{Path: "z", Type: EntryFile},
	}
	p := PackManifest(entries)
	if p.Len() != len(entries) || !p.Sorted() {
		t.Fatalf("Len %d Sorted %v, want %d true", p.Len(), p.Sorted(), len(entries))
	}
	if got := p.Unpack(); !reflect.DeepEqual(got, entries) {
		t.Fatalf("unpacked\n%+v\nwant\n%+v", got, entries)
	}
	i := 0
	for e := range p.All() {
		if !reflect.DeepEqual(e, entries[i]) {
			t.Fatalf("entry %d: %+v, want %+v", i, e, entries[i])
		}
		i++
		if i == 3 {
			break // a consumer may stop early
		}
	}
	if i != 3 {
		t.Fatalf("All yielded %d entries before the break, want 3", i)
	}
	if len(p.data) >= len(entries)*40 {
		t.Errorf("packed %d entries in %d bytes; expected under 40 a entry", len(entries), len(p.data))
	}
}

// TestPackedManifestUnsorted: an unsorted manifest is packed as given and
// says so, so a reader that merges in path order sorts it first.
func TestPackedManifestUnsorted(t *testing.T) {
	entries := []ManifestEntry{{Path: "b", Type: EntryFile}, {Path: "a", Type: EntryFile}}
	p := PackManifest(entries)
	if p.Sorted() {
		t.Fatal("an unsorted manifest was reported sorted")
	}
	if got := p.Unpack(); !reflect.DeepEqual(got, entries) {
		t.Fatalf("unpacked %+v, want %+v", got, entries)
	}
}

// TestSourceProofPack: a packed proof keeps its entries readable and drops
// the slice; packing nothing leaves nothing packed.
func TestSourceProofPack(t *testing.T) {
	entries := []ManifestEntry{{Path: ".", Type: EntryDir}, {Path: "f", Type: EntryFile, Size: 3}}
	p := SourceProof{Manifest: entries}
	p.Pack()
	if p.Manifest != nil || p.Packed == nil || p.EntryCount() != 2 {
		t.Fatalf("after Pack: Manifest %v Packed %v count %d", p.Manifest, p.Packed, p.EntryCount())
	}
	if got := p.Entries(); !reflect.DeepEqual(got, entries) {
		t.Fatalf("Entries %+v, want %+v", got, entries)
	}
	var empty SourceProof
	empty.Pack()
	if empty.Packed != nil || empty.EntryCount() != 0 {
		t.Fatal("packing a proof without a manifest packed something")
	}
}
