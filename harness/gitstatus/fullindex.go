package gitstatus

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	ctoharness "github.com/cto-harness/cto-harness"
)

// ReadFullIndex reads gitDir/index with everything the status route
// models: every stage, the assume-unchanged, skip-worktree and
// intent-to-add flags, gitlinks, the directory entries of a sparse index,
// and a split index merged with its shared index. A missing index is an
// empty one, as git treats it. Entries are sorted by name, then stage.
func ReadFullIndex(gitDir string) (*Index, error) {
	return readFullIndex(gitDir, nil)
}

// readFullIndex is ReadFullIndex, its names made by name (decoding.name).
func readFullIndex(gitDir string, name func([]byte) string) (*Index, error) {
	f, mtime, err := readIndexFile(gitDir+"/index", name)
	if errors.Is(err, os.ErrNotExist) {
		return &Index{}, nil
	}
	if err != nil {
		return nil, err
	}
	entries := f.entries
	if f.link != nil {
		entries, err = mergeSplit(gitDir, f, name)
		if err != nil {
			return nil, err
		}
	}
	for i := 1; i < len(entries); i++ {
		if c := compareEntries(&entries[i-1], &entries[i]); c >= 0 {
			return nil, fmt.Errorf("index entries out of order or duplicated at %q", entries[i].Name)
		}
	}
	return &Index{Entries: entries, ModTime: mtime}, nil
}

// manifestNames hands out an index name as the manifest's own string for
// the same path, when it lists one: the status route then holds a million
// paths once, not once in the walk and again in the index. Names come in
// index order, the manifest's, so a cursor serves them; one that goes
// back (a split index's second file) is searched for.
type manifestNames struct {
	m []ctoharness.ManifestEntry
	j int
}

func (s *manifestNames) name(b []byte) string {
	if s.j > 0 && s.m[s.j-1].Path >= string(b) {
		s.j = sort.Search(len(s.m), func(i int) bool { return s.m[i].Path >= string(b) })
	}
	for s.j < len(s.m) && s.m[s.j].Path < string(b) {
		s.j++
	}
	if s.j < len(s.m) && s.m[s.j].Path == string(b) {
		s.j++
		return s.m[s.j-1].Path
	}
	return string(b)
}

func compareEntries(a, b *Entry) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(a.Stage, b.Stage)
}

// readIndexFile reads and decodes one index file without following a
// symlink or blocking on a pipe.
func readIndexFile(p string, name func([]byte) string) (*indexFile, time.Time, error) {
	fd, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("open index %s: %w", p, err)
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("stat index %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, time.Time{}, fmt.Errorf("index %s is a %v, not a file", p, fi.Mode().Type())
	}
	f, err := decodeIndexFrom(fd, fi.Size(), decoding{name: name})
	if errors.Is(err, errIndexFeature) {
		return nil, time.Time{}, refuse(ctoharness.BlockSourceGitFeature, "index %s: %v; the harness does not read it", p, err)
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("index %s: %w", p, err)
	}
	return f, fi.ModTime(), nil
}

// mergeSplit applies a split index to its shared index as git's
// merge_base_index does: replacements (nameless entries, in order) take
// the place of the shared entries their bitmap names, deletions drop
// shared entries, and the remaining entries are added.
func mergeSplit(gitDir string, f *indexFile, name func([]byte) string) ([]Entry, error) {
	var base []Entry
	if f.link.shared != plumbing.ZeroHash {
		shared, _, err := readIndexFile(gitDir+"/sharedindex."+f.link.shared.String(), name)
		if err != nil {
			return nil, fmt.Errorf("split index: %w", err)
		}
		if shared.link != nil {
			return nil, fmt.Errorf("split index: the shared index is itself split")
		}
		base = slices.Clone(shared.entries)
	}
	if len(f.link.replaced) > len(f.entries) {
		return nil, fmt.Errorf("split index: %d replacements for %d entries", len(f.link.replaced), len(f.entries))
	}
	for k, pos := range f.link.replaced {
		if pos >= len(base) || f.entries[k].Name != "" {
			return nil, fmt.Errorf("split index: bad replacement of shared entry %d", pos)
		}
		e := f.entries[k]
		e.Name = base[pos].Name
		base[pos] = e
	}
	gone := make(map[int]bool, len(f.link.delete))
	for _, pos := range f.link.delete {
		if pos >= len(base) {
			return nil, fmt.Errorf("split index: deletion of shared entry %d beyond %d", pos, len(base))
		}
		gone[pos] = true
	}
	out := make([]Entry, 0, len(base)+len(f.entries))
	for i := range base {
		if !gone[i] {
			out = append(out, base[i])
		}
	}
	added := f.entries[len(f.link.replaced):]
	for i := range added {
		if added[i].Name == "" {
			return nil, fmt.Errorf("split index: added entry %d has no name", i)
		}
	}
	out = append(out, added...)
	// A later entry replaces an earlier one of the same name and stage.
	slices.SortStableFunc(out, func(a, b Entry) int { return compareEntries(&a, &b) })
	dedup := out[:0]
	for i := range out {
		if len(dedup) > 0 && compareEntries(&dedup[len(dedup)-1], &out[i]) == 0 {
			dedup[len(dedup)-1] = out[i]
			continue
		}
		dedup = append(dedup, out[i])
	}
	return dedup, nil
}

// sparseOverlaps lists the stage-0 entries that lie inside a sparse
// directory entry ("dir/") of the same index, which plumbing
// (update-index --cacheinfo) can add to a sparse index without expanding
// it. git compares the directory entry with HEAD as a whole and reports
// each such entry as added, whatever HEAD's tree holds at its path; the
// route does the same.
func sparseOverlaps(entries []Entry) map[string]bool {
	var out map[string]bool
	dir := ""
	for i := range entries {
		e := &entries[i]
		switch {
		case e.Mode&modeTypeMask == modeDir && e.Stage == 0 && strings.HasSuffix(e.Name, "/"):
			dir = e.Name
		case dir != "" && strings.HasPrefix(e.Name, dir):
			if e.Stage == 0 && !e.IntentToAdd {
				if out == nil {
					out = map[string]bool{}
				}
				out[e.Name] = true
			}
		default:
			dir = ""
		}
	}
	return out
}
