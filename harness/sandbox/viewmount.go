package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// viewBases are where the new root's tmpfs is mounted before pivot_root; the
// first existing directory is used. It is a mount point in the launcher's
// own namespace only.
var viewBases = []string{"/tmp", "/mnt", "/var/tmp", "/media"}

// rootSize caps the new root's tmpfs, which holds only mount points and is
// read-only once the view is built.
const rootSize = "8m"

// emptyFile is the empty file masks of hidden files are bound from; it is
// removed again before the root becomes read-only.
const emptyFile = ".cto-harness-empty"

// buildView makes the planned mounts under a fresh tmpfs and pivots into it.
// Every bind source is cloned (open_tree) and made read-only, nosuid and
// nodev (mount_setattr, recursively) before anything is mounted, so a source
// under the base directory is cloned before the base is covered. The new
// root, /dev and every mask are remounted read-only at the end, the old root
// is detached, and the launcher moves to cwd inside the view.
func buildView(mounts []Mount, cwd string) (time.Duration, error) {
	start := time.Now()
	fds := map[string]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	// An overlay's directories are named to the kernel as /proc/self/fd
	// links, opened now: the new root's tmpfs may cover where they are.
	dirFDs := map[string]int{}
	defer func() {
		for _, fd := range dirFDs {
			unix.Close(fd)
		}
	}()
	for _, m := range mounts {
		if m.Kind != MountOverlay {
			continue
		}
		for _, d := range append([]string{m.Source, m.Upper, m.Work}, m.Lowers...) {
			if _, ok := dirFDs[d]; ok {
				continue
			}
			fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return 0, failf("view: cannot open %s for the overlay at %s: %v", d, m.Path, err)
			}
			dirFDs[d] = fd
		}
	}
	for _, m := range mounts {
		if m.Kind != MountBind && m.Kind != MountDevice {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return 0, failf("view: cannot clone %s for %s (open_tree, Linux 5.2+): %v", m.Source, m.Path, err)
		}
		fds[m.Path] = fd
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID}
		switch {
		case m.Kind == MountDevice:
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOEXEC // the device stays usable; its inode does not change
		case m.Writable:
			attr.Attr_set |= unix.MOUNT_ATTR_NODEV
		default:
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return 0, failf("view: cannot restrict the mount of %s (mount_setattr, Linux 5.12+): %v", m.Source, err)
		}
	}
	base := ""
	for _, b := range viewBases {
		if st, err := os.Lstat(b); err == nil && st.IsDir() {
			base = b
			break
		}
	}
	if base == "" {
		return 0, failf("view: no directory to build the new root on (tried %v)", viewBases)
	}
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size="+rootSize); err != nil {
		return 0, failf("view: cannot mount the new root's tmpfs on %s: %v", base, err)
	}
	type ro struct {
		path  string
		flags uintptr
	}
	readOnly := []ro{{base, unix.MS_NOSUID | unix.MS_NODEV}}
	haveEmpty := false
	for _, m := range mounts {
		if m.Path == "/" {
			continue
		}
		t := base + m.Path
		switch m.Kind {
		case MountBind, MountDevice:
			if err := mountPoint(t, m.File); err != nil {
				return 0, failf("view: no mount point for %s: %v", m.Path, err)
			}
			if err := unix.MoveMount(fds[m.Path], "", unix.AT_FDCWD, t, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return 0, failf("view: cannot mount %s at %s: %v", m.Source, m.Path, err)
			}
		case MountTmpfs:
			flags, opts := uintptr(unix.MS_NOSUID|unix.MS_NODEV), "mode=0755,size="+rootSize
			switch m.Path {
			case "/tmp":
				opts = "mode=1777,size=" + tmpSize
			case "/dev/shm":
				opts = "mode=1777,size=" + shmSize
			case "/dev":
				flags |= unix.MS_NOEXEC
			}
			if err := mountPoint(t, false); err != nil {
				return 0, failf("view: no mount point for %s: %v", m.Path, err)
			}
			if err := unix.Mount("tmpfs", t, "tmpfs", flags, opts); err != nil {
				return 0, failf("view: cannot mount a tmpfs at %s: %v", m.Path, err)
			}
			if !m.Writable {
				readOnly = append(readOnly, ro{t, flags})
			}
		case MountOverlay:
			if err := mountPoint(t, false); err != nil {
				return 0, failf("view: no mount point for %s: %v", m.Path, err)
			}
			fdPath := func(d string) string { return "/proc/self/fd/" + strconv.Itoa(dirFDs[d]) }
			lower := fdPath(m.Source)
			for i := len(m.Lowers) - 1; i >= 0; i-- {
				lower = fdPath(m.Lowers[i]) + ":" + lower // the leftmost layer is the top
			}
			opts := "lowerdir=" + lower + ",upperdir=" + fdPath(m.Upper) + ",workdir=" + fdPath(m.Work)
			flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
			if err := unix.Mount("overlay", t, "overlay", flags, opts); err != nil {
				// Older kernels want the user.* xattrs named in a user namespace.
				if err2 := unix.Mount("overlay", t, "overlay", flags, opts+",userxattr"); err2 != nil {
					return 0, failf("view: cannot mount the overlay of %s at %s (overlayfs in a user namespace, Linux 5.11+): %v", m.Source, m.Path, err)
				}
			}
		case MountProc:
			if err := mountPoint(t, false); err != nil {
				return 0, failf("view: no mount point for /proc: %v", err)
			}
			if err := unix.Mount("proc", t, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
				return 0, failf("view: cannot mount /proc: %v", err)
			}
		case MountSymlink:
			if err := os.MkdirAll(filepath.Dir(t), 0o755); err != nil {
				return 0, failf("view: cannot create %s: %v", filepath.Dir(m.Path), err)
			}
			if err := os.Symlink(m.Source, t); err != nil {
				return 0, failf("view: cannot create the symlink %s: %v", m.Path, err)
			}
		case MountMask:
			flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
			if err := mountPoint(t, m.File); err != nil {
				return 0, failf("view: no mount point to hide %s: %v", m.Path, err)
			}
			if m.File {
				if !haveEmpty {
					if err := os.WriteFile(filepath.Join(base, emptyFile), nil, 0o444); err != nil {
						return 0, failf("view: cannot create the empty file for masks: %v", err)
					}
					haveEmpty = true
				}
				if err := unix.Mount(filepath.Join(base, emptyFile), t, "", unix.MS_BIND, ""); err != nil {
					return 0, failf("view: cannot hide %s: %v", m.Path, err)
				}
			} else if err := unix.Mount("tmpfs", t, "tmpfs", flags, "mode=0555,size=4k"); err != nil {
				return 0, failf("view: cannot hide %s: %v", m.Path, err)
			}
			readOnly = append(readOnly, ro{t, flags})
		default:
			return 0, failf("view: unknown mount kind %q at %s", m.Kind, m.Path)
		}
	}
	if haveEmpty {
		if err := os.Remove(filepath.Join(base, emptyFile)); err != nil {
			return 0, failf("view: cannot remove the mask source: %v", err)
		}
	}
	for i := len(readOnly) - 1; i >= 0; i-- {
		r := readOnly[i]
		if err := unix.Mount("", r.path, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|r.flags, ""); err != nil {
			return 0, failf("view: cannot make %s read-only: %v", r.path, err)
		}
	}
	if err := os.Chdir(base); err != nil {
		return 0, failf("view: %v", err)
	}
	// pivot_root(".", ".") stacks the old root on the new one; detaching it
	// leaves only the view.
	if err := unix.PivotRoot(".", "."); err != nil {
		return 0, failf("view: pivot_root: %v", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return 0, failf("view: cannot detach the host's root: %v", err)
	}
	if err := os.Chdir("/"); err != nil {
		return 0, failf("view: %v", err)
	}
	if cwd != "" {
		if err := os.Chdir(cwd); err != nil {
			return 0, failf("view: the working directory %s is not in the view: %v", cwd, err)
		}
	}
	return time.Since(start), nil
}

// mountPoint makes sure t exists as a directory (or, for file mounts, as a
// file), creating it in the view's own tmpfs where needed.
func mountPoint(t string, file bool) error {
	st, err := os.Lstat(t)
	if err == nil {
		if st.IsDir() == !file {
			return nil
		}
		return &fs.PathError{Op: "mount point", Path: t, Err: errors.New("exists with another file type")}
	}
	if !file {
		return os.MkdirAll(t, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(t), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(t, os.O_CREATE|os.O_WRONLY, 0o444)
	if err != nil {
		return err
	}
	return f.Close()
}

// applyView builds p's view, when it has one, and records it. It runs after
// the namespace checks and the private /proc, before anything that resolves
// paths for the command (pid_max, Landlock).
func applyView(p Policy, got *enforced) (bool, error) {
	if p.View == nil {
		return false, nil
	}
	mounts, err := p.View.Plan(p.Writable)
	if err != nil {
		return false, failf("%v", err)
	}
	if d := Digest(mounts); p.View.Expect != "" && d != p.View.Expect {
		return false, failf("view: the planned view (%s) is not the one that was tried and recorded (%s); the host changed in between", d, p.View.Expect)
	}
	cwd := p.View.Cwd
	if cwd == "" {
		if wd, err := os.Getwd(); err == nil {
			cwd = wd
		}
	}
	took, err := buildView(mounts, cwd)
	if err != nil {
		return false, err
	}
	got.View = mounts
	got.ViewBuildNs = took.Nanoseconds()
	got.PrivateShm = true
	// Landlock names the writable directories by their paths in the view.
	for i, w := range got.Writable {
		got.Writable[i] = MovedTo(p.View.Moved, w)
	}
	got.Writable = append(got.Writable, "/dev/shm", "/tmp")
	for _, m := range mounts {
		if m.Kind == MountOverlay {
			got.Writable = append(got.Writable, m.Path) // its writes go to the per-run layer
		}
	}
	got.Mechanisms = append(got.Mechanisms, "fs_view")
	return true, nil
}
