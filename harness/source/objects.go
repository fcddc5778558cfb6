package source

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
)

// immutableObject matches the files of a git object store that git never
// rewrites once written, and whose name is a checksum of their content: a
// loose object (named by its id) and a pack with its index and reverse
// index (named by the pack's trailing checksum).
var immutableObject = regexp.MustCompile(`^\.git/objects/([0-9a-f]{2}/[0-9a-f]{38}|pack/pack-[0-9a-f]{40}\.(pack|idx|rev))$`)

// metadataOnly reports whether two entries of the same path differ in
// their ctime only: what a hard link to the file (a local `git clone`,
// which links the object files) or a chown/chmod back to the same value
// leaves behind, and no content change can (a write changes mtime or
// size, and restoring the mtime is still caught by the object's own
// checksum, see verifyObject).
func metadataOnly(b, a *ctoharness.ManifestEntry) bool {
	if !strings.HasPrefix(b.Path, ".git/objects/") {
		return false
	}
	return b.Type == ctoharness.EntryFile && a.Type == b.Type && a.Mode == b.Mode && a.Size == b.Size &&
		a.MtimeNs == b.MtimeNs && a.Inode == b.Inode && a.Target() == b.Target() && a.SHA256() == b.SHA256() && a.CtimeNs != b.CtimeNs
}

// hashObjectStoreFiles records the SHA-256 of the files under
// .git/objects that do not carry their own checksum in their name
// (info/packs, commit-graph, multi-pack-index, bitmaps): small next to
// the packs, and a local clone hard-links them too, so their content is
// what tells a link from a write.
func hashObjectStoreFiles(repo Repo, entries []ctoharness.ManifestEntry) error {
	for k := range entries {
		e := &entries[k]
		if e.Type != ctoharness.EntryFile || e.SHA256() != "" || !strings.HasPrefix(e.Path, ".git/objects/") || immutableObject.MatchString(e.Path) {
			continue
		}
		sum, err := fileSHA256(repo.HostPath(e.Path), e.Size)
		if err != nil {
			return err
		}
		e.SetSHA256(sum)
	}
	return nil
}

func fileSHA256(p string, size int64) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", err
	}
	if n != size {
		return "", fmt.Errorf("%s changed size while it was hashed", p)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// MarkVerifiedObjects sets ObjectVerified on the after-proof's immutable
// object files whose lstat differs from the before-proof's in ctime only
// and whose content still checks against its name (the manifest digest
// does not cover the mark). Compare then records such a difference as
// benign instead of a mutation. before must be held, not set aside
// (Restored).
func MarkVerifiedObjects(repo Repo, before ctoharness.SourceProof, afterProof *ctoharness.SourceProof) {
	after := afterProof.Manifest
	k := 0
	for b := range inOrder(before) {
		if !immutableObject.MatchString(b.Path) {
			continue
		}
		for k < len(after) && after[k].Path < b.Path {
			k++
		}
		if k == len(after) {
			return
		}
		if a := &after[k]; a.Path == b.Path && metadataOnly(&b, a) && verifyObject(repo.HostPath(a.Path), a) == nil {
			a.ObjectVerified = true
		}
	}
}

// verifyObject checks an object-store file against the checksum its name
// carries: a loose object must inflate to content whose id is its name; a
// pack must end with the SHA-1 of what precedes it, equal to its name; an
// index or reverse index must end with its own SHA-1 and name the pack's
// checksum before it. The file must still have the size the walk saw.
func verifyObject(p string, e *ctoharness.ManifestEntry) error {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != e.Size {
		return fmt.Errorf("%s is no longer the file the walk saw", p)
	}
	base := p[strings.LastIndexByte(p, '/')+1:]
	if !strings.HasPrefix(base, "pack-") {
		dir := p[:strings.LastIndexByte(p, '/')]
		want := dir[strings.LastIndexByte(dir, '/')+1:] + base
		r, err := objfile.NewReader(f)
		if err != nil {
			return err
		}
		defer r.Close()
		t, size, err := r.Header()
		if err != nil {
			return err
		}
		h := plumbing.NewHasher(t, size)
		if _, err := io.Copy(h, r); err != nil {
			return err
		}
		if got := h.Sum().String(); got != want {
			return fmt.Errorf("%s holds object %s", p, got)
		}
		return nil
	}
	name := strings.TrimPrefix(base[:strings.IndexByte(base, '.')], "pack-")
	if e.Size < 40 {
		return fmt.Errorf("%s is too short", p)
	}
	h := sha1.New()
	if _, err := io.CopyN(h, f, e.Size-20); err != nil {
		return err
	}
	trailer := make([]byte, 20)
	if _, err := io.ReadFull(f, trailer); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), trailer) {
		return fmt.Errorf("%s does not match its own checksum", p)
	}
	packSum := trailer
	if !strings.HasSuffix(base, ".pack") {
		// .idx and .rev: the pack's checksum comes before their own.
		packSum = make([]byte, 20)
		if _, err := f.ReadAt(packSum, e.Size-40); err != nil {
			return err
		}
	}
	if hex.EncodeToString(packSum) != name {
		return fmt.Errorf("%s names pack %s, not %s", p, hex.EncodeToString(packSum), name)
	}
	return nil
}
