package gitstatus

import (
	"crypto/sha1"
	"fmt"
	"strconv"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Staged maps each path whose index entry differs from a tree (HEAD's, for
// a status) to its staging code: Added, Modified or Deleted.
type Staged map[string]git.StatusCode

// indexTree is one directory of the index as a git tree: its hash (what
// git write-tree would produce) and the run of index entries under it.
// Its children are listed only for a directory whose hash differs from
// HEAD's (children): a million-entry index then keeps a few words per
// directory, not one child per entry.
type indexTree struct {
	hash   plumbing.Hash
	lo, hi int32 // entries[lo:hi] are the directory's
	sparse bool  // a sparse-index directory entry: only its hash is known
}

type indexChild struct {
	name  string
	dir   bool
	entry int // index of the entry for a file; -1 for a directory
	hash  plumbing.Hash
	mode  filemode.FileMode
	start int // where a subdirectory's entries begin
}

// TreeHash is the root tree hash of the entries (sorted bytewise by name,
// as in an index): what git write-tree would produce for them, computed
// without writing or reading any object.
func TreeHash(entries []Entry) plumbing.Hash {
	var t treeHasher
	for i := range entries {
		t.add(entries[i].Name, entries[i].Mode, entries[i].Hash)
	}
	return t.sum()
}

// treeHasher computes what buildIndexTrees computes for the root, from
// entries given one at a time in index order, holding only the
// directories open on the current entry's path: an index can be hashed
// as it is read, with nothing kept per entry.
type treeHasher struct {
	open []openTree // open[0] is the root; a popped level's buffer is reused
	n    int        // how many of open are open
}

type openTree struct {
	name, prefix string // its name in its parent; its path, "" or ending in "/"
	buf          []byte // its tree object's entries so far
}

// add takes the next entry. A directory holds the run of entries under
// its prefix, as eachChild groups them; a sparse-index directory entry
// ("dir/", mode Dir) is a child of known hash.
func (t *treeHasher) add(name string, mode filemode.FileMode, h plumbing.Hash) {
	if t.n == 0 {
		t.push("", "")
	}
	for t.n > 1 && !strings.HasPrefix(name, t.open[t.n-1].prefix) {
		t.pop()
	}
	rel := name[len(t.open[t.n-1].prefix):]
	for {
		slash := strings.IndexByte(rel, '/')
		if slash < 0 {
			break
		}
		if slash == len(rel)-1 && mode == filemode.Dir {
			rel = rel[:slash]
			break
		}
		t.push(rel[:slash], name[:len(name)-len(rel)+slash+1])
		rel = rel[slash+1:]
	}
	top := &t.open[t.n-1]
	top.buf = AppendTreeEntry(top.buf, mode, rel, h)
}

func (t *treeHasher) push(name, prefix string) {
	if t.n == len(t.open) {
		t.open = append(t.open, openTree{})
	}
	o := &t.open[t.n]
	o.name, o.prefix, o.buf = name, prefix, o.buf[:0]
	t.n++
}

// pop closes the innermost directory into its parent.
func (t *treeHasher) pop() {
	t.n--
	o := &t.open[t.n]
	parent := &t.open[t.n-1]
	parent.buf = AppendTreeEntry(parent.buf, filemode.Dir, o.name, ObjectHash("tree", o.buf))
}

// sum closes every open directory and is the root's hash.
func (t *treeHasher) sum() plumbing.Hash {
	if t.n == 0 {
		return ObjectHash("tree", nil)
	}
	for t.n > 1 {
		t.pop()
	}
	t.n = 0
	return ObjectHash("tree", t.open[0].buf)
}

// buildIndexTrees computes the tree hash of every directory of the index.
// Index order (bytewise by full path) is git tree order, so each directory
// is a contiguous run and one pass suffices.
func buildIndexTrees(entries []Entry) map[string]*indexTree {
	trees := make(map[string]*indexTree)
	var build func(prefix string, lo, hi int) plumbing.Hash
	build = func(prefix string, lo, hi int) plumbing.Hash {
		// The children are held while the directory is hashed, not after.
		var buf []byte
		eachChild(entries, prefix, lo, hi, func(c indexChild, sub string, j int) {
			switch {
			case c.dir && sub != "":
				c.hash = build(sub, c.start, j)
			case c.dir:
				trees[prefix+c.name] = &indexTree{hash: c.hash, sparse: true}
			}
			buf = AppendTreeEntry(buf, c.mode, c.name, c.hash)
		})
		h := ObjectHash("tree", buf)
		trees[strings.TrimSuffix(prefix, "/")] = &indexTree{hash: h, lo: int32(lo), hi: int32(hi)}
		return h
	}
	build("", 0, len(entries))
	return trees
}

// eachChild calls fn with each direct child of the directory prefix, whose
// entries are entries[lo:hi], in tree order. A subdirectory comes with its
// own prefix in sub and its entries as entries[c.start:j], its hash not
// yet known; a sparse-index directory entry with its hash and an empty
// sub.
func eachChild(entries []Entry, prefix string, lo, hi int, fn func(c indexChild, sub string, j int)) {
	for i := lo; i < hi; {
		rel := entries[i].Name[len(prefix):]
		slash := strings.IndexByte(rel, '/')
		switch {
		case slash == len(rel)-1 && entries[i].Mode == filemode.Dir:
			// A sparse directory entry ("dir/"): the tree is known by hash.
			fn(indexChild{name: rel[:slash], dir: true, entry: -1, hash: entries[i].Hash, mode: filemode.Dir}, "", i+1)
			i++
		case slash >= 0:
			name := rel[:slash]
			sub := prefix + name + "/"
			j := i + 1
			for j < hi && strings.HasPrefix(entries[j].Name, sub) {
				j++
			}
			fn(indexChild{name: name, dir: true, entry: -1, mode: filemode.Dir, start: i}, sub, j)
			i = j
		default:
			e := &entries[i]
			fn(indexChild{name: rel, entry: i, hash: e.Hash, mode: e.Mode}, "", i+1)
			i++
		}
	}
}

// children lists the directory t (named prefix, "" or ending in "/") as
// a git tree would, from its entries and its subdirectories' hashes.
func (t *indexTree) children(entries []Entry, trees map[string]*indexTree, prefix string) []indexChild {
	var kids []indexChild
	eachChild(entries, prefix, int(t.lo), int(t.hi), func(c indexChild, sub string, _ int) {
		if c.dir && sub != "" {
			c.hash = trees[strings.TrimSuffix(sub, "/")].hash
		}
		kids = append(kids, c)
	})
	return kids
}

// AppendTreeEntry appends one entry in git's tree object encoding.
func AppendTreeEntry(buf []byte, mode filemode.FileMode, name string, h plumbing.Hash) []byte {
	buf = strconv.AppendUint(buf, uint64(mode), 8)
	buf = append(buf, ' ')
	buf = append(buf, name...)
	buf = append(buf, 0)
	return append(buf, h[:]...)
}

// ObjectHash is the git object id of content of the given kind ("blob",
// "tree").
func ObjectHash(kind string, content []byte) plumbing.Hash {
	h := sha1.New()
	h.Write([]byte(kind + " " + strconv.Itoa(len(content)) + "\x00"))
	h.Write(content)
	var out plumbing.Hash
	h.Sum(out[:0])
	return out
}

// DiffIndex compares the tree (HEAD's, for a status; zero when HEAD has
// no commit) with the index, descending only into directories whose
// hashes differ, so a clean index costs no object reads.
//
// A sparse-index directory entry the tree does not have is named by the
// files of its tree, as git names them (it expands such an entry to
// compare it), never by the directory.
func DiffIndex(r *git.Repository, tree plumbing.Hash, idx *Index) (Staged, error) {
	entries := idx.Entries
	ch := Staged{}
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
	allIndex := func(prefix string) error {
		for _, e := range entries {
			switch {
			case !strings.HasPrefix(e.Name, prefix):
			case e.Mode == filemode.Dir && strings.HasSuffix(e.Name, "/"):
				if err := diffTrees(r, e.Name, plumbing.ZeroHash, e.Hash, ch); err != nil {
					return fmt.Errorf("expand sparse directory %s: %w", e.Name, err)
				}
			default:
				ch[e.Name] = git.Added
			}
		}
		return nil
	}
	if tree == plumbing.ZeroHash {
		if err := allIndex(""); err != nil {
			return nil, err
		}
		return ch, nil
	}
	// A clean index hashes to HEAD's tree: nothing is staged, and nothing
	// is built per directory to say so.
	if TreeHash(entries) == tree {
		return ch, nil
	}
	trees := buildIndexTrees(entries)
	var dir func(path string, h plumbing.Hash) error
	dir = func(path string, h plumbing.Hash) error {
		it := trees[path]
		if it != nil && it.hash == h {
			return nil
		}
		if it != nil && it.sparse {
			return diffTrees(r, path+"/", h, it.hash, ch)
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
			kids = it.children(entries, trees, prefix)
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
				c = TreeOrder(t.Entries[i].Name, t.Entries[i].Mode == filemode.Dir, kids[j].name, kids[j].dir)
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
					if err := allIndex(prefix + k.name + "/"); err != nil {
						return err
					}
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
				} else if he.Mode&modeTypeMask != k.mode&modeTypeMask {
					// A type change (file, symlink, gitlink): git's "T".
					ch[prefix+k.name] = 'T'
				} else if he.Hash != k.hash || he.Mode != k.mode {
					ch[prefix+k.name] = git.Modified
				}
				i++
				j++
			}
		}
		return nil
	}
	if err := dir("", tree); err != nil {
		return nil, err
	}
	return ch, nil
}

// TreeOrder orders names the way git orders tree entries: a directory
// sorts as if its name ended in "/". A file and a directory of the same
// name are different entries. Listing each directory in this order, with a
// subdirectory's contents at its place, orders full paths bytewise.
func TreeOrder(a string, aDir bool, b string, bDir bool) int {
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

// diffTrees records how tree b differs from tree a (both in the object
// store) under prefix: the expansion of a sparse-index directory whose
// hash differs from HEAD's (a is zero where HEAD has no such directory).
func diffTrees(r *git.Repository, prefix string, a, b plumbing.Hash, ch Staged) error {
	list := func(h plumbing.Hash) (map[string]object.TreeEntry, error) {
		out := map[string]object.TreeEntry{}
		if h == plumbing.ZeroHash {
			return out, nil
		}
		t, err := r.TreeObject(h)
		if err != nil {
			return nil, fmt.Errorf("read tree %s: %w", h, err)
		}
		for _, e := range t.Entries {
			out[e.Name] = e
		}
		return out, nil
	}
	ea, err := list(a)
	if err != nil {
		return err
	}
	eb, err := list(b)
	if err != nil {
		return err
	}
	for name, x := range ea {
		y, ok := eb[name]
		switch {
		case x.Mode == filemode.Dir && ok && y.Mode == filemode.Dir:
			if x.Hash != y.Hash {
				if err := diffTrees(r, prefix+name+"/", x.Hash, y.Hash, ch); err != nil {
					return err
				}
			}
		case x.Mode == filemode.Dir:
			if err := diffTrees(r, prefix+name+"/", x.Hash, plumbing.ZeroHash, ch); err != nil {
				return err
			}
			if ok {
				ch[prefix+name] = git.Added
			}
		case !ok:
			ch[prefix+name] = git.Deleted
		case y.Mode == filemode.Dir:
			ch[prefix+name] = git.Deleted
		case x.Hash != y.Hash || x.Mode != y.Mode:
			ch[prefix+name] = git.Modified
		}
	}
	for name, y := range eb {
		x, ok := ea[name]
		switch {
		case y.Mode == filemode.Dir && (!ok || x.Mode != filemode.Dir):
			if err := diffTrees(r, prefix+name+"/", plumbing.ZeroHash, y.Hash, ch); err != nil {
				return err
			}
		case !ok:
			ch[prefix+name] = git.Added
		}
	}
	return nil
}
