package packread

import (
	"encoding/hex"
	"errors"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Storer is a go-git filesystem storage whose object reads are served by
// Objects: references, configuration and writes (loose objects, which
// Objects finds once written) stay the storage's.
type Storer struct {
	*filesystem.Storage
	Objects *Objects
}

func (s *Storer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.Objects.Read(h)
	if err != nil {
		return nil, err
	}
	if t != plumbing.AnyObject && o.Type() != t {
		return nil, plumbing.ErrObjectNotFound
	}
	return o, nil
}

// DeltaObject is the object itself: nothing the harness reads needs an
// entry's delta.
func (s *Storer) DeltaObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	return s.EncodedObject(t, h)
}

func (s *Storer) HasEncodedObject(h plumbing.Hash) error {
	ok, err := s.Objects.Has(h)
	if err != nil {
		return err
	}
	if !ok {
		return plumbing.ErrObjectNotFound
	}
	return nil
}

func (s *Storer) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	o, err := s.Objects.Read(h)
	if err != nil {
		return 0, err
	}
	return o.Size(), nil
}

// IterEncodedObjects goes through the objects of every directory of type
// t (or all), reading each as it is reached.
func (s *Storer) IterEncodedObjects(t plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	ids, err := s.Objects.ids()
	if err != nil {
		return nil, err
	}
	return &iter{o: s.Objects, ids: ids, t: t}, nil
}

func (s *Storer) Close() error {
	return errors.Join(s.Objects.Close(), s.Storage.Close())
}

// ids are the ids of every object of every directory, packed and loose,
// each once.
func (o *Objects) ids() ([]plumbing.Hash, error) {
	seen := map[plumbing.Hash]bool{}
	var out []plumbing.Hash
	add := func(h plumbing.Hash) {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for _, p := range o.packs {
		for i := range p.ix.n {
			add(plumbing.Hash(p.ix.name(i)))
		}
	}
	for _, d := range o.dirs {
		fans, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, f := range fans {
			if len(f.Name()) != 2 || !f.IsDir() {
				continue
			}
			names, err := os.ReadDir(d + "/" + f.Name())
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				var h plumbing.Hash
				if b, err := hex.DecodeString(f.Name() + n.Name()); err == nil && len(b) == len(h) {
					copy(h[:], b)
					add(h)
				}
			}
		}
	}
	return out, nil
}

type iter struct {
	o   *Objects
	ids []plumbing.Hash
	t   plumbing.ObjectType
}

func (it *iter) Next() (plumbing.EncodedObject, error) {
	for len(it.ids) > 0 {
		h := it.ids[0]
		it.ids = it.ids[1:]
		obj, err := it.o.Read(h)
		if err != nil {
			return nil, err
		}
		if it.t == plumbing.AnyObject || obj.Type() == it.t {
			return obj, nil
		}
	}
	return nil, io.EOF
}

func (it *iter) ForEach(fn func(plumbing.EncodedObject) error) error {
	for {
		obj, err := it.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(obj); err != nil {
			if errors.Is(err, storer.ErrStop) {
				return nil
			}
			return err
		}
	}
}

func (it *iter) Close() { it.ids = nil }
