package runlist

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// MatrixDir is the directory of a runs directory that holds the failure
// matrix's replays: one folder per replay of a row
// (RUNS_DIR/matrix/<row>-<number>), with the row's own runs directory in it.
const MatrixDir = "matrix"

// KeptMarker is a file in a replay's folder that keeps the folder past
// pruning: 'fixtures replay --keep' writes it, and anyone may create it.
const KeptMarker = "kept"

// latestReplayFile, in MatrixDir, names the folders of the newest full
// replay of the matrix. Prune keeps them, so the evidence the last stage 3
// validation reported stays where it said; every earlier replay is
// superseded by it.
const latestReplayFile = "latest-replay.json"

// LatestReplay is the content of RUNS_DIR/matrix/latest-replay.json.
type LatestReplay struct {
	ReplayedAt time.Time `json:"replayed_at"`
	// Folders are the replay's folders, by name under RUNS_DIR/matrix.
	Folders []string `json:"folders"`
}

// WriteLatestReplay records r as the newest full replay of the matrix in
// runsDir, replacing the file in one rename so that a reader never sees
// half of it.
func WriteLatestReplay(runsDir string, r LatestReplay) error {
	dir := filepath.Join(runsDir, MatrixDir)
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, latestReplayFile+".*")
	if err != nil {
		return fmt.Errorf("record the latest failure-matrix replay in %s: %w", dir, err)
	}
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, latestReplayFile))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("record the latest failure-matrix replay in %s: %w", dir, err)
	}
	return nil
}

// latestFolders reads the folders of the latest full replay; none when the
// matrix was never replayed in full. A file that cannot be read is an
// error: the folders it protects would be unknown.
func latestFolders(matrix string) (map[string]bool, error) {
	p := filepath.Join(matrix, latestReplayFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the latest failure-matrix replay %s: %w", p, err)
	}
	var r LatestReplay
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("the latest failure-matrix replay %s is malformed, so the folders it keeps are unknown; fix or remove it first: %w", p, err)
	}
	out := map[string]bool{}
	for _, f := range r.Folders {
		out[f] = true
	}
	return out, nil
}

// MatrixFolder is one replay folder that pruning looked at.
type MatrixFolder struct {
	Dir       string `json:"dir"`
	SizeBytes int64  `json:"size_bytes"`
	// KeptBecause says why a kept folder stays: "latest replay", "named by
	// <what>", "kept on request", "in progress" or "mounted".
	KeptBecause string `json:"kept_because,omitempty"`
}

// MatrixPruned says which replay folders PruneMatrix removed and kept.
type MatrixPruned struct {
	Removed    []MatrixFolder `json:"removed"`
	Kept       []MatrixFolder `json:"kept"`
	FreedBytes int64          `json:"freed_bytes"`
}

// PruneMatrix removes the failure-matrix replay folders of runsDir that
// nothing needs any more: it keeps the folders of the latest full replay,
// every folder a stage validation record or a batch's trial record names a
// run in, every folder holding the kept marker, every folder a replay in
// progress holds (see Hold) and every folder with a mount below it. Only
// real directories directly under RUNS_DIR/matrix are removed; a symbolic
// link is never followed. With dryRun it only reports.
func PruneMatrix(runsDir string, dryRun bool) (MatrixPruned, error) {
	p := MatrixPruned{Removed: []MatrixFolder{}, Kept: []MatrixFolder{}}
	matrix := filepath.Join(runsDir, MatrixDir)
	fi, err := os.Lstat(matrix)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return p, nil
	case err != nil:
		return p, fmt.Errorf("look at the failure-matrix replays in %s: %w", matrix, err)
	case !fi.IsDir():
		return p, fmt.Errorf("%s is not a directory (a symbolic link?); prune removes nothing through it", matrix)
	}
	named, err := Protected(runsDir)
	if err != nil {
		return p, err
	}
	latest, err := latestFolders(matrix)
	if err != nil {
		return p, err
	}
	mounts, err := mountsBelow(matrix)
	if err != nil {
		return p, err
	}
	entries, err := os.ReadDir(matrix)
	if err != nil {
		return p, fmt.Errorf("list the failure-matrix replays in %s: %w", matrix, err)
	}
	for _, e := range entries {
		if !e.IsDir() { // the latest-replay file, a symbolic link: not a folder
			continue
		}
		dir := filepath.Join(matrix, e.Name())
		f := MatrixFolder{Dir: dir, SizeBytes: diskUse(dir)}
		f.KeptBecause = keepReason(dir, latest[e.Name()], named, mounts)
		if f.KeptBecause != "" {
			p.Kept = append(p.Kept, f)
			continue
		}
		if !dryRun {
			if err := RemoveTree(dir); err != nil {
				return p, fmt.Errorf("remove the failure-matrix replay %s: %w", dir, err)
			}
		}
		p.Removed = append(p.Removed, f)
		p.FreedBytes += f.SizeBytes
	}
	return p, nil
}

// keepReason says why the replay folder dir must stay, "" when nothing needs it.
func keepReason(dir string, latest bool, named map[string]string, mounts []string) string {
	if latest {
		return "latest replay"
	}
	for k, by := range named {
		if filepath.IsAbs(k) && within(dir, k) {
			return "named by " + by
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, KeptMarker)); err == nil {
		return "kept on request"
	}
	if held(dir) {
		return "in progress"
	}
	for _, m := range mounts {
		if within(dir, m) {
			return "mounted"
		}
	}
	return ""
}

// within reports whether p is dir or lies below it.
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// mountsBelow lists the mount points strictly below dir.
func mountsBelow(dir string) ([]string, error) {
	all, err := mountPoints()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, mp := range all {
		if mp != dir && within(dir, mp) {
			out = append(out, mp)
		}
	}
	sort.Strings(out)
	return out, nil
}
