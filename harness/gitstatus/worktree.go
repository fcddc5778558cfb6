package gitstatus

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cto-harness/cto-harness/harness/caseworld"
)

// worktreeDir reads the files of a worktree by their paths relative to its
// root, through a descriptor of the root, as git does (it runs in the
// root): a deep file's full path can exceed PATH_MAX, which no system call
// takes, while its path below the root does not.
type worktreeDir struct {
	root string // for messages
	fd   int    // O_PATH descriptor of root
}

// openWorktreeDir opens root (not a symlink) for reads relative to it; the
// caller closes it.
func openWorktreeDir(root string) (*worktreeDir, error) {
	for {
		fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open worktree %s for status: %w", root, err)
		}
		return &worktreeDir{root: root, fd: fd}, nil
	}
}

func (w *worktreeDir) close() { unix.Close(w.fd) }

// name is rel's full path, for messages only.
func (w *worktreeDir) name(rel string) string { return w.root + "/" + rel }

// openConfined opens the regular file rel confined to the root (no
// symlink in any component, no mount crossing, never blocking): a
// worktree Case wrote may have swapped a directory for a symlink or a file
// for a FIFO since the walk.
func (w *worktreeDir) openConfined(rel string) (*os.File, error) {
	f, err := caseworld.OpenAt(w.fd, w.root, rel)
	if err != nil {
		return nil, fmt.Errorf("open %s for status: %w", w.name(rel), err)
	}
	return f, nil
}

// open opens rel for reading as git would, following symlinks in its
// directories but not at its end, and without blocking on a FIFO.
func (w *worktreeDir) open(rel string) (*os.File, error) {
	for {
		fd, err := unix.Openat(w.fd, rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: w.name(rel), Err: err}
		}
		return os.NewFile(uintptr(fd), w.name(rel)), nil
	}
}

// readFile reads the whole of rel.
func (w *worktreeDir) readFile(rel string) ([]byte, error) {
	f, err := w.open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", w.name(rel), err)
	}
	return data, nil
}

// readExact reads rel, which its lstat said is size bytes long; a file of
// another size is errSizeChanged.
func (w *worktreeDir) readExact(rel string, size int64) ([]byte, error) {
	f, err := w.open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return nil, fmt.Errorf("read %s for status: %w", w.name(rel), err)
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("%s: %w (%d bytes, lstat said %d)", w.name(rel), errSizeChanged, len(data), size)
	}
	return data, nil
}
