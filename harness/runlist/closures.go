package runlist

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// closuresDir is the runs directory's shared closures (store.ClosuresDir:
// the base histories runs' stores name by their alternates).
const closuresDir = "closures"

// ClosuresPruned says what became of the shared closures.
type ClosuresPruned struct {
	Removed []string `json:"removed"`
	Kept    int      `json:"kept"`
	// Waiting says why none was removed ("" when the pass ran): a run in
	// progress may be about to name one it just made.
	Waiting    string `json:"waiting,omitempty"`
	FreedBytes int64  `json:"freed_bytes"`
}

// PruneClosures removes the shared closures of runsDir that no run
// directory's store names (and half-made ones), once the runs themselves
// were pruned; gone are the runs of removed, which a dry run still finds
// on disk. While any run of runsDir is in progress (see Hold) nothing is
// removed: between making a closure and naming it in its store, a run's
// closure is named by nobody.
func PruneClosures(runsDir string, removed []Run, dryRun bool) (ClosuresPruned, error) {
	p := ClosuresPruned{Removed: []string{}}
	root := filepath.Join(runsDir, closuresDir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("list the shared closures in %s: %w", root, err)
	}
	named, live, err := namedClosures(runsDir, removed)
	if err != nil {
		return p, err
	}
	if live != "" {
		p.Kept, p.Waiting = len(entries), "the run "+live+" is in progress"
		return p, nil
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if named[dir] {
			p.Kept++
			continue
		}
		size := diskUse(dir)
		if !dryRun {
			if err := RemoveTree(dir); err != nil {
				return p, fmt.Errorf("remove the shared closure %s: %w", dir, err)
			}
		}
		p.Removed = append(p.Removed, dir)
		p.FreedBytes += size
	}
	return p, nil
}

// namedClosures are the closure directories the stores of runsDir's run
// directories name (but those of removed), and a run in progress ("" when
// none is). A store whose alternates cannot be read keeps every closure.
func namedClosures(runsDir string, removed []Run) (map[string]bool, string, error) {
	gone := map[string]bool{}
	for _, r := range removed {
		gone[filepath.Clean(r.Dir)] = true
	}
	entries, err := os.ReadDir(runsDir)
	if err != nil {
		return nil, "", fmt.Errorf("list runs in %s: %w", runsDir, err)
	}
	named := map[string]bool{}
	for _, e := range entries {
		dir := filepath.Join(runsDir, e.Name())
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == closuresDir || gone[dir] {
			continue
		}
		if held(dir) {
			return nil, e.Name(), nil
		}
		objects := filepath.Join(dir, "store", "objects")
		lines, err := alternates(objects)
		if err != nil {
			return nil, "", fmt.Errorf("read the store of %s: %w; nothing of %s was removed", dir, err, closuresDir)
		}
		for _, l := range lines {
			if !filepath.IsAbs(l) {
				l = filepath.Join(objects, l)
			}
			// A store names <closure>/objects.
			named[filepath.Dir(filepath.Clean(l))] = true
		}
	}
	return named, "", nil
}

// alternates are the object directories objects/info/alternates names (none
// when there is no such file).
func alternates(objects string) ([]string, error) {
	f, err := os.Open(filepath.Join(objects, "info", "alternates"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, filepath.FromSlash(l))
		}
	}
	return out, sc.Err()
}
