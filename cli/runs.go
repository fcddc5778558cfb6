package cli

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/snapshot"
)

// RunsCmd is `cto-harness runs`: the list by default, prune, and cost.
type RunsCmd struct {
	List  RunsListCmd  `cmd:"" default:"withargs" help:"List the runs, newest first (the default)."`
	Prune RunsPruneCmd `cmd:"" help:"Remove old runs, keeping the newest N and every run a stage validation record names, and the failure-matrix replays nothing needs."`
	Cost  RunsCostCmd  `cmd:"" help:"Sum what the runs cost from the cost ledger (RUNS_DIR/cost-ledger.jsonl), by day, agent, model or role."`
}

// Help explains runs.
func (RunsCmd) Help() string {
	return `'cto-harness runs' (or 'runs list') prints the runs of the runs directory as a table, newest first;
--json, --status, --stage and --source work without naming 'list'. 'runs prune --keep N' removes old runs.
'runs cost' sums the cost ledger every run appends to, which outlasts pruning.`
}

// RunsListCmd is `cto-harness runs [list]`.
type RunsListCmd struct {
	JSON   bool   `name:"json" help:"Print one JSON array of runs (run_id, run_dir, stage, lane, agent, source, status, blockers, started_at, duration_ms, size_bytes, protected)."`
	Status string `name:"status" enum:"pass,blocked,failed," default:"" help:"Only runs with this status: pass, blocked or failed."`
	Stage  int    `name:"stage" help:"Only runs of this stage."`
	Source string `name:"source" type:"path" placeholder:"PATH" help:"Only runs of this source repository (the path given to run --source; a symlink is resolved, as the run resolved it)."`
}

// Help explains the list.
func (RunsListCmd) Help() string {
	return `Reads every run directory directly under the runs directory (RUNS_DIR/<run_id>/report.json) and prints
a table, newest first: id, stage, lane (and agent), status, blocker codes, duration, the size of the
evidence files (the fixture copy is not counted), tokens, cost, and the source repository (its real
path; a stage 1 or 2 run without --source shows the built-in fixture's copy in its workspace). A '*' after the id marks a run a stage validation
record names. Runs under RUNS_DIR/matrix are failure-matrix replays and are not listed.`
}

// Run executes the command.
func (c *RunsListCmd) Run(g *Globals, env *Env) error {
	runs, err := runsDirAbs(g, env)
	if err != nil {
		return err
	}
	list, err := runlist.List(runs, runlist.Filter{Status: ctoharness.Status(c.Status), Stage: c.Stage, Source: c.Source})
	if err != nil {
		return usageError{err}
	}
	if c.JSON {
		if list == nil {
			list = []runlist.Run{}
		}
		return printJSON(env.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintf(env.Stdout, "no runs in %s%s\n", term(runs), term(c.filterNote()))
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTAGE\tLANE\tSTATUS\tBLOCKERS\tDURATION\tSIZE\tTOKENS\tCOST\tSOURCE")
	for _, r := range list {
		id := r.RunID
		if r.Protected {
			id += " *"
		}
		lane := r.Lane
		if r.Agent != "" {
			lane += "/" + r.Agent
		}
		status, blockers := string(r.Status), strings.Join(r.Blockers, ",")
		if r.Problem != "" {
			status, blockers = "unreadable", r.Problem
		}
		if blockers == "" {
			blockers = "-"
		}
		tokens, cost := "-", "-"
		if u := r.Usage; u != nil {
			tokens = fmt.Sprintf("%d in / %d out", u.InputUncached+u.CacheRead+u.CacheWrite, u.Output)
			cost = "not reported"
			if u.CostUSD != nil {
				cost = fmt.Sprintf("$%.4f", *u.CostUSD)
				if u.CostSource == ctoharness.CostEstimated {
					cost += " (est.)"
				}
			}
		}
		src := r.Source
		if src == "" {
			src = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", term(id), r.Stage, term(lane), term(status), term(blockers),
			(time.Duration(r.DurationMs) * time.Millisecond).String(), humanBytes(r.SizeBytes), tokens, cost, term(src))
	}
	return tw.Flush()
}

// filterNote names the filters that left the list empty.
func (c *RunsListCmd) filterNote() string {
	var f []string
	if c.Status != "" {
		f = append(f, "status "+c.Status)
	}
	if c.Stage != 0 {
		f = append(f, fmt.Sprintf("stage %d", c.Stage))
	}
	if c.Source != "" {
		f = append(f, "source "+c.Source)
	}
	if len(f) == 0 {
		return ""
	}
	return " with " + strings.Join(f, ", ")
}

// RunsPruneCmd is `cto-harness runs prune`.
type RunsPruneCmd struct {
	Keep   int  `name:"keep" required:"" help:"How many of the newest runs to keep."`
	Caches bool `name:"caches" help:"Also remove the Go build caches kept between runs (RUNS_DIR/.cache/go-build); the next run of each source warms up again."`
	DryRun bool `name:"dry-run" help:"Print what would be removed and remove nothing."`
	JSON   bool `name:"json" help:"Print one JSON object: removed and kept runs, the failure-matrix replays (matrix), the snapshots (snapshots), freed_bytes."`
	// SnapshotsMaxBytes overrides the config's snapshots.max_bytes (-1:
	// the config's, else snapshot.DefaultMaxBytes).
	SnapshotsMaxBytes int64 `name:"snapshots-max-bytes" default:"-1" help:"Disk the snapshots under RUNS_DIR/snapshots may take after the prune (default: the config's snapshots.max_bytes, else 2 GiB); 0 removes every snapshot no run holds."`
}

// Help explains prune.
func (RunsPruneCmd) Help() string {
	return `Removes every run directory under the runs directory except the newest --keep runs, every run that a
stage validation record (RUNS_DIR/validation/stage-N.json) names and every run a batch's trial record
(RUNS_DIR/batches/<id>/trials/*.json) names, together with its runtime workspace
(RUNS_DIR/work/<run_id>), and every workspace whose run directory is gone (a killed run's). First it
detaches the mounts a killed run left below the runs directory (its overlay fixture or verification
checkout); a run in progress holds a lock on its directory, and its mounts are never touched. Directories
whose report.json cannot be read are left alone. If a stage or trial record
cannot be read, nothing is removed: the run it protects would be unknown. To let a batch's runs go,
remove its directory (RUNS_DIR/batches/<id>) first. With --caches it also removes
the Go build caches kept between runs (caches.go); do that while no run is in progress.
It also removes the failure-matrix replays under RUNS_DIR/matrix that nothing needs: it keeps the folders
of the latest full replay (validate-stage 3, named in RUNS_DIR/matrix/latest-replay.json), any folder a
record names a run in, any folder holding a file named 'kept' ('fixtures replay --keep' writes one) and
any folder a replay in progress holds. --keep counts runs only. Then it removes the snapshots of commits
(RUNS_DIR/snapshots, the read-only trees sandboxed runs show Case), least recently used first, until the
rest take at most the cap (--snapshots-max-bytes, else the config's snapshots.max_bytes, else 2 GiB); a
snapshot a run in progress holds is never removed. The shared closures (RUNS_DIR/closures, the base
histories runs' stores name) go once no remaining run's store names them, and none while a run is in
progress. The last line says how much was freed.`
}

// Run executes the command.
func (c *RunsPruneCmd) Run(g *Globals, env *Env) error {
	_, cfg, runs, err := g.setup(env)
	if err != nil {
		return err
	}
	p, err := runlist.Prune(runs, c.Keep, c.DryRun)
	if err != nil {
		return usageError{err}
	}
	limit := c.SnapshotsMaxBytes
	if limit < 0 {
		limit = cfg.SnapshotMaxBytes(snapshot.DefaultMaxBytes)
	}
	p.Snapshots, err = snapshot.Prune(snapshot.Root(runs), limit, c.DryRun)
	p.FreedBytes += p.Snapshots.FreedBytes
	if err != nil {
		return err
	}
	if c.Caches {
		var freed int64
		p.Caches, freed, err = runlist.PruneCaches(runs, c.DryRun)
		p.FreedBytes += freed
		if err != nil {
			return err
		}
	}
	if c.JSON {
		if p.Removed == nil {
			p.Removed = []runlist.Run{}
		}
		if p.Kept == nil {
			p.Kept = []runlist.Run{}
		}
		return printJSON(env.Stdout, p)
	}
	verb := "removed"
	if c.DryRun {
		verb = "would remove"
	}
	for _, r := range p.Removed {
		fmt.Fprintf(env.Stdout, "%s %s\n", verb, term(r.Dir))
	}
	for _, m := range p.Unmounted {
		fmt.Fprintf(env.Stdout, "%s the mount %s (left by a run that was killed)\n", map[bool]string{true: "would detach", false: "detached"}[c.DryRun], term(m))
	}
	for _, w := range p.Orphans {
		fmt.Fprintf(env.Stdout, "%s the orphaned workspace %s (its run directory is gone)\n", verb, term(w))
	}
	for _, k := range p.Caches {
		fmt.Fprintf(env.Stdout, "%s the kept build cache %s\n", verb, term(k))
	}
	for _, f := range p.Matrix.Removed {
		fmt.Fprintf(env.Stdout, "%s the failure-matrix replay %s\n", verb, term(f.Dir))
	}
	for _, d := range p.Closures.Removed {
		fmt.Fprintf(env.Stdout, "%s the shared closure %s (no run's store names it)\n", verb, term(d))
	}
	if p.Closures.Waiting != "" {
		fmt.Fprintf(env.Stdout, "kept the shared closures: %s\n", p.Closures.Waiting)
	}
	for _, sn := range p.Snapshots.Removed {
		fmt.Fprintf(env.Stdout, "%s the snapshot %s (%s, last used %s)\n", verb, term(sn.Dir), humanBytes(sn.Bytes), sn.LastUsed.UTC().Format(time.RFC3339))
	}
	stage, batches := 0, map[string]int{}
	for _, r := range p.Kept {
		switch {
		case r.ProtectedBy == "stage record":
			stage++
		case r.Protected:
			batches[strings.TrimPrefix(r.ProtectedBy, "batch ")]++
		}
	}
	byBatch := ""
	if len(batches) > 0 {
		var names []string
		for b, n := range batches {
			names = append(names, fmt.Sprintf("%s (%d)", b, n))
		}
		sort.Strings(names)
		byBatch = "; named by batches: " + term(strings.Join(names, ", "))
	}
	fmt.Fprintf(env.Stdout, "%s %d runs; kept %d (%d named by stage records%s)\n", verb, len(p.Removed), len(p.Kept), stage, byBatch)
	if n := len(p.Matrix.Removed) + len(p.Matrix.Kept); n > 0 {
		fmt.Fprintf(env.Stdout, "%s %d failure-matrix replay folders; kept %d (%s)\n", verb, len(p.Matrix.Removed), len(p.Matrix.Kept), keptMatrixSummary(p.Matrix.Kept))
	}
	if n := len(p.Snapshots.Removed) + len(p.Snapshots.Kept); n > 0 {
		held := 0
		for _, sn := range p.Snapshots.Kept {
			if sn.Held {
				held++
			}
		}
		fmt.Fprintf(env.Stdout, "%s %d snapshots; kept %d (%d held by a run in progress) under the cap of %s\n", verb, len(p.Snapshots.Removed), len(p.Snapshots.Kept), held, humanBytes(p.Snapshots.MaxBytes))
	}
	fmt.Fprintf(env.Stdout, "%s %s (%d bytes)\n", map[bool]string{true: "would free", false: "freed"}[c.DryRun], humanBytes(p.FreedBytes), p.FreedBytes)
	return nil
}

// keptMatrixSummary counts the kept replay folders by why they stay.
func keptMatrixSummary(kept []runlist.MatrixFolder) string {
	if len(kept) == 0 {
		return "none"
	}
	by, size := map[string]int{}, int64(0)
	for _, f := range kept {
		by[f.KeptBecause]++
		size += f.SizeBytes
	}
	var parts []string
	for why, n := range by {
		parts = append(parts, fmt.Sprintf("%d %s", n, why))
	}
	sort.Strings(parts)
	return term(strings.Join(parts, ", ")) + ", " + humanBytes(size)
}

func runsDirAbs(g *Globals, env *Env) (string, error) {
	_, _, runs, err := g.setup(env)
	return runs, err
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
