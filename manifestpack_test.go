package ctoharness

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unsafe"
)

// TestPackedManifestRoundTrip packs entries of every kind, with the edge
// values a manifest can hold, and reads back exactly what was packed, in
// order, through both All and Unpack.
func TestPackedManifestRoundTrip(t *testing.T) {
	entries := []ManifestEntry{
		{Path: ".", Type: EntryDir, Mode: 0o755 | 1<<31, MtimeNs: 1, CtimeNs: 1, Inode: 2, Dev: 64769},
		{Path: ".git", Type: EntryDir, Mode: 0o755 | 1<<31, Size: 4096, MtimeNs: 1700000000123456789, CtimeNs: 1700000000000000000, Inode: 1 << 40, UID: 1000, GID: 1000},
		{Path: ".git/objects/ab/cdef", Type: EntryFile, Mode: 0o444, Size: 17, MtimeNs: -5, CtimeNs: 9, Inode: ^uint64(0), Dev: ^uint64(0), UID: ^uint32(0), GID: ^uint32(0), ObjectVerified: true},
		{Path: "a", Type: EntrySymlink, Mode: 0o777 | 1<<27, Size: 5, EntryExtra: &EntryExtra{LinkTarget: "b/../c"}, MtimeNs: 3, CtimeNs: 3},
		{Path: "a b", Type: EntryFile, Size: 1<<62 + 3, EntryExtra: &EntryExtra{Digest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}},
		{Path: "a b/\xff\x00name", Type: EntryOther, Mode: 0o600 | 1<<26},
		{Path: "a b/\xff\x00name/x", EntryExtra: &EntryExtra{LinkTarget: "t", Digest: "s"}}, // no type: packs as such
		{Path: "z", Type: EntryFile},
	}
	p := PackManifest(entries)
	if p.Len() != len(entries) || !p.Sorted() {
		t.Fatalf("Len %d Sorted %v, want %d true", p.Len(), p.Sorted(), len(entries))
	}
	if got := p.Unpack(); !reflect.DeepEqual(got, entries) {
		t.Fatalf("unpacked\n%+v\nwant\n%+v", got, entries)
	}
	head := []ManifestEntry{{Path: "kept"}}
	joined := JoinPacked([]*PackedManifest{PackManifest(entries[:4]), PackManifest(entries[4:])})
	if got := joined.AppendTo(head); !reflect.DeepEqual(got, append(head, entries...)) {
		t.Fatalf("appended\n%+v\nwant\n%+v", got, append(head, entries...))
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
	if p.Bytes() >= len(entries)*40 {
		t.Errorf("packed %d entries in %d bytes; expected under 40 a entry", len(entries), p.Bytes())
	}
}

// TestJoinPacked: manifests packed apart and joined read back as the one
// manifest they make, in order, whatever the prefix the first path of each
// shares with the last of the one before; a join that puts a path before
// the one ahead of it is reported unsorted.
func TestJoinPacked(t *testing.T) {
	entries := []ManifestEntry{
		{Path: ".", Type: EntryDir}, {Path: "dir", Type: EntryDir, Size: 3},
		{Path: "dir/a", Type: EntryFile, Size: 1}, {Path: "dir/b", Type: EntrySymlink, EntryExtra: &EntryExtra{LinkTarget: "a"}},
		{Path: "dir/b2", Type: EntryFile, EntryExtra: &EntryExtra{Digest: "x"}}, {Path: "e", Type: EntryFile, MtimeNs: 7, CtimeNs: 9},
	}
	parts := []*PackedManifest{PackManifest(entries[:2]), nil, PackManifest(nil), PackManifest(entries[2:3]), PackManifest(entries[3:])}
	j := JoinPacked(parts)
	if j.Len() != len(entries) || !j.Sorted() || j.Bytes() != parts[0].Bytes()+parts[3].Bytes()+parts[4].Bytes() {
		t.Fatalf("joined: Len %d Sorted %v Bytes %d", j.Len(), j.Sorted(), j.Bytes())
	}
	if got := j.Unpack(); !reflect.DeepEqual(got, entries) {
		t.Fatalf("joined manifest unpacked\n%+v\nwant\n%+v", got, entries)
	}
	if JoinPacked([]*PackedManifest{PackManifest(entries[3:]), PackManifest(entries[:3])}).Sorted() {
		t.Fatal("a join out of path order was reported sorted")
	}
	if e := JoinPacked(nil); e.Len() != 0 || len(e.Unpack()) != 0 || !e.Sorted() {
		t.Fatal("joining nothing gave entries")
	}
}

// TestPackedManifestDetach: a detached manifest keeps its length, order
// and size but no bytes; the bytes it gave up attach back to the same
// entries (twice, leaving it detached), and any other bytes (one flipped,
// one missing) are refused; reading a detached manifest's entries panics
// rather than yield none.
func TestPackedManifestDetach(t *testing.T) {
	entries := []ManifestEntry{
		{Path: ".", Type: EntryDir}, {Path: "dir", Type: EntryDir, Size: 3},
		{Path: "dir/a", Type: EntryFile, Size: 1, EntryExtra: &EntryExtra{Digest: "x"}}, {Path: "dir/b", Type: EntrySymlink, EntryExtra: &EntryExtra{LinkTarget: "a"}},
	}
	p := JoinPacked([]*PackedManifest{PackManifest(entries[:2]), PackManifest(entries[2:])})
	size := p.Bytes()
	var kept []byte
	for _, c := range p.Detach("/work/aside") {
		kept = append(kept, c...)
	}
	if p.Where() != "/work/aside" || p.Len() != len(entries) || !p.Sorted() || p.Bytes() != size || len(kept) != size || p.chunks != nil {
		t.Fatalf("detached: where %q len %d sorted %v bytes %d (kept %d, want %d), chunks %d", p.Where(), p.Len(), p.Sorted(), p.Bytes(), len(kept), size, len(p.chunks))
	}
	for range 2 {
		back, err := p.Attached(bytes.Clone(kept))
		if err != nil {
			t.Fatal(err)
		}
		if back.Where() != "" || !reflect.DeepEqual(back.Unpack(), entries) {
			t.Fatalf("attached: where %q entries %+v", back.Where(), back.Unpack())
		}
	}
	flipped := bytes.Clone(kept)
	flipped[len(flipped)/2] ^= 1
	for name, data := range map[string][]byte{"flipped": flipped, "short": kept[:len(kept)-1], "longer": append(bytes.Clone(kept), 0)} {
		if _, err := p.Attached(data); !errors.Is(err, ErrDetachedChanged) {
			t.Errorf("%s bytes attached: %v, want ErrDetachedChanged", name, err)
		}
	}
	if q := PackManifest(entries); q.Where() != "" {
		t.Fatal("a held manifest says it is detached")
	} else if same, err := q.Attached(nil); err != nil || same != q {
		t.Fatalf("attaching to a held manifest: %v %v", same, err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("the entries of a detached manifest were read without a panic")
		}
	}()
	for range p.All() {
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

// TestManifestEntrySize: a walk holds one entry per file of the tree, so
// its type is a byte and its fields are ordered to leave the least
// padding the JSON's order allows (a million-file tree's walk is 8 MB
// smaller for it); a new field that reopens a hole fails here.
func TestManifestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(ManifestEntry{}); got > 112 {
		t.Errorf("ManifestEntry is %d bytes; order its fields so it stays at 112 or less", got)
	}
}

// TestEntryExtra: an entry's target and digest read as "" when it has
// none, appear in its JSON as its own fields (and only when set), decode
// back to an equal entry, and setting them on a copy never changes the
// entry it was copied from; Equal compares what the extras hold.
func TestEntryExtra(t *testing.T) {
	var plain ManifestEntry
	if plain.Target() != "" || plain.SHA256() != "" {
		t.Fatal("an entry without extras has a target or digest")
	}
	e := ManifestEntry{Path: "l", Type: EntrySymlink, Mode: 0o777}
	e.SetTarget("t")
	cp := e
	cp.SetTarget("other")
	cp.SetSHA256("d")
	if e.Target() != "t" || e.SHA256() != "" || cp.Target() != "other" || cp.SHA256() != "d" {
		t.Fatalf("a copy's setters changed its source: %q %q / %q %q", e.Target(), e.SHA256(), cp.Target(), cp.SHA256())
	}
	cp.SetTarget("")
	cp.SetSHA256("")
	if cp.EntryExtra != nil {
		t.Fatal("an entry whose extras were cleared keeps an empty EntryExtra")
	}
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"path":"l","type":"symlink","mode":511,"size":0,"mtime_ns":0,"ctime_ns":0,"inode":0,"target":"t"}`; string(data) != want {
		t.Fatalf("encoded %s, want %s", data, want)
	}
	var back ManifestEntry
	if err := json.Unmarshal(data, &back); err != nil || !back.Equal(e) || back.EntryExtra == e.EntryExtra {
		t.Fatalf("decoded %+v (%v), want an equal entry with its own extras", back, err)
	}
	other := e
	other.SetTarget("t") // equal values, another pointer
	if !other.Equal(e) || other.EntryExtra == e.EntryExtra {
		t.Fatal("entries with equal extras in different places are not Equal")
	}
	other.SetSHA256("x")
	if other.Equal(e) {
		t.Fatal("entries with different digests are Equal")
	}
	if data, _ := json.Marshal(plain); bytes.Contains(data, []byte("target")) || bytes.Contains(data, []byte("sha256")) {
		t.Fatalf("an entry without extras encoded them: %s", data)
	}
}
