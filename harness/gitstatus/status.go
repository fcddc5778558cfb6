// Package gitstatus computes git worktree statuses from data a caller
// already has: one lstat listing of the worktree (a manifest, sorted
// bytewise by path), the index and the object store.
//
// Compute is the status route of source proofs: git's own rules (its
// config files, stat comparison, input conversions, ignore and attribute
// semantics, submodules, split and sparse indexes), checked against the
// git CLI by a differential test, refusing with an UnsupportedError what
// it must not or cannot compute (filters, fsmonitor, core.worktree,
// SHA-256, reftable).
//
// Status is the older, go-git-compatible form the fixture uses for its
// own repositories, which the harness creates and which never hold those
// features: its semantics are go-git's Worktree.Status (metadata-first
// comparison with its racy rule, nested .git entries skipped, .gitignore
// patterns loaded as gitignore.ReadPatterns loads them), and anything it
// does not model returns ErrFallback so the caller uses GoGitStatus. The
// package also lists what `git add -A` would change relative to a tree,
// reads and writes the index file, and hashes an index as trees.
package gitstatus

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"github.com/cto-harness/cto-harness/harness/caseworld"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Status merges index and manifest (both sorted bytewise by path) into
// go-git's status: staged changes (from DiffIndex), tracked files missing
// or changed on disk, and untracked files that no ignore pattern excludes.
// Unchanged paths are omitted; the result is sorted by path.
func Status(root string, idx *Index, staged Staged, manifest []ctoharness.ManifestEntry) ([]ctoharness.StatusEntry, error) {
	type fileStatus struct{ staging, worktree git.StatusCode }
	st := make(map[string]*fileStatus, len(staged))
	for p, c := range staged {
		st[p] = &fileStatus{staging: c, worktree: git.Unmodified}
	}
	right := func(p string, c git.StatusCode) {
		s := st[p]
		if s == nil {
			s = &fileStatus{staging: git.Unmodified}
			st[p] = s
		}
		if c == git.Untracked {
			s.staging = git.Untracked
		}
		s.worktree = c
	}

	links := gitlinkPaths(idx)
	if hasGitmodules(manifest) && len(links) == 0 {
		return nil, fallback("repository has .gitmodules")
	}
	h := newBlobHasher()
	var untracked []int
	ents := idx.Entries
	i, j := 0, 0
	for i < len(ents) || j < len(manifest) {
		if j < len(manifest) && (!Leaf(&manifest[j]) || underGitlink(links, manifest[j].Path)) {
			j++ // a submodule's files are compared with its own tree, not here
			continue
		}
		if i < len(ents) && ents[i].Mode == filemode.Submodule {
			// A gitlink is its directory (populated or empty); what is in
			// it is the submodule's.
			if !isDir(manifest, ents[i].Name) {
				right(ents[i].Name, git.Deleted)
			}
			i++
			continue
		}
		var c int
		switch {
		case i == len(ents):
			c = 1
		case j == len(manifest):
			c = -1
		default:
			c = strings.Compare(ents[i].Name, manifest[j].Path)
		}
		switch {
		case c < 0:
			right(ents[i].Name, git.Deleted)
			i++
		case c > 0:
			untracked = append(untracked, j)
			j++
		default:
			changed, err := h.changed(root, &manifest[j], &ents[i], idx)
			if err != nil {
				return nil, err
			}
			if changed {
				right(ents[i].Name, git.Modified)
			}
			i++
			j++
		}
	}
	if len(untracked) > 0 {
		m, err := loadIgnore(root, manifest)
		if err != nil {
			return nil, err
		}
		for _, k := range untracked {
			p := manifest[k].Path
			if m != nil && m.Match(strings.Split(p, "/"), false) {
				continue
			}
			right(p, git.Untracked)
		}
	}

	out := make([]ctoharness.StatusEntry, 0, len(st))
	for p, s := range st {
		if s.staging == git.Unmodified && s.worktree == git.Unmodified {
			continue
		}
		out = append(out, ctoharness.StatusEntry{Path: p, Staging: string(rune(s.staging)), Worktree: string(rune(s.worktree))})
	}
	slices.SortFunc(out, func(a, b ctoharness.StatusEntry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// gitlinkPaths are the index's submodule paths.
func gitlinkPaths(idx *Index) []string {
	var out []string
	for i := range idx.Entries {
		if idx.Entries[i].Mode == filemode.Submodule {
			out = append(out, idx.Entries[i].Name)
		}
	}
	return out
}

// underGitlink reports whether p lies inside one of the gitlink paths
// (a repository has few submodules).
func underGitlink(links []string, p string) bool {
	for _, l := range links {
		if strings.HasPrefix(p, l+"/") {
			return true
		}
	}
	return false
}

// isDir reports whether the manifest has a directory at p.
func isDir(manifest []ctoharness.ManifestEntry, p string) bool {
	k, found := slices.BinarySearchFunc(manifest, p, func(e ctoharness.ManifestEntry, p string) int {
		return strings.Compare(e.Path, p)
	})
	return found && manifest[k].Type == ctoharness.EntryDir
}

func hasGitmodules(manifest []ctoharness.ManifestEntry) bool {
	_, found := slices.BinarySearchFunc(manifest, ".gitmodules", func(e ctoharness.ManifestEntry, p string) int {
		return strings.Compare(e.Path, p)
	})
	return found
}

// Leaf reports whether go-git's worktree view contains e as a leaf: not a
// directory, not a socket, and no path component named .git (go-git skips
// those at every depth).
func Leaf(e *ctoharness.ManifestEntry) bool {
	if e.Type == ctoharness.EntryDir || fs.FileMode(e.Mode)&fs.ModeSocket != 0 {
		return false
	}
	p := e.Path
	return p != ".git" && !strings.HasPrefix(p, ".git/") && !strings.Contains(p, "/.git/") && !strings.HasSuffix(p, "/.git")
}

// errSizeChanged means a file's size differed from its lstat when read.
var errSizeChanged = errors.New("file changed size while it was read")

// blobHasher hashes worktree files as git blobs, reusing one buffer.
type blobHasher struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
		Reset()
	}
	buf []byte
}

func newBlobHasher() *blobHasher {
	return &blobHasher{h: sha1.New(), buf: make([]byte, 64<<10)}
}

// changed mirrors go-git's filesystem noder: metadata first (Index.Fresh),
// content hash otherwise. A path whose type git cannot store counts as
// changed.
func (b *blobHasher) changed(root string, m *ctoharness.ManifestEntry, e *Entry, idx *Index) (bool, error) {
	mode, err := filemode.NewFromOSFileMode(fs.FileMode(m.Mode))
	if err != nil {
		return true, nil
	}
	if idx.Fresh(e, m) {
		return false, nil
	}
	if mode != e.Mode {
		return true, nil
	}
	sum, err := b.leaf(root, m)
	if errors.Is(err, errSizeChanged) {
		return true, nil // it is changing right now, so it is not what the index says
	}
	if err != nil {
		return false, err
	}
	return sum != e.Hash, nil
}

// leaf is the blob id of a file or symlink of the manifest.
func (b *blobHasher) leaf(root string, m *ctoharness.ManifestEntry) (plumbing.Hash, error) {
	if m.Type == ctoharness.EntrySymlink {
		return ObjectHash("blob", []byte(m.Target())), nil
	}
	return b.file(root, m.Path, m.Size)
}

// file hashes root/rel, opened confined to root: a worktree Case wrote may
// have swapped a directory for a symlink or a file for a FIFO since the walk.
func (b *blobHasher) file(root, rel string, size int64) (plumbing.Hash, error) {
	f, err := caseworld.Open(root, rel)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("open %s for status: %w", root+"/"+rel, err)
	}
	defer f.Close()
	return b.opened(f, root+"/"+rel, size)
}

// opened hashes the open file f (named p), which its lstat said is size
// bytes long.
func (b *blobHasher) opened(f *os.File, p string, size int64) (plumbing.Hash, error) {
	var out plumbing.Hash
	b.h.Reset()
	b.h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
	n := int64(0)
	for {
		m, err := f.Read(b.buf)
		b.h.Write(b.buf[:m])
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read %s for status: %w", p, err)
		}
	}
	if n != size {
		// The header promised size bytes: a file that changed size since
		// its lstat would otherwise get a hash of no real content.
		return out, fmt.Errorf("%s: %w (%d bytes, lstat said %d)", p, errSizeChanged, n, size)
	}
	b.h.Sum(out[:0])
	return out, nil
}

// GoGitStatus is the complete, slower path: go-git's own Worktree.Status,
// as sorted entries with unchanged paths omitted.
func GoGitStatus(r *git.Repository) ([]ctoharness.StatusEntry, error) {
	wt, err := r.Worktree()
	if err != nil {
		return nil, fmt.Errorf("open worktree: %w", err)
	}
	st, err := wt.Status()
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	out := make([]ctoharness.StatusEntry, 0, len(st))
	for p, fst := range st {
		if fst.Staging == git.Unmodified && fst.Worktree == git.Unmodified {
			continue
		}
		out = append(out, ctoharness.StatusEntry{Path: p, Staging: string(rune(fst.Staging)), Worktree: string(rune(fst.Worktree))})
	}
	slices.SortFunc(out, func(a, b ctoharness.StatusEntry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}
