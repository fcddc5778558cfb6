package packread

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// pack is one pack file beside its mapped index, read with pread: only the
// entries a read needs are read, and none of it is mapped.
type pack struct {
	ix   *index
	f    *os.File
	size int64 // the file's size, its 20-byte trailer included
	name string
	once sync.Once
	// zlibs keeps inflaters between reads: a new one allocates a 32 KiB
	// window, which was most of reading a tree of small objects.
	zlibs sync.Pool
}

// zlibState is one reusable inflater and its buffered input.
type zlibState struct {
	br *bufio.Reader
	zr io.ReadCloser // a zlib.Resetter
}

// Pack entry types (git's object types 1 to 4, and the two deltas).
const (
	typeOFSDelta = 6
	typeREFDelta = 7
)

func openPack(idxPath, packPath string) (*pack, error) {
	ix, err := openIndex(idxPath)
	if err != nil {
		return nil, err
	}
	p := &pack{ix: ix, name: packPath}
	if p.f, err = os.Open(packPath); err != nil {
		ix.close()
		return nil, err
	}
	if err := p.check(); err != nil {
		p.close()
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, packPath, err)
	}
	return p, nil
}

// check reads the pack's header and trailer: a pack that is not the one
// its index describes is refused before any object is read from it.
func (p *pack) check() error {
	fi, err := p.f.Stat()
	if err != nil {
		return err
	}
	p.size = fi.Size()
	var hdr [12]byte
	if p.size < 32 {
		return fmt.Errorf("%d bytes", p.size)
	}
	if _, err := p.f.ReadAt(hdr[:], 0); err != nil {
		return err
	}
	if string(hdr[:4]) != "PACK" {
		return fmt.Errorf("no PACK signature")
	}
	if v := binary.BigEndian.Uint32(hdr[4:]); v != 2 && v != 3 {
		return fmt.Errorf("pack version %d", v)
	}
	if n := binary.BigEndian.Uint32(hdr[8:]); int(n) != p.ix.n {
		return fmt.Errorf("the pack holds %d objects, its index %d", n, p.ix.n)
	}
	var sum [20]byte
	if _, err := p.f.ReadAt(sum[:], p.size-20); err != nil {
		return err
	}
	if !bytes.Equal(sum[:], p.ix.packChecksum()) {
		return fmt.Errorf("its checksum is not the one its index names")
	}
	return nil
}

// close releases the pack once, however often it is called (a cleanup
// may follow a Close): a second unmap could hit another mapping.
func (p *pack) close() error {
	var err error
	p.once.Do(func() {
		err = p.f.Close()
		if e := p.ix.close(); err == nil {
			err = e
		}
	})
	return err
}

// header is what precedes an entry's compressed data.
type header struct {
	off  int64 // the entry's own offset
	typ  byte
	size int64 // the inflated size: the object's, or the delta's
	data int64 // offset of the compressed data
	base int64 // an OFS delta's base offset
	ref  plumbing.Hash
}

// header reads the entry header at off.
func (p *pack) header(off int64) (header, error) {
	h := header{off: off}
	if off < 12 || off >= p.size-20 {
		return h, fmt.Errorf("%w: %s: entry offset %d outside the pack", ErrMalformed, p.name, off)
	}
	var buf [40]byte
	n, err := p.f.ReadAt(buf[:], off)
	if n == 0 && err != nil {
		return h, err
	}
	b := buf[:n]
	i := 0
	next := func() (byte, bool) {
		if i >= len(b) {
			return 0, false
		}
		i++
		return b[i-1], true
	}
	c, _ := next()
	h.typ = (c >> 4) & 7
	h.size = int64(c & 15)
	for shift := 4; c&0x80 != 0; shift += 7 {
		var ok bool
		if c, ok = next(); !ok || shift > 56 {
			return h, fmt.Errorf("%w: %s: entry %d has a malformed size", ErrMalformed, p.name, off)
		}
		h.size |= int64(c&0x7f) << shift
	}
	switch h.typ {
	case typeOFSDelta:
		c, ok := next()
		rel := int64(c & 0x7f)
		for ok && c&0x80 != 0 {
			if c, ok = next(); ok && rel > 1<<55 {
				ok = false
			}
			if !ok {
				break
			}
			rel = (rel+1)<<7 | int64(c&0x7f)
		}
		if !ok || rel <= 0 || rel > off {
			return h, fmt.Errorf("%w: %s: delta at %d names a base outside the pack", ErrMalformed, p.name, off)
		}
		h.base = off - rel
	case typeREFDelta:
		if i+20 > len(b) {
			return h, fmt.Errorf("%w: %s: delta at %d is truncated", ErrMalformed, p.name, off)
		}
		copy(h.ref[:], b[i:i+20])
		i += 20
	case 1, 2, 3, 4:
	default:
		return h, fmt.Errorf("%w: %s: entry %d has type %d", ErrMalformed, p.name, off, h.typ)
	}
	h.data = off + int64(i)
	// Deflate expands at most about 1032 to 1: a size past that is a lie.
	if left := p.size - 20 - h.data; h.size > left*1100+64 {
		return h, fmt.Errorf("%w: %s: entry %d claims %d bytes from %d compressed", ErrMalformed, p.name, off, h.size, left)
	}
	return h, nil
}

// inflater reads an entry's compressed data.
func (p *pack) inflater(h header) (io.ReadCloser, error) {
	sr := io.NewSectionReader(p.f, h.data, p.size-20-h.data)
	return zlib.NewReader(bufio.NewReaderSize(sr, 4096))
}

// inflate reads an entry's whole inflated data (h.size bytes).
func (p *pack) inflate(h header) ([]byte, error) {
	sr := io.NewSectionReader(p.f, h.data, p.size-20-h.data)
	st, _ := p.zlibs.Get().(*zlibState)
	var err error
	switch {
	case st == nil:
		st = &zlibState{br: bufio.NewReaderSize(sr, 4096)}
		st.zr, err = zlib.NewReader(st.br)
	default:
		st.br.Reset(sr)
		err = st.zr.(zlib.Resetter).Reset(st.br, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: entry at %d: %v", ErrMalformed, p.name, h.data, err)
	}
	out := make([]byte, h.size)
	if _, err := io.ReadFull(st.zr, out); err != nil {
		return nil, fmt.Errorf("%w: %s: entry at %d: %v", ErrMalformed, p.name, h.data, err)
	}
	p.zlibs.Put(st)
	return out, nil
}
