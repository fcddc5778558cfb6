package runlist

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cto-harness/cto-harness/harness/snapshot"
)

// Pruned says what Prune removed and what it kept.
type Pruned struct {
	Removed []Run `json:"removed"`
	Kept    []Run `json:"kept"`
	// Orphans are workspaces (RUNS_DIR/work/<id>) whose run directory is
	// gone: left by a run that was killed, or by a removal by hand.
	Orphans []string `json:"orphaned_workspaces"`
	// Unmounted are mounts a killed run left below the runs directory (an
	// overlay fixture or verification checkout), detached so that the
	// directories under them can be removed.
	Unmounted []string `json:"unmounted"`
	// Caches are the kept build cache layers removed with --caches
	// (RUNS_DIR/.cache/go-build/<key>, see harness/keptcache.go).
	Caches []string `json:"removed_caches,omitempty"`
	// Matrix is what became of the failure-matrix replays (see PruneMatrix).
	Matrix MatrixPruned `json:"matrix"`
	// Snapshots is what became of the snapshots (snapshot.Prune).
	Snapshots snapshot.Pruned `json:"snapshots"`
	// Closures is what became of the shared closures (PruneClosures).
	Closures ClosuresPruned `json:"closures"`
	// FreedBytes is the disk space given back: removed runs with their
	// workspaces, orphaned workspaces, matrix replays and caches.
	FreedBytes int64 `json:"freed_bytes"`
}

// PruneCaches removes every kept build cache layer (and any a killed run
// left half made) under runsDir; the next run of each source warms up
// again. With dryRun it only lists them. It returns the layers and their
// disk use.
func PruneCaches(runsDir string, dryRun bool) ([]string, int64, error) {
	dir := filepath.Join(runsDir, ".cache", "go-build")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("list the kept build caches in %s: %w", dir, err)
	}
	var out []string
	var freed int64
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		size := diskUse(p)
		if !dryRun {
			if err := RemoveTree(p); err != nil {
				return out, freed, fmt.Errorf("remove the kept build cache %s: %w", p, err)
			}
		}
		out = append(out, p)
		freed += size
	}
	return out, freed, nil
}

// Prune keeps the newest keep runs and every run a stage validation record
// names, and removes the rest with their runtime workspaces, then the
// shared closures no remaining run's store names (see PruneClosures), then
// the failure-matrix replays nothing needs (see PruneMatrix). Mounts a killed
// run left below runsDir (no live process holds its directory, see Hold) are
// detached first. With dryRun it only reports. Directories without a
// readable report are never removed.
func Prune(runsDir string, keep int, dryRun bool) (Pruned, error) {
	if keep < 0 {
		return Pruned{}, fmt.Errorf("--keep %d: keep a number of runs, zero or more", keep)
	}
	var p Pruned
	// First the mounts of runs that were killed: removing a directory
	// through a mount would only write whiteouts into the run's layer.
	stale, err := unmountStale(runsDir, dryRun)
	p.Unmounted = append([]string{}, stale...)
	if err != nil {
		return p, err
	}
	runs, err := List(runsDir, Filter{})
	if err != nil {
		return p, err
	}
	for i, r := range runs {
		if i < keep || r.Protected || r.Problem != "" {
			p.Kept = append(p.Kept, r)
			continue
		}
		if !dryRun {
			if err := RemoveTree(r.Dir); err != nil {
				return p, fmt.Errorf("remove run %s: %w", r.Dir, err)
			}
			for _, w := range []string{WorkDir, legacyWorkDir} {
				if err := RemoveTree(filepath.Join(runsDir, w, filepath.Base(r.Dir))); err != nil {
					return p, fmt.Errorf("remove the workspace of run %s: %w", r.RunID, err)
				}
			}
		}
		p.Removed = append(p.Removed, r)
		p.FreedBytes += r.SizeBytes
	}
	orphans, err := orphanWorkspaces(runsDir)
	if err != nil {
		return p, err
	}
	for _, w := range orphans {
		size := diskUse(w)
		if !dryRun {
			if err := RemoveTree(w); err != nil {
				return p, fmt.Errorf("remove the orphaned workspace %s: %w", w, err)
			}
		}
		p.Orphans = append(p.Orphans, w)
		p.FreedBytes += size
	}
	if p.Closures, err = PruneClosures(runsDir, p.Removed, dryRun); err != nil {
		return p, err
	}
	p.FreedBytes += p.Closures.FreedBytes
	p.Matrix, err = PruneMatrix(runsDir, dryRun)
	p.FreedBytes += p.Matrix.FreedBytes
	return p, err
}

// orphanWorkspaces lists the workspaces whose run directory does not exist.
// A run in progress has its directory before its workspace, so it is never
// one.
func orphanWorkspaces(runsDir string) ([]string, error) {
	var out []string
	for _, w := range []string{WorkDir, legacyWorkDir} {
		entries, err := os.ReadDir(filepath.Join(runsDir, w))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list the workspaces in %s: %w", runsDir, err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			if _, err := os.Lstat(filepath.Join(runsDir, e.Name())); errors.Is(err, os.ErrNotExist) {
				out = append(out, filepath.Join(runsDir, w, e.Name()))
			}
		}
	}
	return out, nil
}

// RemoveTree removes p and everything under it, also trees with read-only
// directories (a Go module cache in a run's scratch is made read-only by go
// itself).
func RemoveTree(p string) error {
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
