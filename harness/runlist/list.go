// Package runlist reads a runs directory as a list of runs, newest first,
// and prunes old runs and superseded failure-matrix replays without ever
// deleting one that a stage validation record names.
package runlist

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// WorkDir is the directory of a runs directory that holds the runs'
// workspaces (RUNS_DIR/work/<run_id>: Case's scratch and the verification
// checkout). It does not start with a dot: commands run in checkouts under
// it, and some test suites refuse every file whose absolute path has a
// hidden segment (express's res.sendFile, through send's dotfiles rule).
const WorkDir = "work"

// legacyWorkDir is where earlier versions kept the workspaces; prune and the
// stale-mount sweep still clear it.
const legacyWorkDir = ".work"

// Run is one line of the list.
type Run struct {
	RunID      string             `json:"run_id"`
	Dir        string             `json:"run_dir"`
	Stage      int                `json:"stage"`
	Lane       string             `json:"lane"`
	Agent      string             `json:"agent,omitempty"`
	Source     string             `json:"source"` // the source repository's real path (report.json's source_path)
	Status     ctoharness.Status  `json:"status"`
	Outcome    ctoharness.Outcome `json:"outcome,omitempty"`
	Blockers   []string           `json:"blockers"`
	StartedAt  time.Time          `json:"started_at"`
	DurationMs int64              `json:"duration_ms"`
	// SizeBytes is the run's whole disk use: its directory and its
	// workspace (RUNS_DIR/work/<id>), which WorkBytes is of it.
	SizeBytes int64 `json:"size_bytes"`
	WorkBytes int64 `json:"work_bytes"`
	// Usage is an agent run's model spend (null for other runs and for
	// agents that never started).
	Usage     *ctoharness.ModelUsage `json:"usage,omitempty"`
	Protected bool                   `json:"protected"` // a stage validation record or a batch's trial record names it
	// ProtectedBy says what names it: "stage record" or "batch <id>".
	ProtectedBy string `json:"protected_by,omitempty"`
	Problem     string `json:"problem,omitempty"`
}

// summary is the part of report.json the list needs; decoding only it keeps
// a list of a thousand runs fast.
type summary struct {
	RunID    string               `json:"run_id"`
	Stage    int                  `json:"stage"`
	Status   ctoharness.Status    `json:"status"`
	Outcome  ctoharness.Outcome   `json:"outcome"`
	CaseLane string               `json:"case_lane"`
	Source   string               `json:"source_path"`
	Blockers []ctoharness.Blocker `json:"blockers"`
	Agent    *struct {
		Name  string                 `json:"name"`
		Usage *ctoharness.ModelUsage `json:"usage"`
	} `json:"agent"`
	Freshness struct {
		StartedAt  time.Time `json:"started_at"`
		FinishedAt time.Time `json:"finished_at"`
	} `json:"freshness"`
}

// Filter selects runs; zero values select everything.
type Filter struct {
	Status ctoharness.Status
	Stage  int
	// Source selects the runs of one source repository. A run records the
	// source's real path, so the path given is made absolute and resolved
	// through symlinks when it exists.
	Source string
}

// source is the filter's source as the runs record it.
func (f Filter) source() string {
	if f.Source == "" {
		return ""
	}
	p, err := filepath.Abs(f.Source)
	if err != nil {
		return filepath.Clean(f.Source)
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}

// List reads every run directory directly under runsDir (a directory with a
// report.json), newest first. A run whose report cannot be read is listed
// with its problem rather than hidden.
func List(runsDir string, f Filter) ([]Run, error) {
	entries, err := os.ReadDir(runsDir)
	if err != nil {
		return nil, fmt.Errorf("list runs in %s: %w", runsDir, err)
	}
	protected, err := Protected(runsDir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	// A few readers at once: the work is small reads and stats, and on a busy
	// machine several runnable threads finish sooner than one.
	runs := make([]*Run, len(dirs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range listWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				runs[i] = read(runsDir, dirs[i])
			}
		}()
	}
	for i := range dirs {
		next <- i
	}
	close(next)
	wg.Wait()
	var out []Run
	src := f.source()
	for _, r := range runs {
		if r == nil {
			continue // not a run: validation/, sources/, matrix/
		}
		if by := firstNonEmpty(protected[r.RunID], protected[r.Dir]); by != "" {
			r.Protected, r.ProtectedBy = true, by
		}
		if (f.Status != "" && r.Status != f.Status) || (f.Stage != 0 && r.Stage != f.Stage) || (src != "" && r.Source != src) {
			continue
		}
		out = append(out, *r)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.After(out[j].StartedAt)
		}
		return out[i].RunID > out[j].RunID
	})
	return out, nil
}

const listWorkers = 4

// read loads one directory's run, or nil when it holds no report.json. A run
// whose report cannot be read is returned with its problem rather than hidden.
func read(runsDir, name string) *Run {
	dir := filepath.Join(runsDir, name)
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	r := &Run{RunID: name, Dir: dir, Blockers: []string{}}
	var s summary
	switch {
	case err != nil:
		r.Problem = err.Error()
	case json.Unmarshal(data, &s) != nil:
		r.Problem = "report.json is not valid JSON"
	default:
		r.fill(s)
	}
	r.WorkBytes = diskUse(filepath.Join(runsDir, WorkDir, name))
	r.SizeBytes = diskUse(dir) + r.WorkBytes
	return r
}

// diskUse is what the tree at p occupies on disk (allocated blocks, so
// sparse and small files count as they cost); 0 when it does not exist.
func diskUse(p string) int64 {
	var n int64
	seen := map[uint64]bool{} // a file linked twice (a closure's layer) uses its blocks once
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				if st.Nlink > 1 && !d.IsDir() {
					if seen[st.Ino] {
						return nil
					}
					seen[st.Ino] = true
				}
				n += st.Blocks * 512
			} else {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

func (r *Run) fill(s summary) {
	if s.RunID != "" {
		r.RunID = s.RunID
	}
	r.Stage, r.Status, r.Lane, r.Outcome, r.Source = s.Stage, s.Status, s.CaseLane, s.Outcome, s.Source
	if s.Agent != nil {
		r.Agent, r.Usage = s.Agent.Name, s.Agent.Usage
		if r.Usage != nil {
			r.Usage.PerRequest = []ctoharness.ModelRequest{} // the list shows totals; report.json has the requests
		}
	}
	for _, b := range s.Blockers {
		r.Blockers = append(r.Blockers, string(b.Code))
	}
	r.StartedAt = s.Freshness.StartedAt
	if !s.Freshness.FinishedAt.IsZero() {
		r.DurationMs = s.Freshness.FinishedAt.Sub(s.Freshness.StartedAt).Milliseconds()
	}
}

// RecordsDir is where the stage validation records live in a runs directory.
func RecordsDir(runsDir string) string { return filepath.Join(runsDir, "validation") }

// Protected returns the run ids and run directories that stage validation
// records and batches' trial records (RUNS_DIR/batches/<id>/trials/*.json)
// name, each with what names it. A record that cannot be read makes it an
// error: without it, nobody can say which run must be kept.
func Protected(runsDir string) (map[string]string, error) {
	out := map[string]string{}
	add := func(runID, runDir, by string) {
		if runID != "" && out[runID] == "" {
			out[runID] = by
		}
		if runDir != "" && out[filepath.Clean(runDir)] == "" {
			out[filepath.Clean(runDir)] = by
		}
	}
	paths, err := filepath.Glob(filepath.Join(RecordsDir(runsDir), "stage-*.json"))
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if strings.HasSuffix(p, ".dsse.json") {
			continue // a record's signature, next to it; the record names the run
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read stage record %s: %w", p, err)
		}
		var rec struct {
			RunID  string `json:"run_id"`
			RunDir string `json:"run_dir"`
		}
		if err := json.Unmarshal(data, &rec); err != nil || (rec.RunID == "" && rec.RunDir == "") {
			return nil, fmt.Errorf("stage record %s is malformed, so the run it protects is unknown; fix or remove it first", p)
		}
		add(rec.RunID, rec.RunDir, "stage record")
	}
	// Every attempt a batch recorded: its summary and 'batch verify' read
	// them, and a resumed batch would run a pruned trial again.
	trials, err := filepath.Glob(filepath.Join(runsDir, "batches", "*", "trials", "*.json"))
	if err != nil {
		return nil, err
	}
	for _, p := range trials {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read batch trial record %s: %w", p, err)
		}
		var rec struct {
			Attempts []struct {
				RunID  string `json:"run_id"`
				RunDir string `json:"run_dir"`
			} `json:"attempts"`
			Interrupted []struct {
				RunID  string `json:"run_id"`
				RunDir string `json:"run_dir"`
			} `json:"interrupted"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, fmt.Errorf("batch trial record %s is malformed, so the runs it names are unknown; fix or remove it first: %w", p, err)
		}
		by := "batch " + filepath.Base(filepath.Dir(filepath.Dir(p)))
		for _, a := range append(rec.Attempts, rec.Interrupted...) {
			add(a.RunID, a.RunDir, by)
		}
	}
	return out, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
