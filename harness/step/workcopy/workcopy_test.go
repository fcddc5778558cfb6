package workcopy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/snapshot"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/workcopy"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// gitRepo is a real repository with one commit: README.md and docs/a.md.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	for name, body := range map[string]string{"README.md": "hello\n", "docs/a.md": "a\n"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// run is a run's sink over a fresh run directory with its event log, and
// the source proven as the pipeline proves it before the copy.
type run struct {
	s      *runsink.Sink
	in     workcopy.Input
	before ctoharness.SourceProof
}

func newRun(t *testing.T, unsandboxed bool) run {
	t.Helper()
	ctx := context.Background()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	tr := evidence.NewTrace("run-1")
	dir, err := evidence.Create(ctx, filepath.Join(base, "run-1"), set, tr)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "work", "run-1")
	rep := &ctoharness.Report{Blockers: []ctoharness.Blocker{}, ChangedFiles: []ctoharness.ChangedFile{}, RuntimeWorkspaceRoot: ws}
	s := runsink.New("run-1", "n", dir, tr, rep, time.Now, nil)
	if s.Events, err = dir.OpenEvents("run-1", "n", time.Now); err != nil {
		t.Fatal(err)
	}
	src := gitRepo(t)
	repo, err := source.Classify(ctx, src, source.Policy{Owned: []string{src}}, tr)
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		return map[string]string{"GIT_CONFIG_NOSYSTEM": "1", "HOME": base}[k]
	}
	p, err := source.Prove(ctx, repo, source.ProofOptions{RunID: "run-1", Kind: "before", Now: time.Now(), Getenv: getenv}, tr)
	if err != nil {
		t.Fatal(err)
	}
	rep.Commits.SourceHead, rep.Commits.SourceTree = p.Head.Commit, p.Head.Tree
	rep.Commits.BaseCommit, rep.Commits.BaseTree = p.Head.Commit, p.Head.Tree
	work, _ := checkout.Dirs(ws)
	spec := task.Spec{AllowedPaths: []string{"docs/**"}}
	return run{s: s, before: p, in: workcopy.Input{Repo: repo, Spec: spec, SourceProof: &p, CheckoutDir: work,
		Unsandboxed: unsandboxed, Getenv: getenv, Snapshots: snapshot.Root(base)}}
}

// event is one line of the run's event log.
type event struct {
	Type ctoharness.EventType `json:"type"`
	Data map[string]any       `json:"data"`
}

// events are the events the sink wrote, in order, and their types.
func (r run) events(t *testing.T) ([]event, []ctoharness.EventType) {
	t.Helper()
	data, err := os.ReadFile(r.s.Dir.Path(evidence.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	var types []ctoharness.EventType
	for line := range strings.Lines(string(data)) {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		out, types = append(out, e), append(types, e.Type)
	}
	return out, types
}

func codes(rep *ctoharness.Report) []ctoharness.BlockerCode {
	var out []ctoharness.BlockerCode
	for _, b := range rep.Blockers {
		out = append(out, b.Code)
	}
	return out
}

// TestCopyStartCollectEnd: the copy (a plain copy unsandboxed, an overlay
// where the machine mounts one otherwise) is proven clean, Case's change
// is collected into the store with one path outside the allowed paths
// blocked, and the end proof compares the fixture with the result.
func TestCopyStartCollectEnd(t *testing.T) {
	for _, unsandboxed := range []bool{true, false} {
		t.Run(map[bool]string{true: "copy", false: "overlay"}[unsandboxed], func(t *testing.T) {
			ctx := context.Background()
			r := newRun(t, unsandboxed)
			var told string
			r.in.Hooks.Made = func(dir string) { told = dir }
			c, ok := workcopy.Make(ctx, r.s, r.in)
			defer c.Release()
			if !ok || !r.s.OK() {
				t.Fatalf("Make = %v, blockers %+v", ok, r.s.Report.Blockers)
			}
			if want := r.s.Dir.Path(evidence.FixtureDir); c.Path != want || told != want || r.s.Report.FixturePath != want {
				t.Fatalf("fixture %q, hook told %q, report %q; want %q", c.Path, told, r.s.Report.FixturePath, want)
			}
			if c.Store != r.s.Dir.Path(evidence.StoreDir) || len(c.GitBefore) == 0 || c.Checkout == nil || c.BaselineAt.IsZero() || c.Base != "" {
				t.Fatalf("copy %+v", c)
			}
			if got := r.s.Report.Commits.BaselineTree; got != r.before.Head.Tree {
				t.Fatalf("baseline tree %s, source tree %s", got, r.before.Head.Tree)
			}
			if !c.CleanStart(ctx, r.s) {
				t.Fatalf("clean start: %+v", r.s.Report.Blockers)
			}
			for name, body := range map[string]string{"docs/b.md": "b\n", "README.md": "changed\n"} {
				if err := os.WriteFile(filepath.Join(c.Path, filepath.FromSlash(name)), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			col := c.Collect(ctx, r.s)
			if col == nil || col.At.IsZero() || r.s.Report.Commits.ResultCommit == "" || len(r.s.Report.ChangedFiles) != 2 {
				t.Fatalf("collected %+v, commits %+v, changed %+v", col, r.s.Report.Commits, r.s.Report.ChangedFiles)
			}
			if got := codes(r.s.Report); !slices.Equal(got, []ctoharness.BlockerCode{ctoharness.BlockDisallowedChange}) ||
				!strings.Contains(r.s.Report.Blockers[0].Message, "README.md") {
				t.Fatalf("blockers %+v, want README.md outside the allowed paths", r.s.Report.Blockers)
			}
			c.CleanEnd(ctx, r.s, col)
			if got := codes(r.s.Report); len(got) != 1 {
				t.Fatalf("the end proof of a collected fixture blocked: %+v", r.s.Report.Blockers)
			}
			for _, name := range []string{evidence.CleanStart, evidence.CleanEnd, evidence.PatchFile} {
				if _, err := os.Stat(r.s.Dir.Path(name)); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
			want := []ctoharness.EventType{ctoharness.EvFixtureCopied, ctoharness.EvBaselineCommitted, ctoharness.EvFixtureCleanStart,
				ctoharness.EvChangesCollected, ctoharness.EvRunBlocked, ctoharness.EvFixtureCleanEnd}
			evs, got := r.events(t)
			if !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			t.Logf("fixture_copied %v", evs[0].Data)
			// Unsandboxed, Case could write the overlay's lower layer:
			// always a copy. Sandboxed, an overlay where the machine mounts.
			if ov := evs[0].Data["overlay"]; unsandboxed && ov != false {
				t.Fatalf("an unsandboxed run's fixture: %s %v", evs[0].Type, evs[0].Data)
			} else if !unsandboxed && ov != true {
				t.Logf("no overlay on this machine: the sandboxed run's fixture is a copy (%v)", evs[0].Data)
			}
		})
	}
}

// TestDirtyStartIsCaught: a file left untracked after the baseline (the
// fixture_dirty_start fault) fails the clean-start proof.
func TestDirtyStartIsCaught(t *testing.T) {
	ctx := context.Background()
	r := newRun(t, true)
	r.in.DirtyStart = true
	c, ok := workcopy.Make(ctx, r.s, r.in)
	defer c.Release()
	if !ok || !r.s.OK() {
		t.Fatalf("Make = %v, blockers %+v", ok, r.s.Report.Blockers)
	}
	if c.CleanStart(ctx, r.s) {
		t.Fatal("a fixture with an untracked file was proven clean")
	}
	if got := codes(r.s.Report); !slices.Equal(got, []ctoharness.BlockerCode{ctoharness.BlockFixtureDirtyStart}) {
		t.Fatalf("blockers %+v", r.s.Report.Blockers)
	}
}

// TestCleanEndWithoutBaseline: a fixture with no baseline commit has no
// end proof to take, and the record says why rather than blaming Case.
func TestCleanEndWithoutBaseline(t *testing.T) {
	ctx := context.Background()
	r := newRun(t, true)
	r.s.Block(ctoharness.Blocker{Code: ctoharness.BlockCopyFailed, Step: ctoharness.StepCopy, Message: "planted"})
	workcopy.Copy{Path: "/nowhere/fixture"}.CleanEnd(ctx, r.s, nil)
	data, err := os.ReadFile(r.s.Dir.Path(evidence.CleanEnd))
	if err != nil {
		t.Fatal(err)
	}
	var p ctoharness.FixtureProof
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if p.Clean || p.FixturePath != "/nowhere/fixture" || !strings.Contains(p.NotTaken, string(ctoharness.BlockCopyFailed)) {
		t.Fatalf("proof %+v", p)
	}
	if got := codes(r.s.Report); len(got) != 1 {
		t.Fatalf("the proof not taken blocked again: %+v", r.s.Report.Blockers)
	}
}

// TestHistoryFromTheSpec: the copy and every later checkout take the
// task's history; a form the copy cannot take is kept as written.
func TestHistoryFromTheSpec(t *testing.T) {
	tests := []struct {
		history, mode string
		depth         int
	}{
		{"", "full", 0},
		{"none", "none", 0},
		{"3", "depth", 3},
		{"most", "most", 0},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			r := newRun(t, true)
			r.in.Spec.History = tc.history
			c, _ := workcopy.Make(context.Background(), r.s, r.in)
			defer c.Release()
			if c.History.Mode != tc.mode || c.History.Depth != tc.depth {
				t.Fatalf("history %q: copy took %+v, want %s %d", tc.history, c.History, tc.mode, tc.depth)
			}
		})
	}
}

func TestUnsafeNames(t *testing.T) {
	tests := []struct {
		name string
		file ctoharness.ChangedFile
		want []string
	}{
		{"plain", ctoharness.ChangedFile{Path: "docs/a.md"}, nil},
		{"control", ctoharness.ChangedFile{Path: "docs/a\x1b[2J.md"}, []string{`docs/a\x1b[2J.md`}},
		{"bidi", ctoharness.ChangedFile{Path: "docs/a\u202egpj.md"}, []string{`docs/a\u202egpj.md`}},
		{"undecodable", ctoharness.ChangedFile{Path: "docs/x", PathB64: "%%%"}, []string{"docs/x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := workcopy.UnsafeNames([]ctoharness.ChangedFile{tc.file}); !slices.Equal(got, tc.want) {
				t.Fatalf("UnsafeNames(%q) = %q, want %q", tc.file.Path, got, tc.want)
			}
		})
	}
}

func TestBaseRev(t *testing.T) {
	tests := []struct {
		rev, base, want string
	}{
		{"", "", ""},
		{"", "v1", "v1"},
		{"abc123", "v1", "abc123"},
	}
	for _, tc := range tests {
		if got := workcopy.BaseRev(tc.rev, task.Spec{Base: tc.base}); got != tc.want {
			t.Errorf("BaseRev(%q, base %q) = %q, want %q", tc.rev, tc.base, got, tc.want)
		}
	}
}

// TestScratchTracedOnce: the scratch is made on first need and traced
// once, however many views and launches ask for it.
func TestScratchTracedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "scratch")
	tr := evidence.NewTrace("run-1")
	s := workcopy.NewScratch(dir, tr)
	for range 3 {
		if err := s.Make(); err != nil {
			t.Fatal(err)
		}
	}
	n := len(tr.Entries())
	if n == 0 {
		t.Fatal("making the scratch traced nothing")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("scratch %s: %v", dir, err)
	}
	if err := workcopy.NewScratch(dir, tr).Make(); err != nil || len(tr.Entries()) != 2*n {
		t.Fatalf("a second scratch over the same directory: %v, %d entries, want %d", err, len(tr.Entries()), 2*n)
	}
}
