package gitstatus

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// TestParseIndexMatchesGoGit decodes the same index, written by go-git in
// versions 2, 3 and 4, with parseIndex and with go-git's decoder.
func TestParseIndexMatchesGoGit(t *testing.T) {
	long := strings.Repeat("d/", 2100) + "long-name.txt" // > 0xfff bytes
	names := []string{"a", "a-b", "a.b", "a/b", "a/b/c", "b", long, "z/y/x/w"}
	slices.Sort(names)
	for _, version := range []uint32{2, 3, 4} {
		idx := &index.Index{Version: version}
		for i, n := range names {
			e := idx.Add(n)
			e.Mode = filemode.Regular
			if i%3 == 1 {
				e.Mode = filemode.Executable
			}
			if i%3 == 2 {
				e.Mode = filemode.Symlink
			}
			e.Size = uint32(100 + i)
			e.ModifiedAt = time.Unix(1700000000+int64(i), int64(i*1000))
			e.Hash = plumbing.ComputeHash(plumbing.BlobObject, []byte(n))
		}
		var buf bytes.Buffer
		if err := index.NewEncoder(&buf).Encode(idx); err != nil {
			t.Fatal(err)
		}
		got, err := parseBytes(buf.Bytes())
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		var dec index.Index
		if err := index.NewDecoder(bytes.NewReader(buf.Bytes())).Decode(&dec); err != nil {
			t.Fatalf("v%d: go-git decode: %v", version, err)
		}
		if len(got) != len(dec.Entries) {
			t.Fatalf("v%d: %d entries, go-git %d", version, len(got), len(dec.Entries))
		}
		for i, e := range dec.Entries {
			g := got[i]
			if g.Name != e.Name || g.Mode != e.Mode || g.Size != e.Size || g.Hash != e.Hash || g.MtimeNs != e.ModifiedAt.UnixNano() || g.MtimeNs == 0 {
				t.Errorf("v%d entry %d: got %+v, go-git %+v", version, i, g, e)
			}
		}
	}
}

func TestParseIndexRefusesWhatItDoesNotModel(t *testing.T) {
	build := func(mutate func(idx *index.Index)) []byte {
		idx := &index.Index{Version: 3}
		for _, n := range []string{"a", "b"} {
			e := idx.Add(n)
			e.Mode = filemode.Regular
		}
		mutate(idx)
		var buf bytes.Buffer
		if err := index.NewEncoder(&buf).Encode(idx); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	tests := map[string][]byte{
		"unmerged":       build(func(idx *index.Index) { idx.Entries[0].Stage = index.OurMode }),
		"skip-worktree":  build(func(idx *index.Index) { idx.Entries[0].SkipWorktree = true }),
		"intent-to-add":  build(func(idx *index.Index) { idx.Entries[1].IntentToAdd = true }),
		"submodule":      build(func(idx *index.Index) { idx.Entries[1].Mode = filemode.Submodule }),
		"out of order":   rawIndex("b", "a"),
		"duplicate":      rawIndex("a", "a"),
		"bad checksum":   corrupt(build(func(*index.Index) {})),
		"not an index":   []byte("this is not an index file at all, honestly"),
		"split index":    withExtension(t, build(func(*index.Index) {}), "link"),
		"sparse (sdir)":  withExtension(t, build(func(*index.Index) {}), "sdir"),
		"version 5":      version5(build(func(*index.Index) {})),
		"truncated data": build(func(*index.Index) {})[:30],
	}
	for name, data := range tests {
		if _, err := parseBytes(data); !errors.Is(err, ErrFallback) {
			t.Errorf("%s: err = %v, want ErrFallback", name, err)
		}
	}
	// The hand-written index is valid when in order, so the refusals above
	// are about order, not about the writer.
	if got, err := parseBytes(rawIndex("a", "b/c")); err != nil || len(got) != 2 || got[1].Name != "b/c" || got[1].Mode != filemode.Regular {
		t.Errorf("rawIndex in order: %+v, %v", got, err)
	}
	// An optional (uppercase) extension is skipped.
	if _, err := parseBytes(withExtension(t, build(func(*index.Index) {}), "TREE")); err != nil {
		t.Errorf("TREE extension: %v", err)
	}
}

// rawIndex writes a version 2 index by hand with names in the given order
// (go-git's encoder would sort them).
func rawIndex(names ...string) []byte {
	body := []byte{'D', 'I', 'R', 'C', 0, 0, 0, 2, 0, 0, 0, byte(len(names))}
	for _, n := range names {
		e := make([]byte, 62)
		e[26], e[27] = 0x81, 0xa4 // mode 0100644
		e[60], e[61] = 0, byte(len(n))
		e = append(e, n...)
		e = append(e, make([]byte, 8-(len(e)%8))...)
		body = append(body, e...)
	}
	return resum(body)
}

func corrupt(b []byte) []byte {
	b[len(b)-1] ^= 0xff
	return b
}

func version5(b []byte) []byte {
	b[7] = 5
	return resum(b[:len(b)-20])
}

// withExtension inserts an extension record before the checksum.
func withExtension(t *testing.T, b []byte, sig string) []byte {
	t.Helper()
	body := append([]byte(nil), b[:len(b)-20]...)
	body = append(body, sig...)
	body = append(body, 0, 0, 0, 4, 1, 2, 3, 4)
	return resum(body)
}

func resum(body []byte) []byte {
	sum := sha1.Sum(body)
	return append(append([]byte(nil), body...), sum[:]...)
}

// FuzzParseIndex checks that no input makes the index parser panic or
// return entries out of order: anything it cannot read must be ErrFallback.
func FuzzParseIndex(f *testing.F) {
	for _, version := range []uint32{2, 3, 4} {
		idx := &index.Index{Version: version}
		for _, n := range []string{"a", "b/c", "b/d", "e"} {
			e := idx.Add(n)
			e.Mode = filemode.Regular
			e.ModifiedAt = time.Unix(1700000000, 5)
		}
		var buf bytes.Buffer
		if err := index.NewEncoder(&buf).Encode(idx); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add(rawIndex("a", "b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Re-sum so mutations reach the entry parser instead of failing the
		// checksum.
		if len(data) >= 20 {
			data = resum(data[:len(data)-20])
		}
		entries, err := parseBytes(data)
		if err != nil {
			if !errors.Is(err, ErrFallback) {
				t.Fatalf("error %v is not ErrFallback", err)
			}
			return
		}
		for i := 1; i < len(entries); i++ {
			if entries[i-1].Name >= entries[i].Name {
				t.Fatalf("entries out of order: %q, %q", entries[i-1].Name, entries[i].Name)
			}
		}
	})
}

// parseBytes is parseIndex of an index held in memory.
func parseBytes(data []byte) ([]Entry, error) {
	return parseIndex(bytes.NewReader(data), int64(len(data)))
}
