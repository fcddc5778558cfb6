// Package caseworld is how the harness reads what Case could have touched:
// the fixture worktree, its .git and its scratch. Everything there is
// hostile input, so a read never follows a symlink (in any component), never
// leaves the root it was asked about, never crosses a mount, and never opens
// anything but a regular file: a FIFO, socket or device Case left is
// reported, never opened for reading.
package caseworld

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNotRegular means the path names something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrUnconfined means the kernel cannot confine the open (no openat2).
var ErrUnconfined = errors.New("confined open (openat2) is not available on this kernel; Linux 5.6 or later is needed")

// resolve is what every confined open asks of the kernel: stay beneath the
// root, follow no symlink and no /proc magic link, cross no mount.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// Open opens rel (slash-separated, relative) below root for reading. Any
// symlink on the way, a path leaving root, a mount crossing or a final
// component that is not a regular file is an error; nothing is ever opened
// with blocking semantics, so a FIFO swapped in after a walk cannot hang
// the caller.
func Open(root, rel string) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", root, err)
	}
	defer unix.Close(dir)
	return OpenAt(dir, root, rel)
}

// OpenAt is Open against an already opened root directory descriptor
// (name is only for messages).
func OpenAt(dir int, name, rel string) (*os.File, error) {
	full := filepath.Join(name, filepath.FromSlash(rel))
	if rel == "" || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("open %s: %q is not a relative path", full, rel)
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY, Resolve: resolve}
	var fd int
	var err error
	for {
		fd, err = unix.Openat2(dir, filepath.FromSlash(rel), &how)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ENOSYS):
		return nil, fmt.Errorf("open %s: %w", full, ErrUnconfined)
	case err != nil:
		return nil, fmt.Errorf("open %s confined to %s: %w", rel, name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", full, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", full, ErrNotRegular)
	}
	return os.NewFile(uintptr(fd), full), nil
}

// Dir opens the directory rel (slash-separated, relative; "." for root)
// below root as an O_PATH descriptor, under the same rules as Open: for
// creating, renaming and removing names in it with the *at calls.
func Dir(root, rel string) (int, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open root %s: %w", root, err)
	}
	if rel == "." {
		return dir, nil
	}
	defer unix.Close(dir)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve}
	for {
		fd, err := unix.Openat2(dir, filepath.FromSlash(rel), &how)
		switch {
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.ENOSYS):
			return -1, fmt.Errorf("open %s: %w", filepath.Join(root, rel), ErrUnconfined)
		case err != nil:
			return -1, fmt.Errorf("open directory %s confined to %s: %w", rel, root, err)
		}
		return fd, nil
	}
}

// Available reports whether confined opens work on this kernel.
func Available() error {
	f, err := Open("/", "proc/self/status")
	if errors.Is(err, ErrUnconfined) {
		return err
	}
	if err == nil {
		f.Close()
	}
	return nil
}
