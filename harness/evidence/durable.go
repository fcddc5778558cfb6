package evidence

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Evidence must survive a crash once anything depends on it: a stage gate
// trusts a record, a validator re-derives the patch from the store, a
// signature covers a report. A rename alone is not durable: until the file
// and then its directory are synced, a power loss can leave the new name
// pointing at an empty file, or no name at all.

// Syncer makes one open file or directory durable: fsync(2) by default. A
// test injects one to see where syncs happen; the benchmark times them.
type Syncer func(*os.File) error

// Fsync is the default Syncer.
func Fsync(f *os.File) error { return f.Sync() }

// syncPath opens p (a file or a directory) read-only and syncs it.
func syncPath(s Syncer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = s(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return nil
}

// WriteDurable writes data at path atomically and durably: a temporary
// file in the same directory is written and synced, renamed over path, and
// the directory synced. A reader never sees a partial file, and once it
// returns a crash cannot lose it.
func WriteDurable(path string, data []byte, perm os.FileMode) error {
	return writeDurable(Fsync, path, data, perm)
}

func writeDurable(s Syncer, path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), tempPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = s(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncPath(s, filepath.Dir(path))
}

// WithSync replaces fsync(2) for this directory's writes.
func (d *Dir) WithSync(s Syncer) { d.syncer = s }

// syncFile syncs f with the directory's Syncer and adds the time it took.
func (d *Dir) syncFile(f *os.File) error {
	s := d.syncer
	if s == nil {
		s = Fsync
	}
	start := time.Now()
	err := s(f)
	d.mu.Lock()
	d.syncTime += time.Since(start)
	d.mu.Unlock()
	return err
}

// SyncTime is the time spent syncing so far.
func (d *Dir) SyncTime() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.syncTime
}

// syncTree makes every artifact written so far durable before the report
// that digests them: the streamed logs and the event log (appended, never
// renamed into place), the proofs, the store's objects and refs that the
// validator re-derives the patch from, every directory that holds them, and
// the run directory's own entry in the runs directory. The fixture is not
// synced: nothing is re-derived from it.
func (d *Dir) syncTree() error {
	names, err := ListArtifacts(d.root)
	if err != nil {
		return err
	}
	dirs := map[string]bool{d.root: true, filepath.Dir(d.root): true}
	for _, n := range names {
		p := d.Path(n)
		if err := d.syncOne(p); err != nil {
			return err
		}
		dirs[filepath.Dir(p)] = true
	}
	store := d.Path(StoreDir)
	if _, err := os.Lstat(store); err == nil {
		err := filepath.WalkDir(store, func(p string, de fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case de.IsDir():
				dirs[p] = true
			case de.Type().IsRegular():
				return d.syncOne(p)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Deepest first, so each directory is synced after what it holds.
	order := make([]string, 0, len(dirs))
	for p := range dirs {
		order = append(order, p)
	}
	sortDeepestFirst(order)
	for _, p := range order {
		if err := d.syncOne(p); err != nil {
			return err
		}
	}
	return nil
}

func (d *Dir) syncOne(p string) error {
	return syncPath(d.syncFile, p)
}

// sortDeepestFirst orders paths so that every path comes before its parents.
func sortDeepestFirst(paths []string) {
	sort.Slice(paths, func(i, j int) bool {
		di, dj := strings.Count(paths[i], string(filepath.Separator)), strings.Count(paths[j], string(filepath.Separator))
		if di != dj {
			return di > dj
		}
		return paths[i] < paths[j]
	})
}
