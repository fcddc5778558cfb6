package runlist

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Pruned says what Prune removed and what it kept.
type Pruned struct {
	Removed []Run `json:"removed"`
	Kept    []Run `json:"kept"`
}

// Prune keeps the newest keep runs and every run a stage validation record
// names, and removes the rest with their runtime workspaces. With dryRun it
// only reports. Directories without a readable report are never touched.
func Prune(runsDir string, keep int, dryRun bool) (Pruned, error) {
	if keep < 0 {
		return Pruned{}, fmt.Errorf("--keep %d: keep a number of runs, zero or more", keep)
	}
	runs, err := List(runsDir, Filter{})
	if err != nil {
		return Pruned{}, err
	}
	var p Pruned
	for i, r := range runs {
		if i < keep || r.Protected || r.Problem != "" {
			p.Kept = append(p.Kept, r)
			continue
		}
		if !dryRun {
			if err := removeAll(r.Dir); err != nil {
				return p, fmt.Errorf("remove run %s: %w", r.Dir, err)
			}
			if err := removeAll(filepath.Join(runsDir, ".work", filepath.Base(r.Dir))); err != nil {
				return p, fmt.Errorf("remove the workspace of run %s: %w", r.RunID, err)
			}
		}
		p.Removed = append(p.Removed, r)
	}
	return p, nil
}

// removeAll also removes trees with read-only directories (a Go module cache
// in a run's scratch is made read-only by go itself).
func removeAll(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
