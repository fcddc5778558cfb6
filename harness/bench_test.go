package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// goTreeRepo builds, once per benchmark, a git repository from the Go
// toolchain's own source tree (about 15k files), with the git CLI: this is the
// benchmark's own scratch repository, never a source the harness is run on.
func goTreeRepo(b *testing.B) string {
	b.Helper()
	goroot := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = string(out[:len(out)-1])
	}
	src := filepath.Join(goroot, "src")
	if _, err := os.Stat(src); err != nil {
		b.Skipf("the Go source tree is not available at %s", src)
	}
	dir := filepath.Join(b.TempDir(), "gosrc")
	run(b, "", "cp", "-a", src, dir)
	run(b, dir, "git", "init", "-q", "-b", "main")
	run(b, dir, "git", "add", "-A")
	run(b, dir, "git", "-c", "gc.auto=0", "-c", "user.name=bench", "-c", "user.email=bench@invalid", "commit", "-q", "-m", "go tree")
	run(b, dir, "git", "repack", "-a", "-d", "-q")
	return dir
}

func run(b *testing.B, dir, name string, args ...string) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// stage3Options is a stage 3 run of the fake lane on repo, an owned source,
// with a task that adds CASE_NOTES.md and checks it with verification: the
// benchmarks measure the pass route, so the stage 2 record that opens the
// gate is signed here, in a runs directory of the benchmark's own.
func stage3Options(tb testing.TB, repo, verification string, timeout time.Duration) harness.Options {
	tb.Helper()
	set, err := schemas.Compile()
	if err != nil {
		tb.Fatal(err)
	}
	runs := tb.TempDir()
	exe, _ := os.Executable()
	keys := testKeys(tb)
	if res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys}); !res.OK {
		tb.Fatalf("stage 2: %v", res.Errors)
	}
	secs := int(timeout / time.Second)
	spec := task.Spec{Task: "add a note", AllowedPaths: []string{"CASE_NOTES.md"},
		Verification: task.Verification{Command: verification, TimeoutSeconds: secs}, CaseTimeoutSeconds: secs}
	return harness.Options{Stage: 3, Source: repo, Spec: &spec, RunsDir: runs, Schemas: set, SelfExe: exe,
		Config: config.Config{OwnedSources: []string{repo}},
		Getenv: env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}.get, VerifyRun: validators.StageRunVerifier(set), Signing: keys}
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// BenchmarkPassRouteGoTree measures stage 3 pass-route runs (fake lane,
// trivial change, trivial verification) side by side with the git CLI
// pipeline and with a bare cp -a of the same tree: the first run at a
// commit in a runs directory (which makes the commit's snapshot and the
// shared closure of its history) and the second (which reuses both, as
// every later run and trial at that commit does). It fails when the
// targets are missed: a second run ≤ 0.5× the git pipeline and ≤ 3× cp -a,
// a first run ≤ 1.5× the git pipeline, and peak RSS ≤ 256 MiB. It also
// reports the harness's own work (the run but its Case process and its
// verification command, by the run's events), second against first: the
// runs share what a batch's trials share (one sandbox probe, one check of
// the stage 2 run, one view trial per shape), which the first pays.
func BenchmarkPassRouteGoTree(b *testing.B) {
	repo := goTreeRepo(b)
	var firstT, secondT, gitT, cpT time.Duration
	var firstWork, secondWork time.Duration // harness work: the run but Case and the verification command
	// Deleting many files makes file creation slow for a while on some
	// filesystems; settle after set-up, and rotate the order of the three
	// measurements so none always pays for the others' deletions.
	syscall.Sync()
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		scratch := b.TempDir()
		b.StopTimer()
		o := stage3Options(b, repo, "test -f CASE_NOTES.md", 60*time.Second) // a runs directory of its own
		// As a batch runs its trials: one sandbox probe, one check of the
		// stage 2 run and one view trial per shape for the process, which
		// the first run pays.
		exe, _ := os.Executable()
		o.SandboxProbe, o.ViewTrials = sandbox.Reuse(exe), sandbox.NewTrials()
		o.VerifyRun = validators.RememberStageRuns(validators.StageRunVerifier(o.Schemas))
		b.StartTimer()
		var rep *ctoharness.Report
		pass := func() {
			var err error
			rep, err = harness.Run(context.Background(), o)
			if err != nil || rep.Status != ctoharness.StatusPass {
				b.Fatalf("run: %v %v", err, rep.Blockers)
			}
		}
		measures := []func(){
			func() {
				d := timed(pass)
				firstT, firstWork = firstT+d, firstWork+d-caseAndVerify(b, rep)
				d = timed(pass)
				secondT, secondWork = secondT+d, secondWork+d-caseAndVerify(b, rep)
			},
			func() {
				gitT += timed(func() {
					d := filepath.Join(scratch, "git")
					run(b, "", "cp", "-a", repo, d)
					os.RemoveAll(filepath.Join(d, ".git"))
					run(b, d, "git", "init", "-q")
					run(b, d, "git", "add", "-A")
					run(b, d, "git", "-c", "gc.auto=0", "-c", "user.name=b", "-c", "user.email=b@invalid", "commit", "-q", "-m", "x")
					run(b, d, "git", "status", "--porcelain")
					run(b, d, "git", "status", "--porcelain")
				})
			},
			func() { cpT += timed(func() { run(b, "", "cp", "-a", repo, filepath.Join(scratch, "cp")) }) },
		}
		for k := range measures {
			measures[(i+k)%len(measures)]()
		}
	}
	b.StopTimer()
	first, second, vsCp := float64(firstT)/float64(gitT), float64(secondT)/float64(gitT), float64(secondT)/float64(cpT)
	b.ReportMetric(first, "x-git-pipeline-first")
	b.ReportMetric(second, "x-git-pipeline")
	b.ReportMetric(vsCp, "x-cp-a")
	b.ReportMetric(float64(secondT)/float64(firstT), "second/first")
	workRatio := float64(secondWork) / float64(firstWork)
	secondMs := float64(secondWork.Milliseconds()) / float64(b.N)
	b.ReportMetric(workRatio, "work-second/first")
	b.ReportMetric(secondMs, "work-second-ms")
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	rss := float64(ru.Maxrss) / 1024
	b.ReportMetric(rss, "peak-RSS-MiB")
	b.Logf("first run %.2f× git pipeline, second %.2f× (%.2f× cp -a, %.2f× the first), peak RSS %.0f MiB", first, second, vsCp, float64(secondT)/float64(firstT), rss)
	b.Logf("harness work (all but Case and the verification command): first %.0f ms, second %.0f ms, %.3f× the first (targets: ≤ 300 ms and ≤ 0.1×)",
		float64(firstWork.Milliseconds())/float64(b.N), secondMs, workRatio)
	if second > 0.5 {
		b.Errorf("a second pass-route run at a commit took %.2f× the git CLI pipeline; the target is ≤ 0.5×", second)
	}
	if vsCp > 3 {
		b.Errorf("a second pass-route run at a commit took %.2f× cp -a; the target is ≤ 3×", vsCp)
	}
	if first > 1.5 {
		b.Errorf("the first pass-route run at a commit took %.2f× the git CLI pipeline; the target is ≤ 1.5×", first)
	}
	if rss > 256 {
		b.Errorf("peak RSS %.0f MiB; the target is ≤ 256 MiB", rss)
	}
}

// caseAndVerify is how long the run's Case process and verification
// command ran, by its own events: what the harness-work measure leaves out.
func caseAndVerify(b *testing.B, rep *ctoharness.Report) time.Duration {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.EventsFile))
	if err != nil {
		b.Fatal(err)
	}
	var ms float64
	found := 0
	for line := range strings.Lines(string(data)) {
		var e struct {
			Type ctoharness.EventType `json:"type"`
			Data struct {
				DurationMs *float64 `json:"duration_ms"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			b.Fatal(err)
		}
		if (e.Type == ctoharness.EvCaseProcessExited || e.Type == ctoharness.EvVerificationDone) && e.Data.DurationMs != nil {
			ms += *e.Data.DurationMs
			found++
		}
	}
	if found != 2 {
		b.Fatalf("run %s: %d of the Case and verification durations found, want 2", rep.RunArtifactDir, found)
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// BenchmarkSourceProofGoTree compares one source proof with
// git --no-optional-locks status --porcelain on the same tree (target ≤ 3×).
func BenchmarkSourceProofGoTree(b *testing.B) {
	repo := goTreeRepo(b)
	r, err := source.Classify(context.Background(), repo, source.Policy{Owned: []string{repo}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var proofT, gitT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		proofT += timed(func() {
			if _, err := source.Prove(context.Background(), r, source.ProofOptions{RunID: "bench", Kind: source.KindBefore, Now: time.Now()}, nil); err != nil {
				b.Fatal(err)
			}
		})
		gitT += timed(func() { run(b, repo, "git", "--no-optional-locks", "status", "--porcelain") })
	}
	b.StopTimer()
	ratio := float64(proofT) / float64(gitT)
	b.ReportMetric(ratio, "x-git-status")
	if ratio > 3 {
		b.Errorf("a source proof took %.2f× git status; the target is ≤ 3×", ratio)
	}
}
