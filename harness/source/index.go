package source

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// errFallback means the fast status does not model something in this
// repository (submodules, conflicts, sparse or split index, ...); the proof
// then uses go-git's Worktree.Status, which is slower but complete.
var errFallback = errors.New("fast status does not cover this repository")

func fallback(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errFallback, fmt.Sprintf(format, args...))
}

// indexEntry is the part of a .git/index entry that status needs.
type indexEntry struct {
	name   string
	mtime  int64 // ns; 0 when the index recorded none
	size   uint32
	mode   filemode.FileMode
	hash   [sha1.Size]byte
	hasMod bool // the index recorded an mtime
}

// gitIndex is a parsed .git/index and the index file's own mtime, which the
// racy-git check compares file mtimes against.
type gitIndex struct {
	entries []indexEntry
	modTime time.Time
}

// readIndex reads and parses gitDir/index. It is a small parser of its own
// because go-git's decoder costs about 25 ms per 15k entries (it decodes
// field by field through reflection), which alone would use up most of the
// time budget of a proof. It returns errFallback for anything it does not
// model, so correctness never depends on it covering every index feature.
func readIndex(gitDir string) (*gitIndex, error) {
	f, err := os.Open(gitDir + "/index")
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fallback("no index file")
		}
		return nil, fmt.Errorf("open index: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat index: %w", err)
	}
	data := make([]byte, fi.Size())
	if _, err := readFull(f, data); err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	entries, err := parseIndex(data)
	if err != nil {
		return nil, err
	}
	return &gitIndex{entries: entries, modTime: fi.ModTime()}, nil
}

func readFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Index entry layout (git's Documentation/gitformat-index.txt).
const (
	entryHeader      = 62 // ctime, mtime, dev, ino, mode, uid, gid, size, sha1, flags
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

// parseIndex decodes index versions 2, 3 and 4 with SHA-1 object names.
func parseIndex(data []byte) ([]indexEntry, error) {
	if len(data) < 12+indexTrailerSize || string(data[:4]) != "DIRC" {
		return nil, fallback("index has no DIRC header")
	}
	body := data[:len(data)-indexTrailerSize]
	if sum := sha1.Sum(body); !bytes.Equal(sum[:], data[len(body):]) {
		return nil, fallback("index checksum mismatch")
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, fallback("index version %d", version)
	}
	count := int(binary.BigEndian.Uint32(data[8:12]))
	if count > len(body)/entryHeader {
		return nil, fallback("index entry count %d does not fit", count)
	}
	entries := make([]indexEntry, count)
	off := 12
	var prev []byte
	for i := range entries {
		start := off
		if off+entryHeader > len(body) {
			return nil, fallback("index truncated")
		}
		h := body[off : off+entryHeader]
		e := &entries[i]
		msec := binary.BigEndian.Uint32(h[8:12])
		mnsec := binary.BigEndian.Uint32(h[12:16])
		e.hasMod = msec != 0 || mnsec != 0
		e.mtime = int64(msec)*1e9 + int64(mnsec)
		mode := binary.BigEndian.Uint32(h[24:28])
		e.mode = filemode.FileMode(mode)
		e.size = binary.BigEndian.Uint32(h[36:40])
		copy(e.hash[:], h[40:60])
		flags := binary.BigEndian.Uint16(h[60:62])
		off += entryHeader
		switch {
		case flags&flagStageMask != 0:
			return nil, fallback("index has unmerged entries")
		case mode&modeTypeMask == modeGitlink:
			return nil, fallback("index has a submodule")
		case mode&modeTypeMask == modeDir:
			return nil, fallback("index is sparse")
		}
		if flags&flagExtended != 0 {
			if version < 3 || off+2 > len(body) {
				return nil, fallback("bad extended index flags")
			}
			ext := binary.BigEndian.Uint16(body[off : off+2])
			off += 2
			if ext&(extSkipWorktree|extIntentToAdd) != 0 {
				return nil, fallback("index has skip-worktree or intent-to-add entries")
			}
		}
		var name []byte
		if version == 4 {
			strip, n := varint(body[off:])
			if n == 0 || strip > uint64(len(prev)) {
				return nil, fallback("bad v4 name prefix")
			}
			off += n
			end := bytes.IndexByte(body[off:], 0)
			if end < 0 {
				return nil, fallback("unterminated index name")
			}
			name = append(prev[:len(prev)-int(strip):len(prev)-int(strip)], body[off:off+end]...)
			off += end + 1
		} else {
			nameLen := int(flags & flagNameMask)
			if nameLen == flagNameMask {
				nameLen = bytes.IndexByte(body[off:], 0)
			}
			if nameLen < 0 || off+nameLen > len(body) {
				return nil, fallback("bad index name")
			}
			name = body[off : off+nameLen]
			// Entries are NUL-padded to a multiple of 8 bytes (1 to 8 NULs).
			off = start + (off-start+nameLen+8)&^7
		}
		e.name = string(name)
		if i > 0 && entries[i-1].name >= e.name {
			return nil, fallback("index entries out of order")
		}
		prev = append(prev[:0], name...)
	}
	// Extensions: an uppercase signature is optional to understand; any
	// other (link = split index, sdir = sparse) changes what the entries
	// mean, so the fast path steps aside.
	for off+8 <= len(body) {
		sig := body[off : off+4]
		size := int(binary.BigEndian.Uint32(body[off+4 : off+8]))
		if sig[0] < 'A' || sig[0] > 'Z' {
			return nil, fallback("index extension %q", sig)
		}
		off += 8 + size
	}
	if off > len(body) {
		return nil, fallback("index extension overruns the file")
	}
	return entries, nil
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
