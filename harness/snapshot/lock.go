package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// errReplaced means the lock file was removed (a prune) while this process
// waited for it: the lock protects nothing, and the caller starts again.
var errReplaced = errors.New("the snapshot's lock file was replaced")

// lock is a flock on a snapshot's KEY.lock. The kernel drops it when the
// process ends, however it ends, so a killed run never keeps its snapshot
// from being pruned.
type lock struct {
	fd   int
	path string
}

// takeLock opens path (creating it) and locks it how (LOCK_SH or LOCK_EX),
// waiting while ctx lives. A lock file a prune removed meanwhile is opened
// again.
func takeLock(ctx context.Context, path string, how int) (*lock, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open the snapshot lock %s: %w", path, err)
		}
		l := &lock{fd: fd, path: path}
		err = l.relock(ctx, how)
		if err == nil {
			return l, nil
		}
		l.close()
		if !errors.Is(err, errReplaced) {
			return nil, err
		}
	}
}

// tryExclusive takes path exclusively without waiting; held is true when
// another process holds it (a run using the snapshot, or one making it).
func tryExclusive(path string) (l *lock, held bool, err error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("open the snapshot lock %s: %w", path, err)
	}
	l = &lock{fd: fd, path: path}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		l.close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	if !l.current() {
		l.close()
		return nil, true, nil // replaced: someone else is at it
	}
	return l, false, nil
}

// relock changes the lock to how, waiting while ctx lives. A conversion
// may drop the lock held before taking the new one (flock(2)), so the
// caller checks again whatever it checked under the old one.
func (l *lock) relock(ctx context.Context, how int) error {
	for {
		got, err := l.try(how)
		if err != nil || got {
			return err
		}
		if err := pause(ctx, l.path); err != nil {
			return err
		}
	}
}

// try changes the lock to how without waiting; got is false when another
// process holds it in a conflicting way.
func (l *lock) try(how int) (got bool, err error) {
	if err := unix.Flock(l.fd, how|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EINTR) {
			return false, nil
		}
		return false, fmt.Errorf("lock %s: %w", l.path, err)
	}
	if !l.current() {
		return false, errReplaced
	}
	return true, nil
}

// pause waits a little before a lock is tried again.
func pause(ctx context.Context, path string) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting for the snapshot lock %s: %w", path, ctx.Err())
	case <-time.After(20 * time.Millisecond):
		return nil
	}
}

// current reports whether path still names the file locked.
func (l *lock) current() bool {
	var a, b unix.Stat_t
	if unix.Fstat(l.fd, &a) != nil || unix.Stat(l.path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// touch records a use: prune removes the least recently used first.
func (l *lock) touch(now time.Time) error {
	tv := unix.NsecToTimeval(now.UnixNano())
	if err := unix.Futimes(l.fd, []unix.Timeval{tv, tv}); err != nil {
		return fmt.Errorf("record the use of the snapshot in %s: %w", l.path, err)
	}
	return nil
}

func (l *lock) close() { unix.Close(l.fd) }
