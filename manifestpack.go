package ctoharness

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
)

// PackedManifest is a manifest held as bytes: each entry's path shares its
// prefix with the one before it (a sorted manifest's neighbours share
// most of theirs) and its numbers are varints, so a million entries take a
// few tens of MB instead of the 150 MB the structs would. A run holds its
// source's before-proof this way from the moment the proof is written to
// the after-proof that is compared with it; entries are read back in
// order, or all at once where a step needs the slice.
type PackedManifest struct {
	// chunks are packed one after another; each one's first path is
	// written whole, so that manifests packed apart can be joined.
	chunks      [][]byte
	n           int
	sorted      bool   // bytewise by path, as Prove lists them
	first, last string // the first and last paths, for JoinPacked
	away        *detached
}

// detached is where a manifest's bytes went (Detach) and what vouches for
// them when they come back.
type detached struct {
	where string
	lens  []int
	sum   [sha256.Size]byte
}

// entry flags: the type in the low bits, then what follows the numbers.
const (
	packTypeMask  = 0x7
	packVerified  = 0x8
	packHasTarget = 0x10
	packHasSHA256 = 0x20
)

// PackManifest packs entries, in the order given.
func PackManifest(entries []ManifestEntry) *PackedManifest {
	p := &PackedManifest{n: len(entries), sorted: true}
	// Most entries of a tree of small files pack to about 40 bytes.
	buf := make([]byte, 0, 40*len(entries)+64)
	prev := ""
	for i := range entries {
		e := &entries[i]
		if e.Type > packTypeMask {
			panic(fmt.Sprintf("ctoharness: a manifest entry of type %d cannot be packed", e.Type))
		}
		flags := byte(e.Type)
		if e.ObjectVerified {
			flags |= packVerified
		}
		if e.Target() != "" {
			flags |= packHasTarget
		}
		if e.SHA256() != "" {
			flags |= packHasSHA256
		}
		if i > 0 && e.Path < prev {
			p.sorted = false
		}
		shared := commonPrefix(prev, e.Path)
		buf = append(buf, flags)
		buf = binary.AppendUvarint(buf, uint64(shared))
		buf = appendString(buf, e.Path[shared:])
		buf = binary.AppendUvarint(buf, uint64(e.Mode))
		buf = binary.AppendVarint(buf, e.Size)
		buf = binary.AppendVarint(buf, e.MtimeNs)
		buf = binary.AppendVarint(buf, e.CtimeNs-e.MtimeNs)
		buf = binary.AppendUvarint(buf, e.Inode)
		buf = binary.AppendUvarint(buf, e.Dev)
		buf = binary.AppendUvarint(buf, uint64(e.UID))
		buf = binary.AppendUvarint(buf, uint64(e.GID))
		if e.Target() != "" {
			buf = appendString(buf, e.Target())
		}
		if e.SHA256() != "" {
			buf = appendString(buf, e.SHA256())
		}
		prev = e.Path
	}
	data := buf[:len(buf):len(buf)]
	if cap(buf) > len(buf)+len(buf)/4 {
		data = append([]byte(nil), buf...)
	}
	if len(entries) > 0 {
		p.chunks = [][]byte{data}
		p.first, p.last = entries[0].Path, entries[len(entries)-1].Path
	}
	return p
}

// JoinPacked is the manifests one after another, as one manifest; their
// bytes are shared, not copied, so a walk can pack its output chunk by
// chunk and never hold it as structs. Nil and empty manifests add nothing.
func JoinPacked(parts []*PackedManifest) *PackedManifest {
	out := &PackedManifest{sorted: true}
	for _, p := range parts {
		if p.Len() == 0 {
			continue
		}
		p.mustHold()
		if out.n > 0 && p.first < out.last {
			out.sorted = false
		}
		if out.n == 0 {
			out.first = p.first
		}
		out.chunks = append(out.chunks, p.chunks...)
		out.n += p.n
		out.sorted = out.sorted && p.sorted
		out.last = p.last
	}
	return out
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// Len is the number of entries.
func (p *PackedManifest) Len() int {
	if p == nil {
		return 0
	}
	return p.n
}

// Bytes is how much room the packed entries take (where they are kept,
// when detached).
func (p *PackedManifest) Bytes() int {
	n := 0
	if p != nil {
		for _, c := range p.chunks {
			n += len(c)
		}
		if p.away != nil {
			for _, l := range p.away.lens {
				n += l
			}
		}
	}
	return n
}

// Sorted reports whether the entries are in bytewise path order.
func (p *PackedManifest) Sorted() bool { return p == nil || p.sorted }

// All yields the entries in order. Each path is its own string; the entry
// yielded is a copy the caller may keep.
func (p *PackedManifest) All() iter.Seq[ManifestEntry] {
	return func(yield func(ManifestEntry) bool) {
		if p == nil {
			return
		}
		p.mustHold()
		var path []byte
		for _, data := range p.chunks {
			r := packReader{data: data}
			for r.off < len(data) {
				var e ManifestEntry
				path = r.next(&e, path)
				if !yield(e) {
					return
				}
			}
		}
	}
}

// Detach gives up the packed bytes, which the caller keeps at where (a
// file of the run's own): a run holds its before-proof from before Case
// starts until the after-proof, a million entries are 29 MiB of it, and
// nothing reads it in between. It returns the chunks to write, in order;
// their digest stays, and Attached holds the bytes that come back to it.
// A detached manifest has its length and order but no entries: reading
// them is a harness bug (All panics).
func (p *PackedManifest) Detach(where string) [][]byte {
	chunks := p.chunks
	d := &detached{where: where}
	h := sha256.New()
	for _, c := range chunks {
		d.lens = append(d.lens, len(c))
		h.Write(c)
	}
	h.Sum(d.sum[:0])
	p.chunks, p.away = nil, d
	return chunks
}

// mustHold panics when the bytes are detached: reading a manifest that
// has none is a harness bug, never a manifest of no entries.
func (p *PackedManifest) mustHold() {
	if p.away != nil {
		panic("ctoharness: the entries of a detached packed manifest were read (" + p.away.where + "); attach its bytes first")
	}
}

// Where is where Detach said the bytes went; "" while they are held.
func (p *PackedManifest) Where() string {
	if p == nil || p.away == nil {
		return ""
	}
	return p.away.where
}

// ErrDetachedChanged means the bytes given back to a detached manifest are
// not the ones it gave up.
var ErrDetachedChanged = errors.New("the packed manifest read back is not the one set aside")

// Attached is the manifest with data, the bytes Detach gave up, back in
// place (p itself when nothing is detached); p stays detached, so that
// callers on other goroutines may each attach their own. data must be
// exactly those bytes: its length and SHA-256 are checked.
func (p *PackedManifest) Attached(data []byte) (*PackedManifest, error) {
	if p == nil || p.away == nil {
		return p, nil
	}
	total := p.Bytes()
	if sum := sha256.Sum256(data); len(data) != total || !bytes.Equal(sum[:], p.away.sum[:]) {
		return nil, fmt.Errorf("%w: %s holds %d bytes, %d were set aside", ErrDetachedChanged, p.away.where, len(data), total)
	}
	out := &PackedManifest{n: p.n, sorted: p.sorted, first: p.first, last: p.last}
	for _, n := range p.away.lens {
		out.chunks = append(out.chunks, data[:n:n])
		data = data[n:]
	}
	return out, nil
}

// AppendTo appends the entries to out, in order, as All yields them but
// with the paths of each chunk cut from one string: a million small
// strings would each be rounded up to an allocation class, and each be
// one more object for the collector to trace.
func (p *PackedManifest) AppendTo(out []ManifestEntry) []ManifestEntry {
	if p == nil {
		return out
	}
	p.mustHold()
	var path, paths []byte
	var ends []int
	for _, data := range p.chunks {
		start := len(out)
		paths, ends = paths[:0], ends[:0]
		r := packReader{data: data}
		for r.off < len(data) {
			var e ManifestEntry
			path = r.nextPath(&e, path)
			paths = append(paths, path...)
			ends = append(ends, len(paths))
			out = append(out, e)
		}
		arena := string(paths)
		from := 0
		for i, end := range ends {
			out[start+i].Path = arena[from:end]
			from = end
		}
	}
	return out
}

// Unpack is every entry, as the slice PackManifest was given.
func (p *PackedManifest) Unpack() []ManifestEntry {
	out := make([]ManifestEntry, 0, p.Len())
	for e := range p.All() {
		out = append(out, e)
	}
	return out
}

// packReader decodes entries from the front of data. The bytes are the
// harness's own, written by PackManifest in this process, so a short read
// is a harness bug, not input to recover from.
type packReader struct {
	data []byte
	off  int
}

func (r *packReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.data[r.off:])
	r.step(n)
	return v
}

func (r *packReader) varint() int64 {
	v, n := binary.Varint(r.data[r.off:])
	r.step(n)
	return v
}

// step moves past a varint of n bytes (n ≤ 0: none could be read).
func (r *packReader) step(n int) {
	if n <= 0 {
		panic("ctoharness: packed manifest is corrupt")
	}
	r.off += n
}

func (r *packReader) bytes() []byte {
	n := int(r.uvarint())
	b := r.data[r.off : r.off+n]
	r.off += n
	return b
}

// next decodes one entry into e; path is the previous entry's path, and
// the returned slice this one's, for the next call.
func (r *packReader) next(e *ManifestEntry, path []byte) []byte {
	path = r.nextPath(e, path)
	e.Path = string(path)
	return path
}

// nextPath is next but for e.Path, which it leaves for the caller to set
// from the returned path.
func (r *packReader) nextPath(e *ManifestEntry, path []byte) []byte {
	flags := r.data[r.off]
	r.off++
	shared := int(r.uvarint())
	path = append(path[:shared], r.bytes()...)
	e.Mode = uint32(r.uvarint())
	e.Size = r.varint()
	e.MtimeNs = r.varint()
	e.CtimeNs = e.MtimeNs + r.varint()
	e.Inode = r.uvarint()
	e.Dev = r.uvarint()
	e.UID = uint32(r.uvarint())
	e.GID = uint32(r.uvarint())
	e.Type = EntryType(flags & packTypeMask)
	e.ObjectVerified = flags&packVerified != 0
	e.EntryExtra = nil
	if flags&(packHasTarget|packHasSHA256) != 0 {
		x := &EntryExtra{}
		if flags&packHasTarget != 0 {
			x.LinkTarget = string(r.bytes())
		}
		if flags&packHasSHA256 != 0 {
			x.Digest = string(r.bytes())
		}
		e.EntryExtra = x
	}
	return path
}
