package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
)

// manifestHeader versions the canonical serialization hashed by ManifestDigest.
const manifestHeader = "cto-harness-manifest-v1\n"

// ManifestDigest returns the sha256 (lowercase hex) of the canonical
// serialization of entries, in the order given (Prove sorts them by path
// bytewise). The serialization is the header line
// "cto-harness-manifest-v1\n" followed, for each entry, by the nine fields
//
//	path, type, mode, size, mtime_ns, ctime_ns, inode, target, sha256
//
// each written as text and terminated by a single NUL byte. Integers are
// base 10 (mode is the uint32 value of the fs.FileMode); empty target and
// sha256 are written as empty strings. No field can contain NUL (paths and
// symlink targets cannot), so the encoding is unambiguous and a validator can
// recompute the digest from the entries alone.
func ManifestDigest(entries []ctoharness.ManifestEntry) string {
	h := sha256.New()
	buf := make([]byte, 0, 512)
	buf = append(buf, manifestHeader...)
	for i := range entries {
		e := &entries[i]
		buf = append(buf, e.Path...)
		buf = append(buf, 0)
		buf = append(buf, e.Type...)
		buf = append(buf, 0)
		buf = strconv.AppendUint(buf, uint64(e.Mode), 10)
		buf = append(buf, 0)
		buf = strconv.AppendInt(buf, e.Size, 10)
		buf = append(buf, 0)
		buf = strconv.AppendInt(buf, e.MtimeNs, 10)
		buf = append(buf, 0)
		buf = strconv.AppendInt(buf, e.CtimeNs, 10)
		buf = append(buf, 0)
		buf = strconv.AppendUint(buf, e.Inode, 10)
		buf = append(buf, 0)
		buf = append(buf, e.Target...)
		buf = append(buf, 0)
		buf = append(buf, e.SHA256...)
		buf = append(buf, 0)
		if len(buf) >= 32<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

// walker builds the manifest. It is a hand-rolled lstat walk rather than
// filepath.WalkDir because every entry needs a full lstat anyway (inode,
// ctime), and WalkDir would add a sorted DirEntry slice per directory on
// top. It never follows symlinks: directories are opened with O_NOFOLLOW
// and only descended into when lstat says they are directories.
type walker struct {
	ctx     context.Context
	root    string
	deep    bool
	entries []ctoharness.ManifestEntry
	h       hash.Hash
	buf     []byte
	sum     []byte
	seen    int
}

// walkManifest lstats every entry under root, root included, and returns
// them sorted by path. With deep, regular files are hashed too.
func walkManifest(ctx context.Context, root string, deep bool) ([]ctoharness.ManifestEntry, error) {
	w := &walker{ctx: ctx, root: root, deep: deep, entries: make([]ctoharness.ManifestEntry, 0, 4096)}
	if deep {
		w.h = sha256.New()
		w.buf = make([]byte, 64<<10)
		w.sum = make([]byte, 0, sha256.Size)
	}
	var st syscall.Stat_t
	if err := lstat(root, &st); err != nil {
		return nil, fmt.Errorf("lstat %s: %w", root, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("%s is no longer a directory (%v)", root, fileMode(uint32(st.Mode)))
	}
	if err := w.add(".", root, &st); err != nil {
		return nil, err
	}
	if err := w.dir(root, ""); err != nil {
		return nil, err
	}
	slices.SortFunc(w.entries, func(a, b ctoharness.ManifestEntry) int { return strings.Compare(a.Path, b.Path) })
	return w.entries, nil
}

func (w *walker) dir(abs, rel string) error {
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", abs, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("read directory %s: %w", abs, err)
	}
	var st syscall.Stat_t
	for _, name := range names {
		w.seen++
		if w.seen&1023 == 0 {
			if err := w.ctx.Err(); err != nil {
				return err
			}
		}
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		childAbs := abs + "/" + name
		if err := lstat(childAbs, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", childAbs, err)
		}
		if err := w.add(childRel, childAbs, &st); err != nil {
			return err
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			if err := w.dir(childAbs, childRel); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *walker) add(rel, abs string, st *syscall.Stat_t) error {
	mt, ct := statTimes(st)
	e := ctoharness.ManifestEntry{
		Path:    rel,
		Mode:    uint32(fileMode(uint32(st.Mode))),
		Size:    st.Size,
		MtimeNs: mt,
		CtimeNs: ct,
		Inode:   uint64(st.Ino),
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		e.Type = ctoharness.EntryFile
		if w.deep {
			sum, err := w.hashFile(abs)
			if err != nil {
				return err
			}
			e.SHA256 = sum
		}
	case syscall.S_IFDIR:
		e.Type = ctoharness.EntryDir
	case syscall.S_IFLNK:
		e.Type = ctoharness.EntrySymlink
		target, err := os.Readlink(abs)
		if err != nil {
			return fmt.Errorf("readlink %s: %w", abs, err)
		}
		e.Target = target
	default:
		e.Type = ctoharness.EntryOther
	}
	w.entries = append(w.entries, e)
	return nil
}

// hashFile hashes a regular file with one reused buffer and hasher; the
// explicit read loop avoids io.Copy, which allocates a buffer per call for
// an *os.File source.
func (w *walker) hashFile(abs string) (string, error) {
	// O_NONBLOCK: if the file was swapped for a FIFO since lstat, open must not hang.
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", abs, err)
	}
	defer f.Close()
	w.h.Reset()
	for {
		n, err := f.Read(w.buf)
		w.h.Write(w.buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", abs, err)
		}
	}
	return hex.EncodeToString(w.h.Sum(w.sum[:0])), nil
}

// lstat is syscall.Lstat retried on EINTR, so a signal does not fail a proof.
func lstat(p string, st *syscall.Stat_t) error {
	for {
		err := syscall.Lstat(p, st)
		if err != syscall.EINTR {
			return err
		}
	}
}

// fileMode converts a raw st_mode to fs.FileMode the way package os does,
// so manifests agree with os.Lstat.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
