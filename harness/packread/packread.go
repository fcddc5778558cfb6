// Package packread reads git objects where they lie: packs through their
// mapped indexes, loose objects by their paths. go-git's own storage
// decodes every pack index whole into the heap, and builds a map of every
// offset, each time a repository is opened: on a store of 100k objects
// that is most of the cost of a collect that reads ten trees, and on a
// long history tens of MiB of heap. Here a lookup is a binary search in
// the mapped index, only the entries a read needs are read, a small cache
// keeps the delta bases reads share, and every object is hashed against
// its id before it is returned, so a damaged index or pack is an error,
// never another object.
package packread

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// ErrMalformed: an index, pack or loose object is not what git writes, or
// an object's content does not hash to its id.
var ErrMalformed = errors.New("malformed git object store")

// streamAbove is the size over which an undeltified object is inflated as
// it is read rather than held whole (go-git's large-object threshold in
// the harness's stores).
const streamAbove = 1 << 20

// maxChain bounds a delta chain (git's deepest are a few thousand); a REF
// delta loop would otherwise never end.
const maxChain = 10000

// Objects reads the objects of a list of objects directories. It is safe
// for concurrent use.
type Objects struct {
	dirs  []string
	packs []*pack // every directory's packs, in lookup order
	cache *baseCache
}

// Open lists the packs of each objects directory (dirs[0] first) and maps
// their indexes. An index whose pack is gone is skipped, as git skips it;
// an index or pack git would not read is an error. Loose objects are
// looked up when read, so objects written after Open are found.
func Open(dirs ...string) (*Objects, error) {
	o := &Objects{dirs: dirs, cache: newBaseCache(16 << 20)}
	for _, d := range dirs {
		names, err := os.ReadDir(filepath.Join(d, "pack"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("list the packs of %s: %w", d, err)
		}
		for _, e := range names {
			n := e.Name()
			if !strings.HasPrefix(n, "pack-") || !strings.HasSuffix(n, ".idx") {
				continue
			}
			base := filepath.Join(d, "pack", strings.TrimSuffix(n, ".idx"))
			if _, err := os.Lstat(base + ".pack"); errors.Is(err, os.ErrNotExist) {
				continue
			}
			p, err := openPack(base+".idx", base+".pack")
			if err != nil {
				o.Close()
				return nil, fmt.Errorf("open the pack %s: %w", base+".pack", err)
			}
			o.packs = append(o.packs, p)
		}
	}
	return o, nil
}

// CloseUnreachable releases o's packs once nothing can read through o any
// more (o, a Storer holding it, an object streaming from it): for a
// repository handed out without a Close. Close may still be called first.
func (o *Objects) CloseUnreachable() {
	runtime.AddCleanup(o, func(ps []*pack) {
		for _, p := range ps {
			_ = p.close()
		}
	}, o.packs)
}

// Close releases the packs and their mapped indexes.
func (o *Objects) Close() error {
	var errs []error
	for _, p := range o.packs {
		errs = append(errs, p.close())
	}
	o.packs = nil
	return errors.Join(errs...)
}

// locate is the pack and offset of h, or a nil pack when no pack has it.
func (o *Objects) locate(h plumbing.Hash) (*pack, int64, error) {
	for _, p := range o.packs {
		off, err := p.ix.find(h)
		if err != nil || off >= 0 {
			return p, off, err
		}
	}
	return nil, -1, nil
}

// Has reports whether some directory holds h (without reading it).
func (o *Objects) Has(h plumbing.Hash) (bool, error) {
	p, _, err := o.locate(h)
	if err != nil || p != nil {
		return p != nil, err
	}
	for _, d := range o.dirs {
		if _, err := os.Lstat(loosePath(d, h)); err == nil {
			return true, nil
		}
	}
	return false, nil
}

// Read is the object h, hashed against h (an object over a MiB that is
// stored whole is hashed as it is read, and its reader fails at the end
// if it does not match). plumbing.ErrObjectNotFound when no directory
// holds it.
func (o *Objects) Read(h plumbing.Hash) (plumbing.EncodedObject, error) {
	p, off, err := o.locate(h)
	if err != nil {
		return nil, err
	}
	if p != nil {
		return o.packed(p, off, h)
	}
	for _, d := range o.dirs {
		obj, err := readLoose(loosePath(d, h), h)
		if !errors.Is(err, os.ErrNotExist) {
			return obj, err
		}
	}
	return nil, plumbing.ErrObjectNotFound
}

func (o *Objects) packed(p *pack, off int64, h plumbing.Hash) (plumbing.EncodedObject, error) {
	hd, err := p.header(off)
	if err != nil {
		return nil, err
	}
	if hd.typ <= 4 && hd.size > streamAbove {
		return &streamed{keep: o, h: h, t: plumbing.ObjectType(hd.typ), size: hd.size, open: func() (readCloser, error) { return p.inflater(hd) }}, nil
	}
	t, data, err := o.resolve(p, off)
	if err != nil {
		return nil, err
	}
	if err := verify(h, t, data); err != nil {
		return nil, fmt.Errorf("%w (%s, offset %d)", err, p.name, off)
	}
	return &object{h: h, t: t, data: data}, nil
}

// step is one delta of a chain being resolved.
type step struct {
	p  *pack
	hd header
}

// resolve is the type and content of the entry at off: the chain of
// deltas down to its base (or to a cached result on the way), applied
// back up. Every result on the way is offered to the cache: the objects
// beside this one in the pack are most likely deltas of the same bases.
// The one exception is a blob that is no delta and was read for itself: a
// copy reads each of a tree's blobs once, and a million of them would keep
// the cache full of what nothing reads again (a tree or commit read for
// itself is kept: the older versions a history walk reads next are deltas
// of it).
func (o *Objects) resolve(p *pack, off int64) (plumbing.ObjectType, []byte, error) {
	var chain []step
	var t plumbing.ObjectType
	var data []byte
	for {
		if len(chain) > maxChain {
			return 0, nil, fmt.Errorf("%w: %s: a delta chain of more than %d entries at %d", ErrMalformed, p.name, maxChain, off)
		}
		if ct, cd, ok := o.cache.get(p, off); ok {
			t, data = ct, cd
			break
		}
		hd, err := p.header(off)
		if err != nil {
			return 0, nil, err
		}
		if hd.typ <= 4 {
			if data, err = p.inflate(hd); err != nil {
				return 0, nil, err
			}
			t = plumbing.ObjectType(hd.typ)
			if len(chain) > 0 || t != plumbing.BlobObject {
				o.cache.put(p, off, t, data)
			}
			break
		}
		chain = append(chain, step{p, hd})
		if hd.typ == typeOFSDelta {
			off = hd.base
			continue
		}
		bp, boff, err := o.locate(hd.ref)
		if err != nil {
			return 0, nil, err
		}
		if bp == nil {
			return 0, nil, fmt.Errorf("%w: %s: the base %s of a delta is in no pack", ErrMalformed, p.name, hd.ref)
		}
		p, off = bp, boff
	}
	for i := len(chain) - 1; i >= 0; i-- {
		s := chain[i]
		delta, err := s.p.inflate(s.hd)
		if err != nil {
			return 0, nil, err
		}
		if data, err = applyDelta(data, delta); err != nil {
			return 0, nil, fmt.Errorf("%s: entry at %d: %w", s.p.name, s.hd.data, err)
		}
		o.cache.put(s.p, s.hd.off, t, data)
	}
	return t, data, nil
}

// verify checks that t and data hash to h.
func verify(h plumbing.Hash, t plumbing.ObjectType, data []byte) error {
	d := sha1.New()
	fmt.Fprintf(d, "%s %d\x00", t, len(data))
	d.Write(data)
	if got := d.Sum(nil); string(got) != string(h[:]) {
		return fmt.Errorf("%w: the object read as %s hashes to %x", ErrMalformed, h, got)
	}
	return nil
}
