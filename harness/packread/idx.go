package packread

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/sys/unix"
)

// index is one pack's .idx mapped read-only: a lookup is a binary search
// in the mapped names, so nothing of it is decoded or held in the heap,
// whatever the pack's object count.
type index struct {
	data  []byte // the mapped file
	n     int
	v1    bool
	names int // offset of the first name (v2) or entry (v1)
	off32 int // v2: offset of the 32-bit offsets
	off64 int // v2: offset of the 64-bit offsets
	n64   int // v2: how many 64-bit offsets there are
}

var idxMagic = []byte{0xff, 't', 'O', 'c'}

// openIndex maps the index at path and checks its layout: the fanout is
// non-decreasing and the file's size is exactly what its object count
// gives. Its checksums are not read (that would read the whole file); an
// object found through a damaged index fails its hash check in Read.
func openIndex(path string) (*index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size < 256*4+40 || size > 1<<40 {
		return nil, fmt.Errorf("%w: %s is %d bytes", ErrMalformed, path, size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	ix := &index{data: data}
	if err := ix.layout(); err != nil {
		_ = unix.Munmap(data)
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, path, err)
	}
	return ix, nil
}

func (ix *index) layout() error {
	fanout := 0
	if bytes.HasPrefix(ix.data, idxMagic) {
		if v := binary.BigEndian.Uint32(ix.data[4:]); v != 2 {
			return fmt.Errorf("index version %d (this reader knows 1 and 2)", v)
		}
		fanout = 8
	} else {
		ix.v1 = true
	}
	if len(ix.data) < fanout+256*4 {
		return fmt.Errorf("truncated fanout")
	}
	var prev uint32
	for i := range 256 {
		c := binary.BigEndian.Uint32(ix.data[fanout+4*i:])
		if c < prev {
			return fmt.Errorf("fanout entry %d decreases", i)
		}
		prev = c
	}
	ix.n = int(prev)
	ix.names = fanout + 256*4
	if ix.v1 {
		if want := ix.names + 24*ix.n + 40; len(ix.data) != want {
			return fmt.Errorf("%d objects need %d bytes, the file has %d", ix.n, want, len(ix.data))
		}
		return nil
	}
	ix.off32 = ix.names + 20*ix.n + 4*ix.n
	ix.off64 = ix.off32 + 4*ix.n
	rest := len(ix.data) - ix.off64 - 40
	if rest < 0 || rest%8 != 0 {
		return fmt.Errorf("%d objects do not fit a %d-byte file", ix.n, len(ix.data))
	}
	ix.n64 = rest / 8
	return nil
}

func (ix *index) close() error { return unix.Munmap(ix.data) }

func (ix *index) fanout(b byte) int {
	base := 0
	if !ix.v1 {
		base = 8
	}
	return int(binary.BigEndian.Uint32(ix.data[base+4*int(b):]))
}

func (ix *index) name(i int) []byte {
	if ix.v1 {
		p := ix.names + 24*i + 4
		return ix.data[p : p+20]
	}
	p := ix.names + 20*i
	return ix.data[p : p+20]
}

// find is the pack offset of h, or -1 when the pack does not hold it.
func (ix *index) find(h plumbing.Hash) (int64, error) {
	lo, hi := 0, ix.fanout(h[0])
	if h[0] > 0 {
		lo = ix.fanout(h[0] - 1)
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := bytes.Compare(ix.name(m), h[:]); {
		case c == 0:
			return ix.offset(m)
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return -1, nil
}

func (ix *index) offset(i int) (int64, error) {
	if ix.v1 {
		return int64(binary.BigEndian.Uint32(ix.data[ix.names+24*i:])), nil
	}
	o := binary.BigEndian.Uint32(ix.data[ix.off32+4*i:])
	if o&0x80000000 == 0 {
		return int64(o), nil
	}
	k := int(o &^ 0x80000000)
	if k >= ix.n64 {
		return 0, fmt.Errorf("%w: object %d names 64-bit offset %d of %d", ErrMalformed, i, k, ix.n64)
	}
	return int64(binary.BigEndian.Uint64(ix.data[ix.off64+8*k:]) & (1<<63 - 1)), nil
}

// packChecksum is the checksum of the pack this index describes.
func (ix *index) packChecksum() []byte {
	end := len(ix.data) - 20
	return ix.data[end-20 : end]
}

// IndexNames lists the object ids of the pack index at path, in its
// order, which must be strictly increasing (a damaged index fails here
// rather than answering lookups wrongly). The index is mapped, not
// decoded: listing a store's objects needs nothing but the names.
func IndexNames(path string) ([]plumbing.Hash, error) {
	ix, err := openIndex(path)
	if err != nil {
		return nil, err
	}
	defer ix.close()
	out := make([]plumbing.Hash, ix.n)
	for i := range out {
		copy(out[i][:], ix.name(i))
		if i > 0 && bytes.Compare(out[i-1][:], out[i][:]) >= 0 {
			return nil, fmt.Errorf("%w: %s: names %d and %d are out of order", ErrMalformed, path, i-1, i)
		}
	}
	return out, nil
}
