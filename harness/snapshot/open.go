package snapshot

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
)

// ErrNeedsCopy means the tree cannot have a snapshot (the source's store
// holds a submodule's commit, whose files only a copy writes): the caller
// copies instead. Nothing is left behind.
var ErrNeedsCopy = errors.New("the tree has no snapshot")

// Open returns the snapshot of in.Tree, held shared until Release: made
// now (under the exclusive lock, so that runs racing for one key make it
// once and the others wait for it) or checked again. A snapshot that no
// longer matches its record, or whose record is not intact or not signed
// by the run's key, is a SNAPSHOT_CHANGED blocker; it is never repaired,
// since what changed it is unknown.
func Open(ctx context.Context, in Input) (*Snapshot, error) {
	key := Key(in.Tree, in.Checkout.Digest(), in.keyID())
	dir := filepath.Join(in.Root, key)
	in.Tracer.Trace(ctoharness.TraceMkdir, in.Root)
	if err := os.MkdirAll(in.Root, 0o755); err != nil {
		return nil, failed(err, "create the snapshots directory %s", in.Root)
	}
	lockPath := dir + lockSuffix
	for range 3 {
		in.Tracer.Trace(ctoharness.TraceWrite, lockPath)
		l, err := takeLock(ctx, lockPath, unix.LOCK_SH)
		if err != nil {
			return nil, failed(err, "hold the snapshot %s", dir)
		}
		made, err := ensure(ctx, in, key, dir, l)
		if errors.Is(err, errReplaced) {
			l.close()
			continue // pruned while this run waited: start again
		}
		if err == nil {
			err = l.touch(in.Now())
		}
		var s *Snapshot
		if err == nil {
			s, err = load(ctx, in, key, dir)
		}
		if err != nil {
			l.close()
			return nil, err
		}
		s.lock, s.Made = l, made
		return s, nil
	}
	return nil, failed(nil, "the snapshot %s was removed three times while this run waited for it; run again once `runs prune` is done", dir)
}

// ensure makes the snapshot at dir unless it exists, and returns with l
// shared and dir present; made says this run wrote it. Only the run that
// gets the lock exclusively makes it; the others wait until it exists.
func ensure(ctx context.Context, in Input, key, dir string, l *lock) (made bool, err error) {
	for !exists(dir) {
		got, err := l.try(unix.LOCK_EX)
		if err != nil {
			return false, err
		}
		if !got {
			// Another run is making it (a failed conversion holds
			// nothing, flock(2)): wait for it to appear.
			if err := pause(ctx, l.path); err != nil {
				return false, err
			}
			continue
		}
		if !exists(dir) {
			if err := build(ctx, in, key, dir); err != nil {
				return false, err
			}
			made = true
		}
	}
	if err := l.relock(ctx, unix.LOCK_SH); err != nil {
		return made, err
	}
	if !exists(dir) {
		return made, errReplaced // pruned between the two locks
	}
	return made, nil
}

func exists(dir string) bool {
	fi, err := os.Lstat(dir)
	return err == nil && fi.IsDir()
}

// failed is the blocker of a snapshot that could not be made or held.
func failed(err error, format string, args ...any) *ctoharness.BlockerError {
	return ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, err, format, args...)
}

// changed is the blocker of a snapshot that is not what its record says.
func changed(err error, dir, format string, args ...any) *ctoharness.BlockerError {
	b := ctoharness.Block(ctoharness.BlockSnapshotChanged, ctoharness.StepCopy, err, format, args...)
	b.Blocker.Message += "; the snapshot " + dir + " was changed after it was made: remove it (chmod -R u+w " + dir + " && rm -rf " + dir + ") and run again"
	return b
}

// removeTree removes a snapshot directory, read-only directories included.
func removeTree(p string) error {
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
