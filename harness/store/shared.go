package store

import (
	"errors"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// sharedStorage is a store's storage with its closure beside it: objects
// are written to the store's own directory and read from the closure
// first (which holds nearly all of them), then from the store's own.
// go-git's own alternates support is not used: it reopens the alternate's
// pack indexes on every object it does not find locally.
type sharedStorage struct {
	*filesystem.Storage
	shared *filesystem.Storage
}

func (s *sharedStorage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.shared.EncodedObject(t, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.Storage.EncodedObject(t, h)
	}
	return o, err
}

func (s *sharedStorage) DeltaObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.shared.DeltaObject(t, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.Storage.DeltaObject(t, h)
	}
	return o, err
}

func (s *sharedStorage) HasEncodedObject(h plumbing.Hash) error {
	if err := s.shared.HasEncodedObject(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
		return err
	}
	return s.Storage.HasEncodedObject(h)
}

func (s *sharedStorage) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	n, err := s.shared.EncodedObjectSize(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.Storage.EncodedObjectSize(h)
	}
	return n, err
}

func (s *sharedStorage) IterEncodedObjects(t plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	own, err := s.Storage.IterEncodedObjects(t)
	if err != nil {
		return nil, err
	}
	shared, err := s.shared.IterEncodedObjects(t)
	if err != nil {
		own.Close()
		return nil, err
	}
	return storer.NewMultiEncodedObjectIter([]storer.EncodedObjectIter{shared, own}), nil
}

func (s *sharedStorage) Close() error {
	return errors.Join(s.shared.Close(), s.Storage.Close())
}
