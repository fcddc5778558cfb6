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
	"iter"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
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
	return manifestDigest(func(yield func(*ctoharness.ManifestEntry) bool) {
		for i := range entries {
			if !yield(&entries[i]) {
				return
			}
		}
	})
}

// PackedDigest is ManifestDigest of a packed manifest's entries.
func PackedDigest(p *ctoharness.PackedManifest) string {
	return manifestDigest(func(yield func(*ctoharness.ManifestEntry) bool) {
		for e := range p.All() {
			if !yield(&e) {
				return
			}
		}
	})
}

func manifestDigest(entries iter.Seq[*ctoharness.ManifestEntry]) string {
	h := sha256.New()
	buf := make([]byte, 0, 512)
	buf = append(buf, manifestHeader...)
	for e := range entries {
		buf = append(buf, e.Path...)
		buf = append(buf, 0)
		buf = append(buf, e.Type.String()...)
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
		buf = append(buf, e.Target()...)
		buf = append(buf, 0)
		buf = append(buf, e.SHA256()...)
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
// ctime), and because it emits entries directly in bytewise path order, so
// no sort of the whole manifest is needed: within a directory, each child
// is placed at its name and its subtree at name+"/" (git's tree order),
// which orders full paths bytewise. It never follows symlinks: directories
// are opened with O_NOFOLLOW and only descended into when lstat says they
// are directories. Every entry is reached through its directory's
// descriptor (fstatat, openat, readlinkat), never by its full path, which
// in a deep tree can exceed PATH_MAX where the path git uses (relative to
// the worktree) does not.
//
// The walk is syscall-bound, so a walker hands shallow subtrees to another
// goroutine whenever one of GOMAXPROCS-1 slots is free; the subtree's
// output is spliced back at the place it would have had, so the result is
// identical to a sequential walk.
type walker struct {
	*walk
	parts  []part                     // finished output, in order
	cur    []ctoharness.ManifestEntry // output since the last split
	dirent []byte
	h      hash.Hash
	buf    []byte
	sum    []byte
	seen   int
}

// walk is what the walkers of one manifest share.
type walk struct {
	ctx   context.Context
	deep  bool
	pack  bool          // parts are packed as they are set aside (ManifestPacked)
	slots chan struct{} // a token per extra goroutine allowed
	aside atomic.Int64  // entries set aside so far, by every walker
	// packBeyond is how many entries are set aside as structs before the
	// rest are packed (packBeyond, the constant; 0 packs every part).
	packBeyond int64
}

// packBeyond is how many entries a walk holds as structs before it packs
// the parts it sets aside, even for a manifest returned as structs: a
// million-entry walk then holds its output packed, about 29 bytes an
// entry, while flatten builds the slice, instead of twice as structs. A
// tree the size of Go's (13k entries) never packs.
const packBeyond = 1 << 17

// part is a run of entries or a subtree walked by another goroutine.
type part struct {
	entries []ctoharness.ManifestEntry
	packed  *ctoharness.PackedManifest
	sub     *subtree
}

type subtree struct {
	done  chan struct{}
	parts []part
	err   error
}

// forkDepth bounds how deep subtrees are handed to other goroutines; below
// it, splitting would cost more than it saves.
const forkDepth = 3

func (wk *walk) newWalker() *walker {
	w := &walker{walk: wk, dirent: make([]byte, 32<<10)}
	if wk.deep {
		w.h = sha256.New()
		w.buf = make([]byte, 64<<10)
		w.sum = make([]byte, 0, sha256.Size)
	}
	return w
}

// child is one directory entry, lstat'ed, waiting for its turn in order.
type child struct {
	name string
	st   unix.Stat_t
}

// slot is a position in a directory's output: a child itself, or its
// subtree (descend). Index -1 is the walk root itself, named ".".
type slot struct {
	i       int32
	descend bool
}

// Manifest lstats every entry under root, root included (as "."), without
// following symlinks, and returns them sorted bytewise by path: the listing
// a source proof records, and the one package gitstatus computes a status
// from. It is exported so that the fixture, which needs the same listing
// for its clean proofs, walks the same way.
func Manifest(ctx context.Context, root string) ([]ctoharness.ManifestEntry, error) {
	return walkManifest(ctx, root, false)
}

// walkManifest lstats every entry under root, root included, and returns
// them sorted bytewise by path. With deep, regular files are hashed too.
func walkManifest(ctx context.Context, root string, deep bool) ([]ctoharness.ManifestEntry, error) {
	return walkStructs(ctx, &walk{ctx: ctx, deep: deep, packBeyond: packBeyond}, root)
}

func walkStructs(ctx context.Context, wk *walk, root string) ([]ctoharness.ManifestEntry, error) {
	parts, n, err := walkParts(ctx, root, wk)
	if err != nil {
		return nil, err
	}
	out := make([]ctoharness.ManifestEntry, 0, n)
	return flatten(out, parts), nil
}

// ManifestPacked is Manifest packed (ctoharness.PackedManifest): the walk
// packs its entries chunk by chunk as it goes, so a tree of a million
// entries is never held as structs, only as the few tens of MB the packed
// bytes take. For listings that are checked and kept, not searched.
func ManifestPacked(ctx context.Context, root string) (*ctoharness.PackedManifest, error) {
	parts, _, err := walkParts(ctx, root, &walk{ctx: ctx, pack: true})
	if err != nil {
		return nil, err
	}
	var packed []*ctoharness.PackedManifest
	var collect func([]part)
	collect = func(parts []part) {
		for _, p := range parts {
			if p.packed != nil {
				packed = append(packed, p.packed)
			}
			if p.sub != nil {
				collect(p.sub.parts)
			}
		}
	}
	collect(parts)
	return ctoharness.JoinPacked(packed), nil
}

// walkParts walks root with wk's options and returns its output as parts
// in order, every subtree settled, and the number of entries.
func walkParts(ctx context.Context, root string, wk *walk) ([]part, int, error) {
	wk.slots = make(chan struct{}, max(runtime.GOMAXPROCS(0)-1, 0))
	w := wk.newWalker()
	var st unix.Stat_t
	if err := lstatAt(unix.AT_FDCWD, root, &st); err != nil {
		return nil, 0, fmt.Errorf("lstat %s: %w", root, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, 0, fmt.Errorf("%s is no longer a directory (%v)", root, fileMode(uint32(st.Mode)))
	}
	fd, err := openDir(unix.AT_FDCWD, root)
	if err != nil {
		return nil, 0, fmt.Errorf("open directory %s: %w", root, err)
	}
	err = w.dir(fd, root, "", &st, 0)
	w.setAside()
	// Always wait for every subtree, even after an error, so no goroutine
	// is still reading the source when this returns.
	n, werr := settle(w.parts)
	if err == nil {
		err = werr
	}
	if err != nil {
		return nil, 0, err
	}
	return w.parts, n, nil
}

// settle waits for every subtree and returns the entry count and the first
// error in walk order.
func settle(parts []part) (int, error) {
	n := 0
	var first error
	for _, p := range parts {
		n += len(p.entries) + p.packed.Len()
		if p.sub == nil {
			continue
		}
		<-p.sub.done
		m, err := settle(p.sub.parts)
		n += m
		if first == nil {
			first = p.sub.err
		}
		if first == nil {
			first = err
		}
	}
	return n, first
}

// flatten appends the parts' entries to out in order, letting each part go
// once copied, so that the walk's output and the manifest are held at once
// only part by part.
func flatten(out []ctoharness.ManifestEntry, parts []part) []ctoharness.ManifestEntry {
	for i := range parts {
		out = append(out, parts[i].entries...)
		parts[i].entries = nil
		out = parts[i].packed.AppendTo(out)
		parts[i].packed = nil
		if sub := parts[i].sub; sub != nil {
			out = flatten(out, sub.parts)
			sub.parts = nil
		}
	}
	return out
}

// manifestChunk is how many entries a walker gathers before it sets them
// aside as a part: a manifest of a million entries is then grown in
// chunks, not by doubling one slice (twice its size at the last copy).
const manifestChunk = 8192

// fork walks the directory fd (named abs) on another goroutine if a slot
// is free, leaving a placeholder for its output; it reports whether it
// did, and the goroutine then owns fd.
func (w *walker) fork(fd int, abs, rel string, depth int) bool {
	select {
	case w.slots <- struct{}{}:
	default:
		return false
	}
	sub := &subtree{done: make(chan struct{})}
	w.setAside()
	w.parts = append(w.parts, part{sub: sub})
	go func() {
		defer close(sub.done)
		defer func() { <-w.slots }()
		cw := w.newWalker()
		sub.err = cw.dir(fd, abs, rel, nil, depth)
		cw.setAside()
		sub.parts = cw.parts
	}()
	return true
}

// dir emits the entries under the directory fd, which it closes; abs is
// its path, for messages only. rootSt is the root's own lstat when abs is
// the walk root (its "." entry sorts among the children), nil otherwise.
func (w *walker) dir(fd int, abs, rel string, rootSt *unix.Stat_t, depth int) error {
	defer unix.Close(fd)
	names, err := w.readNames(fd, abs)
	if err != nil {
		return err
	}
	kids := make([]child, len(names))
	slots := make([]slot, 0, len(names)+len(names)/4+1)
	if rootSt != nil {
		slots = append(slots, slot{i: -1})
	}
	for i, name := range names {
		w.seen++
		if w.seen&1023 == 0 {
			if err := w.ctx.Err(); err != nil {
				return err
			}
		}
		k := &kids[i]
		k.name = name
		if err := lstatAt(fd, name, &k.st); err != nil {
			return fmt.Errorf("lstat %s/%s: %w", abs, name, err)
		}
		slots = append(slots, slot{i: int32(i)})
		if k.st.Mode&unix.S_IFMT == unix.S_IFDIR {
			slots = append(slots, slot{i: int32(i), descend: true})
		}
	}
	name := func(s slot) string {
		if s.i < 0 {
			return "."
		}
		return kids[s.i].name
	}
	slices.SortFunc(slots, func(a, b slot) int { return gitstatus.TreeOrder(name(a), a.descend, name(b), b.descend) })
	for _, s := range slots {
		if s.i < 0 {
			if err := w.add(".", abs, -1, "", rootSt); err != nil {
				return err
			}
			continue
		}
		k := &kids[s.i]
		childRel := k.name
		if rel != "" {
			childRel = rel + "/" + k.name
		}
		childAbs := abs + "/" + k.name
		if !s.descend {
			if err := w.add(childRel, childAbs, fd, k.name, &k.st); err != nil {
				return err
			}
			continue
		}
		sub, err := openDir(fd, k.name)
		if err != nil {
			return fmt.Errorf("open directory %s: %w", childAbs, err)
		}
		if depth < forkDepth && w.fork(sub, childAbs, childRel, depth+1) {
			continue
		}
		if err := w.dir(sub, childAbs, childRel, nil, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// readNames lists the directory fd (named abs) with raw getdents calls:
// os.File would add a poller registration attempt and a sorted copy per
// directory.
func (w *walker) readNames(fd int, abs string) ([]string, error) {
	var names []string
	for {
		n, err := unix.ReadDirent(fd, w.dirent)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read directory %s: %w", abs, err)
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(w.dirent[:n], -1, names)
	}
}

// openAt is openat retried on EINTR.
func openAt(dir int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// openDir opens the directory name in dir for listing, never through a
// symlink.
func openDir(dir int, name string) (int, error) {
	return openAt(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
}

// add emits the entry name of the directory dir (rel below the root, abs
// for messages).
func (w *walker) add(rel, abs string, dir int, name string, st *unix.Stat_t) error {
	e, err := entryOf(rel, abs, dir, name, st)
	if err != nil {
		return err
	}
	if e.Type == ctoharness.EntryFile && w.deep {
		sum, err := w.hashFile(dir, name, abs)
		if err != nil {
			return err
		}
		e.SetSHA256(sum)
	}
	w.cur = append(w.cur, e)
	if len(w.cur) >= manifestChunk {
		w.setAside()
	}
	return nil
}

// setAside ends the current run of entries as a part: packed when the walk
// packs or is past packBeyond (the run's slice is then used again), else
// as it is.
func (w *walker) setAside() {
	if !w.pack && w.aside.Add(int64(len(w.cur))) <= w.packBeyond {
		w.parts = append(w.parts, part{entries: w.cur})
		w.cur = nil
		return
	}
	if len(w.cur) > 0 {
		w.parts = append(w.parts, part{packed: ctoharness.PackManifest(w.cur)})
		clear(w.cur) // its strings are in the packed bytes now
		w.cur = w.cur[:0]
	}
}

// entryOf is the entry of name in dir from its lstat, a symlink's target
// read.
func entryOf(rel, abs string, dir int, name string, st *unix.Stat_t) (ctoharness.ManifestEntry, error) {
	mt, ct := st.Mtim.Nano(), st.Ctim.Nano()
	e := ctoharness.ManifestEntry{
		Path:    rel,
		Mode:    uint32(fileMode(uint32(st.Mode))),
		Size:    st.Size,
		MtimeNs: mt,
		CtimeNs: ct,
		Inode:   uint64(st.Ino),
		Dev:     uint64(st.Dev),
		UID:     st.Uid,
		GID:     st.Gid,
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = ctoharness.EntryFile
	case unix.S_IFDIR:
		e.Type = ctoharness.EntryDir
	case unix.S_IFLNK:
		e.Type = ctoharness.EntrySymlink
		target, err := readlinkAt(dir, name)
		if err != nil {
			return e, fmt.Errorf("readlink %s: %w", abs, err)
		}
		e.SetTarget(target)
	default:
		e.Type = ctoharness.EntryOther
	}
	return e, nil
}

// EntryAt is the entry Manifest would list at rel for name in the
// directory dir (lstat, never following a link; abs names it in
// messages), so that a reader listing only part of a tree — the fixture's
// collect, from an overlay's upper layer — records exactly what a whole
// walk would. ok is false when name does not exist.
func EntryAt(dir int, name, rel, abs string) (e ctoharness.ManifestEntry, ok bool, err error) {
	var st unix.Stat_t
	if err := lstatAt(dir, name, &st); errors.Is(err, unix.ENOENT) {
		return e, false, nil
	} else if err != nil {
		return e, false, fmt.Errorf("lstat %s: %w", abs, err)
	}
	e, err = entryOf(rel, abs, dir, name, &st)
	return e, err == nil, err
}

// hashFile hashes a regular file with one reused buffer and hasher; the
// explicit read loop avoids io.Copy, which allocates a buffer per call for
// an *os.File source.
func (w *walker) hashFile(dir int, name, abs string) (string, error) {
	// O_NONBLOCK: if the file was swapped for a FIFO since lstat, open must not hang.
	fd, err := openAt(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", abs, err)
	}
	f := os.NewFile(uintptr(fd), abs)
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

// lstatAt is fstatat without following a symlink, retried on EINTR, so a
// signal does not fail a proof.
func lstatAt(dir int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dir, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// readlinkAt is readlinkat with a buffer grown until the target fits.
func readlinkAt(dir int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(dir, name, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		if m < n {
			return string(buf[:m]), nil
		}
	}
}

// fileMode converts a raw st_mode to fs.FileMode the way package os does,
// so manifests agree with os.Lstat.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
