package gitstatus

import (
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseworld"
)

// Blob is one side of a changed path: its mode and blob id.
type Blob struct {
	Mode filemode.FileMode
	Hash plumbing.Hash
}

// Change is a path whose worktree state differs from a tree. From is nil
// for a path the tree lacks, To for a path the worktree lacks.
type Change struct {
	Path     string
	From, To *Blob
}

// Changes lists, sorted by path, how the worktree differs from the tree
// base: what `git add -A` on top of idx followed by a commit would change
// relative to base. base lists the tree's leaves (Name, Mode, Hash; sorted
// bytewise, as TreeHash wants them), manifest is an lstat listing of the
// worktree. A worktree leaf is considered when the tree or the index has
// it, or no ignore pattern excludes it: ignore patterns apply to untracked
// paths only, and a path of base counts as tracked even when it was removed
// from the index (there `git add -A` would leave an ignored file out and so
// delete it, although it is still in the worktree unchanged).
//
// Content is hashed unless the index entry for the path equals the tree's
// and its stat data is Fresh, so an untouched worktree costs no reads; a
// change's To is always the hash of the content as read now. idx may be
// empty (no usable index): then every leaf is hashed.
func Changes(root string, base []Entry, idx *Index, manifest []ctoharness.ManifestEntry) ([]Change, error) {
	return ChangesConverted(root, base, idx, manifest, nil)
}

// Converter is what ChangesConverted needs to hash a file as `git add`
// would: the conversions of its paths, and the object store's blobs (for
// "auto", which keeps the CRLF a blob already has).
type Converter struct {
	Conv *Conversions
	Blob func(plumbing.Hash) ([]byte, error)
}

// ChangesConverted is Changes with git's input conversions applied to
// the files it hashes (conv nil: none). A converted file whose bytes are
// exactly its index entry's blob keeps that blob, as a clean file would
// in git (a CRLF blob committed before "text" was set).
func ChangesConverted(root string, base []Entry, idx *Index, manifest []ctoharness.ManifestEntry, conv *Converter) ([]Change, error) {
	h := newBlobHasher()
	var out []Change
	var untracked []int
	worktree := func(f *ctoharness.ManifestEntry, e, b *Entry) (*Blob, error) {
		mode, err := filemode.NewFromOSFileMode(fs.FileMode(f.Mode))
		if err != nil {
			return nil, fmt.Errorf("%s is a %v, which git cannot store", f.Path, fs.FileMode(f.Mode).Type())
		}
		sum, err := h.leaf(root, f)
		if err != nil {
			return nil, err
		}
		if conv != nil && f.Type == ctoharness.EntryFile && (e == nil || sum != e.Hash) {
			if sum, err = conv.hash(root, f, sum, b); err != nil {
				return nil, err
			}
		}
		return &Blob{Mode: mode, Hash: sum}, nil
	}
	ents := idx.Entries
	i, j, k := 0, 0, 0 // base, index, manifest
	for {
		for k < len(manifest) && !Leaf(&manifest[k]) {
			k++
		}
		p, ok := "", false
		if i < len(base) {
			p, ok = base[i].Name, true
		}
		if j < len(ents) && (!ok || ents[j].Name < p) {
			p, ok = ents[j].Name, true
		}
		if k < len(manifest) && (!ok || manifest[k].Path < p) {
			p, ok = manifest[k].Path, true
		}
		if !ok {
			break
		}
		var b, e *Entry
		var f *ctoharness.ManifestEntry
		if i < len(base) && base[i].Name == p {
			b = &base[i]
			i++
		}
		if j < len(ents) && ents[j].Name == p {
			e = &ents[j]
			j++
		}
		if k < len(manifest) && manifest[k].Path == p {
			f = &manifest[k]
			k++
		}
		switch {
		case f == nil:
			if b != nil {
				out = append(out, Change{Path: p, From: &Blob{Mode: b.Mode, Hash: b.Hash}})
			}
		case b == nil && e == nil:
			untracked = append(untracked, k-1)
		case b != nil && e != nil && e.Hash == b.Hash && canonical(e.Mode) == canonical(b.Mode) && idx.Fresh(e, f):
			// The index vouches for the content, and it is the tree's.
		default:
			w, err := worktree(f, e, b)
			if err != nil {
				return nil, err
			}
			if b == nil {
				out = append(out, Change{Path: p, To: w})
			} else if w.Hash != b.Hash || w.Mode != canonical(b.Mode) {
				out = append(out, Change{Path: p, From: &Blob{Mode: b.Mode, Hash: b.Hash}, To: w})
			}
		}
	}
	if len(untracked) > 0 {
		m, err := loadIgnore(root, manifest)
		if err != nil {
			return nil, err
		}
		for _, k := range untracked {
			f := &manifest[k]
			if m != nil && m.Match(strings.Split(f.Path, "/"), false) {
				continue
			}
			w, err := worktree(f, nil, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, Change{Path: f.Path, To: w})
		}
		slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	}
	return out, nil
}

// canonical folds the legacy group-writable mode into a regular file, as git does.
func canonical(m filemode.FileMode) filemode.FileMode {
	if m == filemode.Deprecated {
		return filemode.Regular
	}
	return m
}

// hash is the blob id `git add` gives f (raw is its unconverted id; b the
// tree's entry for the path, nil when new).
func (c *Converter) hash(root string, f *ctoharness.ManifestEntry, raw plumbing.Hash, b *Entry) (plumbing.Hash, error) {
	data, ok, err := c.ToGit(root, f, b)
	if err != nil || !ok {
		return raw, err
	}
	return ObjectHash("blob", data), nil
}

// ToGit reads f (confined to root) and converts it as `git add` would; ok
// is false when its path has no conversion.
func (c *Converter) ToGit(root string, f *ctoharness.ManifestEntry, b *Entry) ([]byte, bool, error) {
	cv := c.Conv.For(f.Path)
	if cv.in.none() && !cv.LFS {
		return nil, false, nil
	}
	file, err := caseworld.Open(root, f.Path)
	if err != nil {
		return nil, false, fmt.Errorf("open %s/%s: %w", root, f.Path, err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, f.Size+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s/%s: %w", root, f.Path, err)
	}
	if int64(len(data)) != f.Size {
		return nil, false, fmt.Errorf("%s/%s: %w (%d bytes, lstat said %d)", root, f.Path, errSizeChanged, len(data), f.Size)
	}
	out, err := cv.ToGit(data, func() (bool, error) {
		if b == nil || c.Blob == nil {
			return false, nil
		}
		blob, err := c.Blob(b.Hash)
		if err != nil {
			return false, err
		}
		return hasCRLFText(blob), nil
	})
	return out, err == nil, err
}
