package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// DefaultMaxBytes is the disk the snapshots of a runs directory may take
// after a prune when the config names no cap (snapshots.max_bytes).
const DefaultMaxBytes int64 = 2 << 30

// Entry is one snapshot as prune saw it.
type Entry struct {
	Key      string    `json:"key"`
	Dir      string    `json:"dir"`
	Bytes    int64     `json:"bytes"`
	LastUsed time.Time `json:"last_used"`
	// Held: a run was using it (or making it), so it was kept whatever
	// its age.
	Held bool `json:"held,omitempty"`
}

// Pruned is what Prune removed and kept, and the disk it gave back.
type Pruned struct {
	MaxBytes   int64   `json:"max_bytes"`
	Removed    []Entry `json:"removed"`
	Kept       []Entry `json:"kept"`
	FreedBytes int64   `json:"freed_bytes"`
}

// Prune removes the snapshots under root, least recently used first, until
// those left take at most maxBytes. A snapshot a run holds is never removed
// (prune takes its lock exclusively without waiting, and skips it when
// that fails) and still counts against the cap. A directory a killed run
// left half made (.make-KEY-*) is removed when no run is making KEY. With
// dryRun nothing is removed, and held snapshots are reported as they are.
func Prune(root string, maxBytes int64, dryRun bool) (Pruned, error) {
	p := Pruned{MaxBytes: maxBytes, Removed: []Entry{}, Kept: []Entry{}}
	if maxBytes < 0 {
		return p, fmt.Errorf("a snapshot cap of %d bytes: give zero or more", maxBytes)
	}
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("list the snapshots in %s: %w", root, err)
	}
	var all []Entry
	var total int64
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".make-") {
			freed, err := pruneLeftover(root, name, dryRun)
			p.FreedBytes += freed
			if err != nil {
				return p, err
			}
			continue
		}
		if !e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		en := Entry{Key: name, Dir: filepath.Join(root, name), Bytes: diskUse(filepath.Join(root, name)), LastUsed: lastUse(root, name)}
		all = append(all, en)
		total += en.Bytes
	}
	sort.Slice(all, func(i, j int) bool { return all[i].LastUsed.Before(all[j].LastUsed) })
	for _, en := range all {
		if total <= maxBytes {
			p.Kept = append(p.Kept, en)
			continue
		}
		removed, err := removeUnheld(root, en, dryRun)
		if err != nil {
			return p, err
		}
		if !removed {
			en.Held = true
			p.Kept = append(p.Kept, en)
			continue
		}
		total -= en.Bytes
		p.FreedBytes += en.Bytes
		p.Removed = append(p.Removed, en)
	}
	return p, nil
}

// removeUnheld removes one snapshot and its lock file unless a run holds
// it. The directory is first renamed out of the way under the lock, so that
// a run arriving meanwhile finds no snapshot (and makes it again) rather
// than a half-removed one.
func removeUnheld(root string, en Entry, dryRun bool) (bool, error) {
	lockPath := en.Dir + lockSuffix
	l, held, err := tryExclusive(lockPath)
	if err != nil || held {
		return false, err
	}
	defer l.close()
	if dryRun {
		return true, nil
	}
	gone := filepath.Join(root, fmt.Sprintf(".make-%s-pruned%d", en.Key, time.Now().UnixNano()))
	if err := os.Rename(en.Dir, gone); err != nil {
		return false, fmt.Errorf("move the snapshot %s aside to remove it: %w", en.Dir, err)
	}
	if err := removeTree(gone); err != nil {
		return false, fmt.Errorf("remove the snapshot %s: %w", en.Dir, err)
	}
	if err := os.Remove(lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove the snapshot lock %s: %w", lockPath, err)
	}
	return true, nil
}

// pruneLeftover removes a half-made snapshot directory unless a run is
// making its key now (and holds the key's lock).
func pruneLeftover(root, name string, dryRun bool) (int64, error) {
	key, _, _ := strings.Cut(strings.TrimPrefix(name, ".make-"), "-")
	p := filepath.Join(root, name)
	l, held, err := tryExclusive(filepath.Join(root, key+lockSuffix))
	if err != nil || held {
		return 0, err
	}
	defer l.close()
	size := diskUse(p)
	if dryRun {
		return size, nil
	}
	if err := removeTree(p); err != nil {
		return 0, fmt.Errorf("remove the half-made snapshot %s: %w", p, err)
	}
	if !exists(filepath.Join(root, key)) {
		_ = os.Remove(l.path) // nothing left for it to guard
	}
	return size, nil
}

// lastUse is the mtime of the snapshot's lock file, which every run that
// opens it touches; the directory's own when the lock file is gone.
func lastUse(root, key string) time.Time {
	for _, p := range []string{filepath.Join(root, key+lockSuffix), filepath.Join(root, key)} {
		if fi, err := os.Lstat(p); err == nil {
			return fi.ModTime()
		}
	}
	return time.Time{}
}

// diskUse is what the tree at p occupies on disk (allocated blocks).
func diskUse(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
