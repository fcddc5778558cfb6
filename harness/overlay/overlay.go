// Package overlay shows a source repository's HEAD tree at a directory
// without copying it: an overlayfs whose lower layer is the source worktree
// and whose writable upper layer starts with a whiteout for everything the
// tree does not hold (the source's .git, its untracked and ignored files).
// Whatever is written through the mount lands in the upper layer;
// overlayfs never writes a lower layer, so the source stays untouched.
//
// The verification checkout is made this way where the machine allows it.
// What the mount shows is the worktree's bytes, not the tree's: the caller
// still proves them (package fixture holds them to the source proof, or
// hashes them). Lower mounts a directory that holds exactly a tree (the
// fixture's lower layer, package snapshot) with nothing to hide.
package overlay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

// ErrUnavailable means this machine or this source cannot have an overlay
// (no CAP_SYS_ADMIN, a kernel that refuses, a tree with submodules); the
// caller copies instead. Nothing is left behind.
var ErrUnavailable = errors.New("no overlay")

// Input says what to show where.
type Input struct {
	Source string // the source worktree: the lower layer, never written
	// GitDir is the source's git directory, read for the HEAD tree;
	// empty means Source/.git.
	GitDir string
	Dest   string // the mount point; created here, must not exist
	// Upper and Work are the writable layer and overlayfs's work
	// directory (on one filesystem); created here, must not exist. Neither
	// may be in any view: a command sees the layer only through the mount.
	Upper, Work string
	// Below are read-only layers under Source (Lower only), topmost
	// first: a shared closure laid out as the fixture's .git/objects
	// (fixture.SharedClosure.Layer), so that the objects are shown, not
	// copied. overlayfs writes none of them either.
	Below  []string
	Tracer ctoharness.Tracer
}

// Mount is a mounted overlay; Unmount detaches it.
type Mount struct {
	dir, upper, work string
	userXattr        bool
}

// Dir is the mount point.
func (m *Mount) Dir() string { return m.dir }

// Upper is the writable layer: everything written through the mount is
// there, so a reader that wants only what changed walks it (outside every
// view, and never written but by overlayfs). It stays valid after Unmount,
// until the layer is removed.
func (m *Mount) Upper() string { return m.upper }

// UserXattr reports whether the mount keeps its marks (opaque directories)
// in user.overlay.* xattrs (the userxattr option) rather than in
// trusted.overlay.*. Tree mounts without it: the harness mounts as the
// host's root, where trusted.* is the kernel's default.
func (m *Mount) UserXattr() bool { return m.userXattr }

// Unmount detaches the overlay (lazily: a process still inside it keeps
// only its own view). Calling it again, or on a nil Mount, does nothing.
func (m *Mount) Unmount() error {
	if m == nil || m.dir == "" {
		return nil
	}
	dir := m.dir
	m.dir = ""
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount the overlay %s: %w", dir, err)
	}
	return nil
}

// Discard gives the overlay up so that a copy can take its place: it
// detaches the mount and removes the mount point and both layers, leaving
// nothing behind, as when Tree returns ErrUnavailable.
func (m *Mount) Discard() error {
	dest, upper, work := m.dir, m.upper, m.work
	if err := m.Unmount(); err != nil {
		return err
	}
	for _, p := range []string{dest, upper, work} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove %s after giving up the overlay: %w", p, err)
		}
	}
	return nil
}

// Tree mounts the source HEAD tree at in.Dest (see the package comment). It
// returns an error wrapping ErrUnavailable, with nothing left behind, when
// the overlay cannot be made here; any other error is a failure to hide the
// source's untracked files. The layers are named to overlayfs by
// descriptor (/proc/self/fd/N), so the mount's options — which a process
// that can see the mount reads in /proc/self/mountinfo — name no host path.
func Tree(ctx context.Context, in Input) (*Mount, error) {
	src := filepath.Clean(in.Source)
	gitDir := in.GitDir
	if gitDir == "" {
		gitDir = filepath.Join(src, ".git")
	}
	tracked, err := trackedPaths(src, gitDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	cleanup, err := makeDirs(in)
	if err != nil {
		return nil, err
	}
	in.Tracer.Trace(ctoharness.TraceWalk, src)
	if err := hideUntracked(ctx, src, in.Upper, "", tracked); err != nil {
		cleanup()
		return nil, fmt.Errorf("hide the source's untracked files in the layer %s: %w", in.Upper, err)
	}
	return mount(src, in, cleanup)
}

// Lower mounts lower, a directory holding exactly the tree to show (package
// snapshot's copy of a commit, which only the harness writes), at in.Dest:
// nothing needs hiding, so nothing is walked. in.Source is lower; in.GitDir
// is not read. Errors are as Tree's.
func Lower(ctx context.Context, in Input) (*Mount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cleanup, err := makeDirs(in)
	if err != nil {
		return nil, err
	}
	return mount(filepath.Clean(in.Source), in, cleanup)
}

// makeDirs creates the mount point and both layers; cleanup removes them.
func makeDirs(in Input) (cleanup func(), err error) {
	cleanup = func() { os.RemoveAll(in.Upper); os.RemoveAll(in.Work); os.Remove(in.Dest) }
	for _, d := range []string{in.Dest, in.Upper, in.Work} {
		in.Tracer.Trace(ctoharness.TraceMkdir, d)
		if err := os.Mkdir(d, 0o755); err != nil {
			cleanup()
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	return cleanup, nil
}

// mount mounts the overlay of lower under in.Upper at in.Dest, whose
// directories exist; on failure cleanup removes them.
func mount(lower string, in Input, cleanup func()) (*Mount, error) {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	opt := func(key, dir string) (string, error) {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		fds = append(fds, fd)
		return key + "=/proc/self/fd/" + strconv.Itoa(fd), nil
	}
	var opts string
	for i, l := range [][2]string{{"lowerdir", lower}, {"upperdir", in.Upper}, {"workdir", in.Work}} {
		o, err := opt(l[0], l[1])
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("%w: open %s: %v", ErrUnavailable, l[1], err)
		}
		if i > 0 {
			opts += ","
		}
		opts += o
		for _, b := range in.Below {
			if i > 0 {
				break
			}
			o, err := opt("", b)
			if err != nil {
				cleanup()
				return nil, fmt.Errorf("%w: open %s: %v", ErrUnavailable, b, err)
			}
			opts += ":" + o[1:] // "=/proc/self/fd/N" without its "="
		}
	}
	// Nothing but whiteouts and opaque directories may describe the upper
	// layer, so that what changed can be read from it alone: redirects
	// (a renamed directory that still shows a lower one) and metacopy
	// (a chmod that copies up metadata and leaves the data below) are
	// off, whatever the kernel's defaults, and so is the inode index.
	// redirect_dir=nofollow, not off: where the kernel is built to always
	// follow redirects, "off" means "follow". A renamed directory is then
	// copied (rename fails with EXDEV, and mv and git fall back to a copy).
	opts += ",redirect_dir=nofollow,metacopy=off,index=off"
	in.Tracer.Trace(ctoharness.TraceWrite, in.Dest)
	// volatile: the layer is thrown away with the run's workspace, so
	// overlayfs need not sync the upper filesystem. Without it, the last
	// unmount syncs the whole host filesystem the layer is on (other runs'
	// writes included) and waits for the disk; fsync inside the mount
	// does the same. A kernel without the option (before 5.10) mounts
	// without it.
	err := unix.Mount("overlay", in.Dest, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts+",volatile")
	if errors.Is(err, unix.EINVAL) {
		err = unix.Mount("overlay", in.Dest, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts)
	}
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("%w: mount overlayfs at %s: %v", ErrUnavailable, in.Dest, err)
	}
	return &Mount{dir: in.Dest, upper: in.Upper, work: in.Work}, nil
}

// tracked is the source HEAD tree's paths: files (and links) and the
// directories holding them.
type tracked struct{ files, dirs map[string]bool }

// trackedPaths lists the source HEAD tree, read with go-git from the
// source's objects (nothing the source configures runs).
func trackedPaths(src, gitDir string) (tracked, error) {
	t := tracked{files: map[string]bool{}, dirs: map[string]bool{"": true}}
	r, err := gitstatus.Open(src, gitDir)
	if err != nil {
		return t, err
	}
	head, err := r.Head()
	if err != nil {
		return t, err
	}
	c, err := r.CommitObject(head.Hash())
	if err != nil {
		return t, err
	}
	tree, err := c.Tree()
	if err != nil {
		return t, err
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return t, err
		}
		if e.Mode == filemode.Dir {
			t.dirs[name] = true
			continue
		}
		if e.Mode == filemode.Submodule {
			// A submodule's files are written at its recorded commit,
			// which its worktree need not show.
			return t, fmt.Errorf("%s is a submodule", name)
		}
		t.files[name] = true
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			t.dirs[d] = true
		}
	}
}

// hideUntracked puts a whiteout in upper for every entry of src's directory
// rel that the tree does not hold: the source's .git, untracked and ignored
// files, and directories holding only those. It follows no symlink.
func hideUntracked(ctx context.Context, src, upper, rel string, t tracked) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ents, err := os.ReadDir(filepath.Join(src, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := e.Name()
		if rel != "" {
			p = rel + "/" + p
		}
		switch {
		case e.IsDir() && t.dirs[p]:
			if err := hideUntracked(ctx, src, upper, p, t); err != nil {
				return err
			}
		case t.files[p]:
		default:
			dir := filepath.Join(upper, filepath.FromSlash(path.Dir(p)))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			// A whiteout is a character device 0/0 (mknod allows it
			// without CAP_MKNOD since Linux 5.8).
			if err := unix.Mknod(filepath.Join(dir, e.Name()), unix.S_IFCHR|0o000, 0); err != nil {
				return fmt.Errorf("whiteout for %s: %w", p, err)
			}
		}
	}
	return nil
}
