package gitstatus

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	ctoharness "github.com/cto-harness/cto-harness"
)

// errIndexFeature marks an index that uses a format version or a required
// extension the decoder does not know, as opposed to a damaged one.
var errIndexFeature = errors.New("unknown index feature")

// ErrFallback means the fast status does not model something in this
// repository (submodules, conflicts, sparse or split index, ...); callers
// then use go-git's Worktree.Status, which is slower but complete.
var ErrFallback = errors.New("fast status does not cover this repository")

func fallback(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFallback, fmt.Sprintf(format, args...))
}

// Entry is one stage-0 entry of a git index: its blob and the stat data
// git caches for it. Its fields are in an order that leaves no padding:
// 80 bytes, not 88, an entry (a million-entry index is held whole while a
// status is computed).
type Entry struct {
	Name string
	Hash plumbing.Hash
	Mode filemode.FileMode
	Size uint32
	Dev  uint32
	Ino  uint32
	UID  uint32
	GID  uint32
	// Stage is 0, or 1-3 for the sides of an unmerged path.
	Stage uint8
	// AssumeValid (assume-unchanged), SkipWorktree and IntentToAdd are the
	// entry's flags.
	AssumeValid, SkipWorktree, IntentToAdd bool

	MtimeNs int64 // 0 when the index recorded none
	CtimeNs int64
}

// Index is a parsed .git/index and the index file's own mtime, which the
// racy-git check compares file mtimes against.
type Index struct {
	Entries []Entry
	ModTime time.Time
}

// Fresh reports whether e's cached stat data still describes the worktree
// file f, so that e.Hash may stand for f's content without reading it:
// size, mtime and mode equal, and the file older than the index (a file
// modified in the index's own clock tick is "racy" and must be hashed), as
// go-git checks, and also ctime, inode, device and owner equal, as git
// checks, so that a same-size rewrite with a restored mtime is hashed.
func (idx *Index) Fresh(e *Entry, f *ctoharness.ManifestEntry) bool {
	mode, err := filemode.NewFromOSFileMode(fs.FileMode(f.Mode))
	return err == nil && e.MtimeNs != 0 && uint32(f.Size) == e.Size && f.MtimeNs == e.MtimeNs && mode == e.Mode &&
		!idx.ModTime.IsZero() && f.MtimeNs < idx.ModTime.UnixNano() &&
		e.CtimeNs == f.CtimeNs && e.Ino == uint32(f.Inode) && e.Dev == uint32(f.Dev) && e.UID == f.UID && e.GID == f.GID
}

// ReadIndex reads and parses gitDir/index. It is a small parser of its own
// because go-git's decoder costs about 25 ms per 15k entries (it decodes
// field by field through reflection), which alone would use up most of the
// time budget of a proof. It returns ErrFallback for anything it does not
// model (and for a missing index), so correctness never depends on it
// covering every index feature.
func ReadIndex(gitDir string) (*Index, error) {
	f, fi, err := openIndex(gitDir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := parseIndex(f, fi.Size())
	if err != nil {
		return nil, err
	}
	return &Index{Entries: entries, ModTime: fi.ModTime()}, nil
}

// IndexTreeHash is TreeHash of the entries ReadIndex would return,
// computed as the index is read: a million-entry index is hashed without
// holding its entries. It refuses (ErrFallback) what ReadIndex refuses.
func IndexTreeHash(gitDir string) (plumbing.Hash, error) {
	f, fi, err := openIndex(gitDir)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer f.Close()
	return indexTreeHash(f, fi.Size())
}

// indexTreeHash is parseIndex's entries' TreeHash, hashed as decoded.
func indexTreeHash(r io.Reader, size int64) (plumbing.Hash, error) {
	var t treeHasher
	prev, first := "", true
	file, err := decodeIndexFrom(r, size, decoding{each: func(e *Entry) error {
		if err := plainEntry(e, prev, first); err != nil {
			return err
		}
		t.add(e.Name, e.Mode, e.Hash)
		prev, first = e.Name, false
		return nil
	}})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := plainExtensions(file); err != nil {
		return plumbing.ZeroHash, err
	}
	return t.sum(), nil
}

// openIndex opens gitDir's index file for reading. O_NOFOLLOW and
// O_NONBLOCK: a symlink or a named pipe in place of the index is not read
// here (a pipe would block the open).
func openIndex(gitDir string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(gitDir+"/index", os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil, fallback("no index file")
		}
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fallback("index is a symlink")
		}
		return nil, nil, fmt.Errorf("open index: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat index: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fallback("index is a %v, not a file", fi.Mode().Type())
	}
	return f, fi, nil
}

// Index entry layout (git's Documentation/gitformat-index.txt).
const (
	entryHeader      = 62 // ctime, mtime, dev, ino, mode, uid, gid, size, sha1, flags
	flagAssumeValid  = 0x8000
	flagExtended     = 0x4000
	flagStageMask    = 0x3000
	flagNameMask     = 0x0fff
	extSkipWorktree  = 0x4000
	extIntentToAdd   = 0x2000
	modeTypeMask     = 0o170000
	modeGitlink      = 0o160000
	modeDir          = 0o040000
	indexTrailerSize = sha1.Size
)

// parseIndex decodes index versions 2, 3 and 4 with SHA-1 object names,
// for the callers that model only plain stage-0 entries: anything else
// (conflicts, gitlinks, sparse directories, skip-worktree or intent-to-add
// entries, a split index, unknown required extensions) is ErrFallback.
func parseIndex(r io.Reader, size int64) ([]Entry, error) {
	f, err := decodeIndexFrom(r, size, decoding{})
	if err != nil {
		return nil, err
	}
	if err := plainExtensions(f); err != nil {
		return nil, err
	}
	for i := range f.entries {
		prev := ""
		if i > 0 {
			prev = f.entries[i-1].Name
		}
		if err := plainEntry(&f.entries[i], prev, i == 0); err != nil {
			return nil, err
		}
	}
	return f.entries, nil
}

// plainExtensions refuses the extensions parseIndex does not model.
func plainExtensions(f *indexFile) error {
	if f.link != nil {
		return fallback("index extension \"link\"")
	}
	if f.sparse {
		return fallback("index extension \"sdir\"")
	}
	return nil
}

// plainEntry refuses an entry parseIndex does not model, or one not after
// prev (the entry before it, unless first) in index order.
func plainEntry(e *Entry, prev string, first bool) error {
	switch {
	case e.Name == "":
		return fallback("index entry with an empty name")
	case e.Stage != 0:
		return fallback("index has unmerged entries")
	case e.Mode&modeTypeMask == modeGitlink:
		return fallback("index has a submodule")
	case e.Mode&modeTypeMask == modeDir:
		return fallback("index is sparse")
	case e.SkipWorktree || e.IntentToAdd:
		return fallback("index has skip-worktree or intent-to-add entries")
	case !first && prev >= e.Name:
		return fallback("index entries out of order")
	}
	return nil
}

// indexFile is a decoded index file before a split index is merged.
type indexFile struct {
	entries []Entry
	link    *splitLink // the "link" extension of a split index
	sparse  bool       // the "sdir" extension: directory entries present
}

// splitLink is a split index's reference to its shared index and the
// positions in it that the split index deletes or replaces.
type splitLink struct {
	shared           plumbing.Hash
	delete, replaced []int
}

// decodeIndex decodes every entry (all stages and flags) and the
// extensions that change what the entries mean, of an index held in
// memory (decodeIndexFrom). Names may be empty only in a split index
// (replacement entries).
func decodeIndex(data []byte) (*indexFile, error) {
	return decodeIndexFrom(bytes.NewReader(data), int64(len(data)), decoding{})
}

// indexBuffer is how much of an index file is held at once while it is
// decoded: a name or an extension's piece must fit in it.
const indexBuffer = 64 << 10

// decoding says what becomes of the entries an index is decoded into.
type decoding struct {
	// each, when set, is handed the entries one at a time in one reused
	// Entry instead of their being kept (an error from it ends the
	// decoding); what it makes of them must not be used unless the
	// decoding succeeds.
	each func(*Entry) error
	// name, when set, makes an entry's name string from its bytes (valid
	// only during the call), so that a caller holding the same paths can
	// hand out its own; nil makes a string of each.
	name func([]byte) string
}

// decodeIndexFrom decodes an index file of size bytes read from r, as it
// is read: a million-entry index is never held as bytes beside its
// entries. The body's checksum is computed as it goes and compared with
// the trailer at the end; nothing decoded is returned before that.
func decodeIndexFrom(r io.Reader, size int64, d decoding) (*indexFile, error) {
	if size < 12+indexTrailerSize {
		return nil, fallback("index has no DIRC header")
	}
	in := &indexReader{r: bufio.NewReaderSize(r, indexBuffer), h: sha1.New(), left: size - indexTrailerSize, name: d.name}
	f, err := in.decode(d.each)
	if in.ioErr != nil {
		return nil, fmt.Errorf("read index: %w", in.ioErr)
	}
	if err != nil {
		return nil, err
	}
	trailer := make([]byte, indexTrailerSize)
	if _, err := io.ReadFull(in.r, trailer); err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	// index.skipHash writes a zero trailer.
	if sum := in.h.Sum(nil); !bytes.Equal(sum, trailer) && !bytes.Equal(trailer, make([]byte, indexTrailerSize)) {
		return nil, fallback("index checksum mismatch")
	}
	return f, nil
}

// indexReader hands out an index file's body in order, hashing what it
// consumes; left is how much of the body is still to come.
type indexReader struct {
	r     *bufio.Reader
	h     hash.Hash
	left  int64
	ioErr error               // the file could not be read (not a malformed index)
	name  func([]byte) string // decoding.name
}

func (in *indexReader) nameOf(b []byte) string {
	if in.name != nil {
		return in.name(b)
	}
	return string(b)
}

// peek is the next n bytes of the body, not consumed (nil when the body
// has fewer, or they cannot be held or read).
func (in *indexReader) peek(n int) []byte {
	if n < 0 || int64(n) > in.left || n > indexBuffer {
		return nil
	}
	b, err := in.r.Peek(n)
	if err != nil {
		if in.ioErr == nil && !errors.Is(err, bufio.ErrBufferFull) {
			in.ioErr = err
		}
		return nil
	}
	return b
}

// take is peek, consumed: valid until the next call.
func (in *indexReader) take(n int) []byte {
	b := in.peek(n)
	if b != nil {
		in.h.Write(b)
		in.r.Discard(n)
		in.left -= int64(n)
	}
	return b
}

// nul is the length of the body's bytes before its next NUL, within the
// buffer; -1 when there is none. What is already buffered is searched
// first: peeking the whole buffer for every name would slide and refill
// it once per entry.
func (in *indexReader) nul() int {
	limit := int(min(int64(indexBuffer), in.left))
	if n := min(in.r.Buffered(), limit); n > 0 {
		b, _ := in.r.Peek(n)
		if i := bytes.IndexByte(b, 0); i >= 0 {
			return i
		}
	}
	b, err := in.r.Peek(limit)
	if err != nil && len(b) < limit && in.ioErr == nil && !errors.Is(err, bufio.ErrBufferFull) {
		in.ioErr = err
	}
	return bytes.IndexByte(b, 0)
}

// skip consumes n bytes of the body, however many; false when the body
// has fewer.
func (in *indexReader) skip(n int64) bool {
	if n > in.left {
		return false
	}
	for n > 0 {
		k := int(min(n, indexBuffer))
		if in.take(k) == nil {
			return false
		}
		n -= int64(k)
	}
	return true
}

// whole consumes the next n bytes of the body into a buffer of their own.
func (in *indexReader) whole(n int64) ([]byte, bool) {
	if n > in.left {
		return nil, false
	}
	out := make([]byte, 0, n)
	for int64(len(out)) < n {
		k := int(min(n-int64(len(out)), indexBuffer))
		b := in.take(k)
		if b == nil {
			return nil, false
		}
		out = append(out, b...)
	}
	return out, true
}

// decode reads the header, the entries (kept, or handed to each) and the
// extensions.
func (in *indexReader) decode(each func(*Entry) error) (*indexFile, error) {
	hdr := in.take(12)
	if hdr == nil || string(hdr[:4]) != "DIRC" {
		return nil, fallback("index has no DIRC header")
	}
	version := binary.BigEndian.Uint32(hdr[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("%w: %w: index version %d", ErrFallback, errIndexFeature, version)
	}
	count := int(binary.BigEndian.Uint32(hdr[8:12]))
	if int64(count) > in.left/entryHeader {
		return nil, fallback("index entry count %d does not fit", count)
	}
	f := &indexFile{}
	if each == nil {
		f.entries = make([]Entry, count)
	}
	var prev []byte
	var one Entry
	for i := range count {
		e := &one
		if each == nil {
			e = &f.entries[i]
		} else {
			one = Entry{}
		}
		var err error
		if prev, err = in.entry(e, version, prev); err != nil {
			return nil, err
		}
		if each != nil {
			if err := each(e); err != nil {
				return nil, err
			}
		}
	}
	if err := in.extensions(f); err != nil {
		return nil, err
	}
	for i := range f.entries {
		if f.entries[i].Name == "" && f.link == nil {
			return nil, fallback("index entry with an empty name")
		}
	}
	return f, nil
}

// entry decodes one entry into e; prev is the previous entry's name (a
// version 4 name is written against it), and the returned slice e's.
func (in *indexReader) entry(e *Entry, version uint32, prev []byte) ([]byte, error) {
	h := in.take(entryHeader)
	if h == nil {
		return nil, fallback("index truncated")
	}
	e.CtimeNs = int64(binary.BigEndian.Uint32(h[0:4]))*1e9 + int64(binary.BigEndian.Uint32(h[4:8]))
	e.MtimeNs = int64(binary.BigEndian.Uint32(h[8:12]))*1e9 + int64(binary.BigEndian.Uint32(h[12:16]))
	e.Dev = binary.BigEndian.Uint32(h[16:20])
	e.Ino = binary.BigEndian.Uint32(h[20:24])
	mode := binary.BigEndian.Uint32(h[24:28])
	e.Mode = filemode.FileMode(mode)
	e.UID = binary.BigEndian.Uint32(h[28:32])
	e.GID = binary.BigEndian.Uint32(h[32:36])
	e.Size = binary.BigEndian.Uint32(h[36:40])
	copy(e.Hash[:], h[40:60])
	flags := binary.BigEndian.Uint16(h[60:62])
	read := entryHeader
	e.Stage = uint8((flags & flagStageMask) >> 12)
	e.AssumeValid = flags&flagAssumeValid != 0
	if flags&flagExtended != 0 {
		ext := in.take(2)
		if version < 3 || ext == nil {
			return nil, fallback("bad extended index flags")
		}
		x := binary.BigEndian.Uint16(ext)
		read += 2
		e.SkipWorktree = x&extSkipWorktree != 0
		e.IntentToAdd = x&extIntentToAdd != 0
	}
	if version == 4 {
		b := in.peek(int(min(10, in.left)))
		strip, n := varint(b)
		if n == 0 || strip > uint64(len(prev)) {
			return nil, fallback("bad v4 name prefix")
		}
		in.take(n)
		end := in.nul()
		if end < 0 {
			return nil, fallback("unterminated index name")
		}
		name := append(prev[:len(prev)-int(strip)], in.take(end + 1)[:end]...)
		e.Name = in.nameOf(name)
		return name, nil
	}
	nameLen := int(flags & flagNameMask)
	if nameLen == flagNameMask {
		nameLen = in.nul()
	}
	name := in.take(max(nameLen, 0))
	if nameLen < 0 || name == nil {
		return nil, fallback("bad index name")
	}
	e.Name = in.nameOf(name)
	prev = append(prev[:0], name...)
	// Entries are NUL-padded to a multiple of 8 bytes (1 to 8 NULs).
	if pad := (read+nameLen+8)&^7 - read - nameLen; !in.skip(int64(pad)) {
		return nil, fallback("index truncated")
	}
	return prev, nil
}

// extensions reads what follows the entries: an uppercase signature is
// optional to understand; of the others, "link" (split index) and "sdir"
// (sparse index) are read here and any other changes what the entries
// mean.
func (in *indexReader) extensions(f *indexFile) error {
	for in.left >= 8 {
		h := in.take(8)
		if h == nil {
			return fallback("index truncated")
		}
		sig := string(h[:4])
		size := int64(binary.BigEndian.Uint32(h[4:8]))
		if size > in.left {
			return fallback("index extension overruns the file")
		}
		switch {
		case sig == "link":
			ext, ok := in.whole(size)
			if !ok {
				return fallback("index truncated")
			}
			l, err := decodeLink(ext)
			if err != nil {
				return err
			}
			f.link = l
			continue
		case sig == "sdir":
			f.sparse = true
		case sig[0] < 'A' || sig[0] > 'Z':
			return fmt.Errorf("%w: %w: index extension %q", ErrFallback, errIndexFeature, sig)
		}
		if !in.skip(size) {
			return fallback("index truncated")
		}
	}
	if in.left != 0 {
		return fallback("index extension overruns the file")
	}
	return nil
}

// decodeLink reads a "link" extension: the shared index id and two EWAH
// bitmaps, the positions to delete and those to replace.
func decodeLink(b []byte) (*splitLink, error) {
	if len(b) < sha1.Size {
		return nil, fallback("short link extension")
	}
	l := &splitLink{}
	copy(l.shared[:], b[:sha1.Size])
	b = b[sha1.Size:]
	if len(b) == 0 {
		return l, nil
	}
	var err error
	if l.delete, b, err = ewahBits(b); err != nil {
		return nil, err
	}
	if l.replaced, _, err = ewahBits(b); err != nil {
		return nil, err
	}
	return l, nil
}

// ewahBits decodes one EWAH-compressed bitmap (git's ewah_io.c layout)
// into the positions of its set bits, and returns the rest of b.
func ewahBits(b []byte) ([]int, []byte, error) {
	if len(b) < 8 {
		return nil, nil, fallback("short EWAH bitmap")
	}
	words := int(binary.BigEndian.Uint32(b[4:8]))
	b = b[8:]
	if words < 0 || words > len(b)/8 || len(b) < words*8+4 {
		return nil, nil, fallback("truncated EWAH bitmap")
	}
	buf := make([]uint64, words)
	for i := range buf {
		buf[i] = binary.BigEndian.Uint64(b[i*8:])
	}
	rest := b[words*8+4:]
	var out []int
	pos := 0
	for p := 0; p < len(buf); {
		w := buf[p]
		run := int((w >> 1) & 0xffffffff)
		lits := int(w >> 33)
		if run > 1<<20 || lits > len(buf) {
			return nil, nil, fallback("EWAH bitmap too large")
		}
		if w&1 != 0 {
			for k := 0; k < run*64; k++ {
				out = append(out, pos)
				pos++
			}
		} else {
			pos += run * 64
		}
		p++
		for k := 0; k < lits; k++ {
			if p >= len(buf) {
				return nil, nil, fallback("truncated EWAH bitmap")
			}
			for c := 0; c < 64; c++ {
				if buf[p]>>c&1 != 0 {
					out = append(out, pos)
				}
				pos++
			}
			p++
		}
	}
	return out, rest, nil
}

// varint decodes git's offset varint (index v4 name prefix length).
func varint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := uint64(c & 0x7f)
	n := 1
	for c&0x80 != 0 {
		if n >= len(b) || n > 9 {
			return 0, 0
		}
		c = b[n]
		n++
		v = ((v + 1) << 7) | uint64(c&0x7f)
	}
	return v, n
}

// Encode writes entries, which must be sorted bytewise by name without
// duplicates, as a version 2 index with no extensions: the format git and
// go-git read. It is the counterpart of the parser and, like it, avoids
// go-git's reflection-based encoder on the hot path.
func Encode(entries []Entry) ([]byte, error) {
	var buf bytes.Buffer
	if err := EncodeTo(&buf, entries); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EncodeTo is Encode written to w as it is encoded, so that the index of a
// million files is never held as bytes beside its entries. On an error
// part of the index may have been written.
func EncodeTo(w io.Writer, entries []Entry) error {
	h := sha1.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	buf := make([]byte, 0, 512)
	buf = append(buf, 'D', 'I', 'R', 'C')
	buf = binary.BigEndian.AppendUint32(buf, 2)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(entries)))
	for i := range entries {
		e := &entries[i]
		if i > 0 && entries[i-1].Name >= e.Name {
			return fmt.Errorf("index entries out of order or duplicated: %q, %q", entries[i-1].Name, e.Name)
		}
		if e.Name == "" || strings.IndexByte(e.Name, 0) >= 0 {
			return fmt.Errorf("index entry name %q is empty or holds NUL", e.Name)
		}
		start := len(buf)
		buf = appendTime(buf, e.CtimeNs)
		buf = appendTime(buf, e.MtimeNs)
		buf = binary.BigEndian.AppendUint32(buf, e.Dev)
		buf = binary.BigEndian.AppendUint32(buf, e.Ino)
		buf = binary.BigEndian.AppendUint32(buf, uint32(e.Mode))
		buf = binary.BigEndian.AppendUint32(buf, e.UID)
		buf = binary.BigEndian.AppendUint32(buf, e.GID)
		buf = binary.BigEndian.AppendUint32(buf, e.Size)
		buf = append(buf, e.Hash[:]...)
		buf = binary.BigEndian.AppendUint16(buf, uint16(min(len(e.Name), flagNameMask)))
		buf = append(buf, e.Name...)
		// NUL-pad to a multiple of 8 bytes, at least one NUL.
		for n := (len(buf) - start + 8) &^ 7; len(buf)-start < n; {
			buf = append(buf, 0)
		}
		if _, err := bw.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
	}
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

func appendTime(buf []byte, ns int64) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(ns/1e9))
	return binary.BigEndian.AppendUint32(buf, uint32(ns%1e9))
}
