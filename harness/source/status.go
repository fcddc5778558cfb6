package source

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	ctoharness "github.com/cto-harness/cto-harness"
)

// The fast status reproduces go-git's Worktree.Status from data the proof
// already has: the manifest's lstat of every path, the parsed index and
// HEAD's tree. go-git's own Status walks the worktree a second time, decodes
// the index twice and reads every tree object, about 12x the cost of git
// status on a 15k-file repository; this path reads tree objects only where
// the index differs from HEAD. The semantics are go-git's (metadata-first
// comparison with its racy-git rule, every untracked file listed, nested
// .git entries skipped, .gitignore patterns loaded the way
// gitignore.ReadPatterns loads them); tests check it against go-git's
// Status on the same repositories. Anything it does not model (submodules,
// unmerged, skip-worktree or intent-to-add entries, split or sparse index,
// index versions other than 2-4, a non-SHA-1 index) returns errFallback and
// the proof uses go-git's Status instead.
//
// Known, deliberate differences from go-git v5.19: a symlinked .gitignore
// is not followed (git itself stopped following them in 2.32), and paths
// that go-git's worktree filesystem refuses to open (control characters,
// NTFS-reserved names such as "aux") are read normally, where go-git would
// fail the status or report the file modified.

// stagingChanges maps a path to its staging code (HEAD tree vs index).
type stagingChanges map[string]git.StatusCode

// indexTree is one directory of the index as a git tree: its hash (what
// git write-tree would produce) and its direct children in tree order.
type indexTree struct {
	hash     plumbing.Hash
	children []indexChild
}

type indexChild struct {
	name  string
	dir   bool
	entry int // index of the entry for a file; -1 for a directory
	hash  plumbing.Hash
	mode  filemode.FileMode
}

// buildIndexTrees computes the tree hash of every directory of the index.
// Index order (bytewise by full path) is git tree order, so each directory
// is a contiguous run and one pass suffices.
func buildIndexTrees(entries []indexEntry) map[string]*indexTree {
	trees := make(map[string]*indexTree)
	var build func(prefix string, lo, hi int) plumbing.Hash
	build = func(prefix string, lo, hi int) plumbing.Hash {
		t := &indexTree{}
		var buf []byte
		for i := lo; i < hi; {
			rel := entries[i].name[len(prefix):]
			if slash := strings.IndexByte(rel, '/'); slash >= 0 {
				name := rel[:slash]
				sub := prefix + name + "/"
				j := i + 1
				for j < hi && strings.HasPrefix(entries[j].name, sub) {
					j++
				}
				h := build(sub, i, j)
				t.children = append(t.children, indexChild{name: name, dir: true, entry: -1, hash: h, mode: filemode.Dir})
				buf = appendTreeEntry(buf, filemode.Dir, name, h)
				i = j
				continue
			}
			e := &entries[i]
			t.children = append(t.children, indexChild{name: rel, entry: i, hash: e.hash, mode: e.mode})
			buf = appendTreeEntry(buf, e.mode, rel, e.hash)
			i++
		}
		t.hash = objectHash("tree", buf)
		trees[strings.TrimSuffix(prefix, "/")] = t
		return t.hash
	}
	build("", 0, len(entries))
	return trees
}

func appendTreeEntry(buf []byte, mode filemode.FileMode, name string, h plumbing.Hash) []byte {
	buf = strconv.AppendUint(buf, uint64(mode), 8)
	buf = append(buf, ' ')
	buf = append(buf, name...)
	buf = append(buf, 0)
	return append(buf, h[:]...)
}

func objectHash(kind string, content []byte) plumbing.Hash {
	h := sha1.New()
	h.Write([]byte(kind + " " + strconv.Itoa(len(content)) + "\x00"))
	h.Write(content)
	var out plumbing.Hash
	h.Sum(out[:0])
	return out
}

// stagingDiff compares HEAD's tree with the index, descending only into
// directories whose hashes differ, so a clean index costs no object reads.
func stagingDiff(r *git.Repository, headTree plumbing.Hash, entries []indexEntry, trees map[string]*indexTree) (stagingChanges, error) {
	ch := stagingChanges{}
	var allHead func(prefix string, h plumbing.Hash) error
	allHead = func(prefix string, h plumbing.Hash) error {
		t, err := r.TreeObject(h)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", h, err)
		}
		for _, e := range t.Entries {
			if e.Mode == filemode.Dir {
				if err := allHead(prefix+e.Name+"/", e.Hash); err != nil {
					return err
				}
				continue
			}
			ch[prefix+e.Name] = git.Deleted
		}
		return nil
	}
	allIndex := func(prefix string) {
		for _, e := range entries {
			if strings.HasPrefix(e.name, prefix) {
				ch[e.name] = git.Added
			}
		}
	}
	var dir func(path string, h plumbing.Hash) error
	dir = func(path string, h plumbing.Hash) error {
		it := trees[path]
		if it != nil && it.hash == h {
			return nil
		}
		prefix := ""
		if path != "" {
			prefix = path + "/"
		}
		t, err := r.TreeObject(h)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", h, err)
		}
		var kids []indexChild
		if it != nil {
			kids = it.children
		}
		i, j := 0, 0
		for i < len(t.Entries) || j < len(kids) {
			var c int
			switch {
			case i == len(t.Entries):
				c = 1
			case j == len(kids):
				c = -1
			default:
				c = compareTreeNames(t.Entries[i].Name, t.Entries[i].Mode == filemode.Dir, kids[j].name, kids[j].dir)
			}
			switch {
			case c < 0:
				he := t.Entries[i]
				if he.Mode == filemode.Dir {
					if err := allHead(prefix+he.Name+"/", he.Hash); err != nil {
						return err
					}
				} else {
					ch[prefix+he.Name] = git.Deleted
				}
				i++
			case c > 0:
				k := kids[j]
				if k.dir {
					allIndex(prefix + k.name + "/")
				} else {
					ch[prefix+k.name] = git.Added
				}
				j++
			default:
				he, k := t.Entries[i], kids[j]
				if k.dir {
					if err := dir(prefix+k.name, he.Hash); err != nil {
						return err
					}
				} else if he.Hash != k.hash || he.Mode != k.mode {
					ch[prefix+k.name] = git.Modified
				}
				i++
				j++
			}
		}
		return nil
	}
	if err := dir("", headTree); err != nil {
		return nil, err
	}
	return ch, nil
}

// compareTreeNames orders names the way git orders tree entries: a
// directory sorts as if its name ended in "/". A file and a directory of
// the same name are different entries.
func compareTreeNames(a string, aDir bool, b string, bDir bool) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	ca, cb := treeNameByte(a, n, aDir), treeNameByte(b, n, bDir)
	switch {
	case ca < cb:
		return -1
	case ca > cb:
		return 1
	}
	return 0
}

// treeNameByte is git's base_name_compare: past the end of a name, a
// directory continues with '/' and a file with NUL.
func treeNameByte(s string, i int, dir bool) int {
	switch {
	case i < len(s):
		return int(s[i])
	case dir:
		return '/'
	}
	return 0
}

// worktreeStatus merges index and manifest (both sorted bytewise by path)
// into go-git's status: tracked files missing or changed on disk, and
// untracked files that no ignore pattern excludes.
func worktreeStatus(root string, idx *gitIndex, staging stagingChanges, manifest []ctoharness.ManifestEntry) ([]ctoharness.StatusEntry, error) {
	type fileStatus struct{ staging, worktree git.StatusCode }
	st := make(map[string]*fileStatus, len(staging))
	for p, c := range staging {
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

	if _, found := slices.BinarySearchFunc(manifest, ".gitmodules", func(e ctoharness.ManifestEntry, p string) int {
		return strings.Compare(e.Path, p)
	}); found {
		return nil, fallback("repository has .gitmodules")
	}
	h := &blobHasher{h: sha1.New(), buf: make([]byte, 64<<10)}
	var untracked []int
	ents := idx.entries
	i, j := 0, 0
	for i < len(ents) || j < len(manifest) {
		if j < len(manifest) && !statusCandidate(&manifest[j]) {
			j++
			continue
		}
		var c int
		switch {
		case i == len(ents):
			c = 1
		case j == len(manifest):
			c = -1
		default:
			c = strings.Compare(ents[i].name, manifest[j].Path)
		}
		switch {
		case c < 0:
			right(ents[i].name, git.Deleted)
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
				right(ents[i].name, git.Modified)
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

// statusCandidate reports whether go-git's worktree view contains e as a
// leaf: not a directory, not a socket, and no path component named .git
// (go-git skips those at every depth).
func statusCandidate(e *ctoharness.ManifestEntry) bool {
	if e.Type == ctoharness.EntryDir || fs.FileMode(e.Mode)&fs.ModeSocket != 0 {
		return false
	}
	p := e.Path
	return p != ".git" && !strings.HasPrefix(p, ".git/") && !strings.Contains(p, "/.git/") && !strings.HasSuffix(p, "/.git")
}

// blobHasher hashes worktree files as git blobs, reusing one buffer.
type blobHasher struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
		Reset()
	}
	buf []byte
}

// changed mirrors go-git's filesystem noder: metadata first (size, mtime,
// mode, and the file older than the index, the racy-git rule), content
// hash otherwise. A path whose type git cannot store counts as changed.
func (b *blobHasher) changed(root string, m *ctoharness.ManifestEntry, e *indexEntry, idx *gitIndex) (bool, error) {
	mode, err := filemode.NewFromOSFileMode(fs.FileMode(m.Mode))
	if err != nil {
		return true, nil
	}
	if e.hasMod && uint32(m.Size) == e.size && m.MtimeNs == e.mtime && mode == e.mode &&
		!idx.modTime.IsZero() && m.MtimeNs < idx.modTime.UnixNano() {
		return false, nil
	}
	if mode != e.mode {
		return true, nil
	}
	var sum plumbing.Hash
	if m.Type == ctoharness.EntrySymlink {
		sum = objectHash("blob", []byte(m.Target))
	} else {
		s, err := b.file(root+"/"+m.Path, m.Size)
		if err != nil {
			return false, err
		}
		sum = s
	}
	return sum != e.hash, nil
}

func (b *blobHasher) file(p string, size int64) (plumbing.Hash, error) {
	var out plumbing.Hash
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return out, fmt.Errorf("open %s for status: %w", p, err)
	}
	defer f.Close()
	b.h.Reset()
	b.h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
	for {
		n, err := f.Read(b.buf)
		b.h.Write(b.buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read %s for status: %w", p, err)
		}
	}
	b.h.Sum(out[:0])
	return out, nil
}

// loadIgnore loads ignore patterns the way go-git's gitignore.ReadPatterns
// does through the worktree filesystem: per directory its .gitignore, then
// subdirectories in name order, skipping those the patterns gathered so
// far at that level ignore. It works from the manifest instead of a second
// directory walk. As in go-git v5.19 (whose worktree filesystem refuses
// paths through .git), .git/info/exclude is not applied. Unlike go-git, and
// like git since 2.32, a symlinked .gitignore is not followed. It returns
// nil when there are no patterns.
func loadIgnore(root string, manifest []ctoharness.ManifestEntry) (gitignore.Matcher, error) {
	files := make(map[string]bool)
	subdirs := make(map[string][]string)
	for k := range manifest {
		e := &manifest[k]
		p := e.Path
		if !statusCandidate(e) && e.Type != ctoharness.EntryDir {
			continue
		}
		dir, name := "", p
		if slash := strings.LastIndexByte(p, '/'); slash >= 0 {
			dir, name = p[:slash], p[slash+1:]
		}
		switch {
		case p == ".":
		case e.Type == ctoharness.EntryDir:
			if name != ".git" {
				subdirs[dir] = append(subdirs[dir], name)
			}
		case e.Type == ctoharness.EntryFile && name == ".gitignore":
			files[p] = true
		}
	}
	var load func(dir string, domain []string) ([]gitignore.Pattern, error)
	load = func(dir string, domain []string) ([]gitignore.Pattern, error) {
		prefix := ""
		if dir != "" {
			prefix = dir + "/"
		}
		var ps []gitignore.Pattern
		if f := prefix + ".gitignore"; files[f] {
			data, err := os.ReadFile(root + "/" + f)
			if err != nil {
				return nil, fmt.Errorf("read ignore file %s: %w", f, err)
			}
			ps = parseIgnore(data, domain)
		}
		kids := subdirs[dir]
		slices.Sort(kids)
		for _, name := range kids {
			sub := append(slices.Clip(domain), name)
			if len(ps) > 0 && gitignore.NewMatcher(ps).Match(sub, true) {
				continue
			}
			more, err := load(prefix+name, sub)
			if err != nil {
				return nil, err
			}
			ps = append(ps, more...)
		}
		return ps, nil
	}
	ps, err := load("", nil)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	return gitignore.NewMatcher(ps), nil
}

// parseIgnore splits an ignore file into patterns exactly as go-git does:
// every line that is neither blank nor a comment.
func parseIgnore(data []byte, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		s := sc.Text()
		if !strings.HasPrefix(s, "#") && len(strings.TrimSpace(s)) > 0 {
			ps = append(ps, gitignore.ParsePattern(s, domain))
		}
	}
	return ps
}

// goGitStatus is the complete, slower path: go-git's own Worktree.Status.
func goGitStatus(r *git.Repository) ([]ctoharness.StatusEntry, error) {
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
