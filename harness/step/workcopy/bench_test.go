package workcopy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// generatedRepo is a real repository of n small files in 100 directories,
// its objects in one pack.
func generatedRepo(b *testing.B, n int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "src")
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%100), fmt.Sprintf("f%05d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "package p\n\n// File %d of the generated tree.\nvar V%d = %d\n", i, i, i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base"},
		// Packed, as a real repository's objects mostly are: the loose
		// objects' copies are not what this measures.
		{"repack", "-adq"}} {
		// No gc in the background: the source must be at rest.
		cmd := exec.Command("git", append([]string{"-c", "gc.auto=0", "-c", "maintenance.auto=false"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// benchSource is the source proven once, as the pipeline proves it before
// every copy.
type benchSource struct {
	repo  source.Repo
	proof ctoharness.SourceProof
	env   func(string) string
	set   *schemas.Set
}

func proveSource(b *testing.B, src string) benchSource {
	b.Helper()
	ctx := context.Background()
	set, err := schemas.Compile()
	if err != nil {
		b.Fatal(err)
	}
	tr := evidence.NewTrace("bench")
	repo, err := source.Classify(ctx, src, source.Policy{Owned: []string{src}}, tr)
	if err != nil {
		b.Fatal(err)
	}
	home := b.TempDir()
	env := func(k string) string { return map[string]string{"GIT_CONFIG_NOSYSTEM": "1", "HOME": home}[k] }
	p, err := source.Prove(ctx, repo, source.ProofOptions{RunID: "bench", Kind: "before", Now: time.Now(), Getenv: env}, tr)
	if err != nil {
		b.Fatal(err)
	}
	return benchSource{repo: repo, proof: p, env: env, set: set}
}

// makeOnce times one fixture step (workcopy.Make, the verification
// checkout begun with it) of a fresh run in runs, the snapshots in
// snapshots ("" for the overlay of the source worktree).
func (bs benchSource) makeOnce(b *testing.B, runs, snapshots string) (time.Duration, bool) {
	b.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("run-%d", time.Now().UnixNano())
	tr := evidence.NewTrace(id)
	dir, err := evidence.Create(ctx, filepath.Join(runs, id), bs.set, tr)
	if err != nil {
		b.Fatal(err)
	}
	ws := filepath.Join(runs, "work", id)
	rep := &ctoharness.Report{Blockers: []ctoharness.Blocker{}, ChangedFiles: []ctoharness.ChangedFile{}, RuntimeWorkspaceRoot: ws}
	rep.Commits.SourceHead, rep.Commits.SourceTree = bs.proof.Head.Commit, bs.proof.Head.Tree
	rep.Commits.BaseCommit, rep.Commits.BaseTree = bs.proof.Head.Commit, bs.proof.Head.Tree
	s := runsink.New(id, "n", dir, tr, rep, time.Now, nil)
	if s.Events, err = dir.OpenEvents(id, "n", time.Now); err != nil {
		b.Fatal(err)
	}
	work, _ := checkout.Dirs(ws)
	in := workcopy.Input{Repo: bs.repo, Spec: task.Spec{AllowedPaths: []string{"docs/**"}}, SourceProof: &bs.proof,
		CheckoutDir: work, Getenv: bs.env, Snapshots: snapshots}
	start := time.Now()
	c, ok := workcopy.Make(ctx, s, in)
	took := time.Since(start)
	if !ok || !s.OK() {
		b.Fatalf("Make = %v, blockers %+v", ok, rep.Blockers)
	}
	c.Release()
	_, err = os.Lstat(filepath.Join(workcopy.Layer(ws), "layer"))
	return took, err == nil
}

// BenchmarkSnapshotFixture is the fixture step of a sandboxed run on a
// generated 10k-file tree: the first run at the commit (which makes the
// snapshot), a second run (which reuses it) and, for reference, the
// overlay of the source worktree with every file hashed (the route before
// snapshots), measured in the same iterations. second/first is the goal's
// ratio (at most 0.1); second/worktree what a run saves against that route.
func BenchmarkSnapshotFixture(b *testing.B) {
	bs := proveSource(b, generatedRepo(b, 10000))
	var first, second, worktree time.Duration
	for i := 0; b.Loop(); i++ {
		runs := b.TempDir()
		snaps := snapshot.Root(runs)
		d, ok := bs.makeOnce(b, runs, snaps)
		if !ok && i == 0 {
			b.Skip("this machine cannot mount an overlay")
		}
		first += d
		d, _ = bs.makeOnce(b, runs, snaps)
		second += d
		d, _ = bs.makeOnce(b, runs, "")
		worktree += d
	}
	n := float64(b.N)
	b.ReportMetric(float64(first.Milliseconds())/n, "first-ms")
	b.ReportMetric(float64(second.Milliseconds())/n, "second-ms")
	b.ReportMetric(float64(worktree.Milliseconds())/n, "worktree-ms")
	b.ReportMetric(second.Seconds()/first.Seconds(), "second/first")
	b.ReportMetric(second.Seconds()/worktree.Seconds(), "second/worktree")
}
