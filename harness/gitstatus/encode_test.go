package gitstatus

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

func sampleEntries() []Entry {
	long := strings.Repeat("d/", 2100) + "long-name.txt" // > 0xfff bytes
	names := []string{"a", "a-b", "a.b", "a/b", "a/b/c", "b", long, "z/y/x/w", "naïve"}
	slices.Sort(names)
	var out []Entry
	for i, n := range names {
		mode := []filemode.FileMode{filemode.Regular, filemode.Executable, filemode.Symlink}[i%3]
		out = append(out, Entry{
			Name: n, Mode: mode, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(n)),
			Size:    uint32(100 + i),
			MtimeNs: 1700000000e9 + int64(i)*1e9 + int64(i*1000),
			CtimeNs: 1700000500e9 + int64(i*7),
			Dev:     uint32(2049 + i), Ino: uint32(1000 + i), UID: uint32(i), GID: uint32(2 * i),
		})
	}
	return out
}

// TestEncodeRoundTrip writes entries with Encode and reads them back with
// go-git's decoder and with the parser: every field must survive.
func TestEncodeRoundTrip(t *testing.T) {
	want := sampleEntries()
	data, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseBytes(Encode(x)) != x:\n got %+v\nwant %+v", got, want)
	}
	var dec index.Index
	if err := index.NewDecoder(bytes.NewReader(data)).Decode(&dec); err != nil {
		t.Fatalf("go-git cannot decode the index: %v", err)
	}
	if dec.Version != 2 || len(dec.Entries) != len(want) {
		t.Fatalf("go-git read version %d with %d entries", dec.Version, len(dec.Entries))
	}
	for i, e := range dec.Entries {
		w := want[i]
		if e.Name != w.Name || e.Mode != w.Mode || e.Hash != w.Hash || e.Size != w.Size ||
			e.ModifiedAt.UnixNano() != w.MtimeNs || e.CreatedAt.UnixNano() != w.CtimeNs ||
			e.Dev != w.Dev || e.Inode != w.Ino || e.UID != w.UID || e.GID != w.GID || e.Stage != 0 {
			t.Errorf("entry %d: go-git read %+v, want %+v", i, e, w)
		}
	}
}

// TestParseIndexStatFields reads an index go-git wrote with full stat data.
func TestParseIndexStatFields(t *testing.T) {
	idx := &index.Index{Version: 2}
	e := idx.Add("f")
	e.Mode = filemode.Executable
	e.Hash = plumbing.ComputeHash(plumbing.BlobObject, []byte("f"))
	e.Size = 42
	e.ModifiedAt = time.Unix(1700000000, 123)
	e.CreatedAt = time.Unix(1700000001, 456)
	e.Dev, e.Inode, e.UID, e.GID = 7, 8, 9, 10
	var buf bytes.Buffer
	if err := index.NewEncoder(&buf).Encode(idx); err != nil {
		t.Fatal(err)
	}
	got, err := parseBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := Entry{Name: "f", Mode: filemode.Executable, Hash: e.Hash, Size: 42, MtimeNs: 1700000000e9 + 123, CtimeNs: 1700000001e9 + 456, Dev: 7, Ino: 8, UID: 9, GID: 10}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestEncodeRefusesBadEntries(t *testing.T) {
	for name, entries := range map[string][]Entry{
		"out of order": {{Name: "b"}, {Name: "a"}},
		"duplicate":    {{Name: "a"}, {Name: "a"}},
		"empty name":   {{Name: ""}},
		"NUL in name":  {{Name: "a\x00b"}},
	} {
		if _, err := Encode(entries); err == nil {
			t.Errorf("%s: Encode accepted %+v", name, entries)
		}
	}
	if data, err := Encode(nil); err != nil {
		t.Errorf("empty index: %v", err)
	} else if got, err := parseBytes(data); err != nil || len(got) != 0 {
		t.Errorf("empty index read back as %v, %v", got, err)
	}
}
