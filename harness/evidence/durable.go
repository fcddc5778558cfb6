package evidence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Evidence must survive a crash once anything depends on it: a stage gate
// trusts a record, a validator re-derives the patch from the store, a
// signature covers a report. A rename alone is not durable: until the file
// and then its directory are synced, a power loss can leave the new name
// pointing at an empty file, or no name at all.

// Syncer makes an open file or directory durable: fsync(2) by default
// (Fsync); the benchmark injects one that times it.
type Syncer func(f *os.File) error

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
	return writeDurable(Fsync, path, data, perm, true)
}

// writeDurable is WriteDurable with s, and without the syncs when durable
// is false (a later syncRun covers them).
func writeDurable(s Syncer, path string, data []byte, perm os.FileMode, durable bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), tempPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil && durable {
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
	if !durable {
		return nil
	}
	return syncPath(s, filepath.Dir(path))
}

// WithSync replaces Fsync for this directory's writes.
func (d *Dir) WithSync(s Syncer) { d.sync = s }

// syncer is the directory's Syncer.
func (d *Dir) syncer() Syncer {
	if d.sync == nil {
		return Fsync
	}
	return d.sync
}

// syncRun makes every artifact written so far durable, with the
// directories that hold them and the run directory's own entry in the runs
// directory: the artifacts (each renamed into place, or streamed: the logs
// and the event log), the proofs, and the store the validator re-derives
// the patch from. The fixture is not synced: nothing is re-derived from
// it. Files and directories are synced in parallel (both must be durable
// before the report, in no order between them): concurrent fsyncs share
// the filesystem's journal commits, where one after the other each would
// wait for a commit of its own.
func (d *Dir) syncRun() error {
	names, err := ListArtifacts(d.root)
	if err != nil {
		return err
	}
	var files []string
	dirs := map[string]bool{d.root: true, filepath.Dir(d.root): true, d.Path(BackendDir): true, d.Path(proofsDir): true}
	for _, p := range d.made {
		dirs[filepath.Dir(p)] = true // a new runs directory's own entry
	}
	for _, n := range names {
		p := d.Path(n)
		files = append(files, p)
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
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for p := range dirs {
		files = append(files, p)
	}
	return syncAll(d.syncer(), files)
}

// syncParallel bounds the fsyncs syncAll has in flight.
const syncParallel = 16

// syncAll syncs every path, up to syncParallel at a time, and returns the
// errors.
func syncAll(s Syncer, paths []string) error {
	errs := make([]error, len(paths))
	sem := make(chan struct{}, syncParallel)
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			errs[i] = syncPath(s, p)
			<-sem
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// mkdirAll is os.MkdirAll that returns the directories it made, outermost
// first, so that their entries can be synced too.
func mkdirAll(dir string) ([]string, error) {
	var made []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		made = append([]string{p}, made...)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return made, nil
}

// MkdirDurable makes dir and any missing parents, and syncs the directory
// above each one it made, so the new entries survive a crash.
func MkdirDurable(dir string) error {
	made, err := mkdirAll(dir)
	if err != nil {
		return err
	}
	for _, p := range made {
		if err := syncPath(Fsync, filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}
