package packread

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"container/list"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

type readCloser = io.ReadCloser

var errReadOnly = errors.New("packread: objects read in place cannot be written")

// object is an object read whole. Its content may be shared with the base
// cache: nothing writes it.
type object struct {
	h    plumbing.Hash
	t    plumbing.ObjectType
	data []byte
}

func (o *object) Hash() plumbing.Hash             { return o.h }
func (o *object) Type() plumbing.ObjectType       { return o.t }
func (o *object) SetType(plumbing.ObjectType)     {}
func (o *object) Size() int64                     { return int64(len(o.data)) }
func (o *object) SetSize(int64)                   {}
func (o *object) Writer() (io.WriteCloser, error) { return nil, errReadOnly }
func (o *object) Reader() (io.ReadCloser, error)  { return io.NopCloser(bytes.NewReader(o.data)), nil }

// streamed is a large object inflated each time it is read.
type streamed struct {
	keep *Objects // its packs stay open while the object can be read
	h    plumbing.Hash
	t    plumbing.ObjectType
	size int64
	open func() (readCloser, error)
}

func (o *streamed) Hash() plumbing.Hash             { return o.h }
func (o *streamed) Type() plumbing.ObjectType       { return o.t }
func (o *streamed) SetType(plumbing.ObjectType)     {}
func (o *streamed) Size() int64                     { return o.size }
func (o *streamed) SetSize(int64)                   {}
func (o *streamed) Writer() (io.WriteCloser, error) { return nil, errReadOnly }

// Reader inflates the object, hashing it as it goes: the read that ends it
// fails if it is not the object its id names.
func (o *streamed) Reader() (io.ReadCloser, error) {
	rc, err := o.open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, o.h, err)
	}
	d := sha1.New()
	fmt.Fprintf(d, "%s %d\x00", o.t, o.size)
	return &checked{rc: rc, r: io.LimitReader(rc, o.size), d: d, left: o.size, h: o.h}, nil
}

type checked struct {
	rc   io.ReadCloser
	r    io.Reader
	d    hash.Hash
	left int64
	h    plumbing.Hash
}

func (c *checked) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.d.Write(p[:n])
	c.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if c.left != 0 {
			return n, fmt.Errorf("%w: %s ends %d bytes short", ErrMalformed, c.h, c.left)
		}
		if got := c.d.Sum(nil); string(got) != string(c.h[:]) {
			return n, fmt.Errorf("%w: the object read as %s hashes to %x", ErrMalformed, c.h, got)
		}
	}
	return n, err
}

func (c *checked) Close() error { return c.rc.Close() }

func loosePath(dir string, h plumbing.Hash) string {
	s := h.String()
	return filepath.Join(dir, s[:2], s[2:])
}

// readLoose reads the loose object at path (os.ErrNotExist when there is
// none): its header, then its content, whole or streamed past streamAbove.
func readLoose(path string, h plumbing.Hash) (plumbing.EncodedObject, error) {
	f, zr, t, size, err := openLoose(path)
	if err != nil {
		return nil, err
	}
	if size > streamAbove {
		zr.Close()
		f.Close()
		open := func() (readCloser, error) {
			f, zr, _, _, err := openLoose(path)
			if err != nil {
				return nil, err
			}
			return &looseReader{Reader: zr, f: f}, nil
		}
		return &streamed{h: h, t: t, size: size, open: open}, nil
	}
	defer f.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(zr, data); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, path, err)
	}
	if err := verify(h, t, data); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return &object{h: h, t: t, data: data}, nil
}

type looseReader struct {
	io.Reader
	f *os.File
}

func (l *looseReader) Close() error { return l.f.Close() }

// openLoose opens a loose object and reads its "type size\0" header.
func openLoose(path string) (*os.File, io.ReadCloser, plumbing.ObjectType, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	zr, err := zlib.NewReader(bufio.NewReaderSize(f, 4096))
	if err != nil {
		f.Close()
		return nil, nil, 0, 0, fmt.Errorf("%w: %s: %v", ErrMalformed, path, err)
	}
	var hdr []byte
	var b [1]byte
	for len(hdr) < 32 {
		if _, err := io.ReadFull(zr, b[:]); err != nil {
			break
		}
		if b[0] == 0 {
			break
		}
		hdr = append(hdr, b[0])
	}
	sp := bytes.IndexByte(hdr, ' ')
	t, terr := plumbing.ParseObjectType(string(hdr[:max(sp, 0)]))
	size, serr := strconv.ParseInt(string(hdr[sp+1:]), 10, 64)
	if sp < 0 || b[0] != 0 || terr != nil || serr != nil || size < 0 || t < plumbing.CommitObject || t > plumbing.TagObject {
		zr.Close()
		f.Close()
		return nil, nil, 0, 0, fmt.Errorf("%w: %s: header %q", ErrMalformed, path, hdr)
	}
	return f, zr, t, size, nil
}

// baseCache keeps recently resolved entries, by pack and offset, up to a
// budget of bytes: the entries near one another in a pack are mostly
// deltas of the same few bases. Each entry is charged its bookkeeping
// (entryCost) besides its data: a tree of a million small blobs would
// otherwise keep them all, the budget counting a few bytes for each.
type baseCache struct {
	mu     sync.Mutex
	budget int
	used   int
	lru    *list.List
	byKey  map[cacheKey]*list.Element
}

type cacheKey struct {
	p   *pack
	off int64
}

type cached struct {
	k    cacheKey
	t    plumbing.ObjectType
	data []byte
}

// entryCost is what one cached entry holds besides its data: the cached
// value, its list element and its map slot.
const entryCost = 160

func newBaseCache(budget int) *baseCache {
	return &baseCache{budget: budget, lru: list.New(), byKey: map[cacheKey]*list.Element{}}
}

func (c *baseCache) get(p *pack, off int64) (plumbing.ObjectType, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[cacheKey{p, off}]
	if !ok {
		return 0, nil, false
	}
	c.lru.MoveToFront(e)
	v := e.Value.(*cached)
	return v.t, v.data, true
}

func (c *baseCache) put(p *pack, off int64, t plumbing.ObjectType, data []byte) {
	if len(data) > c.budget/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{p, off}
	if _, ok := c.byKey[k]; ok {
		return
	}
	c.byKey[k] = c.lru.PushFront(&cached{k: k, t: t, data: data})
	c.used += len(data) + entryCost
	for c.used > c.budget {
		e := c.lru.Back()
		v := e.Value.(*cached)
		c.lru.Remove(e)
		delete(c.byKey, v.k)
		c.used -= len(v.data) + entryCost
	}
}
