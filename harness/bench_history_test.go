package harness_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
)

// historyRSSEnv makes TestLongHistoryRunHelper, run as a child of
// BenchmarkLongHistoryPeakRSS, run stage 3 on the repository it names, so
// that the child's peak RSS (with the git processes it waits for) is one
// run's alone.
const historyRSSEnv = "CTO_HISTORY_RSS_HELPER"

// TestLongHistoryRunHelper is not a test: BenchmarkLongHistoryPeakRSS runs
// it in a child process.
func TestLongHistoryRunHelper(t *testing.T) {
	repo := os.Getenv(historyRSSEnv)
	if repo == "" {
		t.Skip("run by BenchmarkLongHistoryPeakRSS only")
	}
	o := stage3Options(t, repo, "true", 120*time.Second)
	rep, err := harness.Run(context.Background(), o)
	if err != nil || rep.Status != ctoharness.StatusPass {
		t.Fatalf("run: %v %v", err, rep.Blockers)
	}
}

// longHistoryRepo writes, with git fast-import, a repository of 8,000
// files in 8 directories and 20,000 commits, each changing one file: one
// pack of 40,000 trees of a thousand entries each and 28,000 blobs, the
// shape of a long-lived project with large directories (tldr's pages).
// With the closure walk holding 512 parsed trees at a time, a run on it
// peaked at 246 MiB; taking them one at a time, at about 90.
func longHistoryRepo(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "history")
	run(b, "", "git", "init", "-q", "-b", "main", dir)
	cmd := exec.Command("git", "-c", "gc.auto=0", "fast-import", "--quiet")
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	filler := strings.Repeat("a line of the file that most commits leave alone\n", 20)
	const files, dirs, commits = 8000, 8, 20000
	when := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for c := 0; c < commits; c++ {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter bench <bench@invalid> %d +0000\ndata 9\ncommit %02d\n", when+int64(c), c%100)
		if c == 0 {
			for f := 0; f < files; f++ {
				body := fmt.Sprintf("file %d\n%s", f, filler)
				fmt.Fprintf(w, "M 100644 inline d%02d/f%04d.txt\ndata %d\n%s\n", f%dirs, f, len(body), body)
			}
			continue
		}
		f := (c * 7919) % files
		body := fmt.Sprintf("file %d, change %d\n%s", f, c, filler)
		fmt.Fprintf(w, "M 100644 inline d%02d/f%04d.txt\ndata %d\n%s\n", f%dirs, f, len(body), body)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("git fast-import: %v", err)
	}
	run(b, dir, "git", "checkout", "-q", "main")
	return dir
}

// peakOf runs argv under /usr/bin/time and returns its wall time and its
// peak resident set size in MiB (the largest of the process and the
// children it waited for).
func peakOf(b *testing.B, env []string, dir string, argv ...string) (time.Duration, float64) {
	b.Helper()
	report := filepath.Join(b.TempDir(), "rss")
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", report}, argv...)...)
	cmd.Env, cmd.Dir = env, dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v: %v\n%.3000s", argv, err, out)
	}
	took := time.Since(start)
	data, err := os.ReadFile(report)
	if err != nil {
		b.Fatal(err)
	}
	kb, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		b.Fatalf("/usr/bin/time wrote %q", data)
	}
	return took, kb / 1024
}

// BenchmarkLongHistoryPeakRSS measures one stage 3 run (history full,
// verification true) on a generated long history beside git's own copy of
// it (git clone --no-local: every object read and written again), and
// fails when the run's peak RSS, its git processes included, passes
// 256 MiB. It reports the ratios of time and peak RSS against the clone.
func BenchmarkLongHistoryPeakRSS(b *testing.B) {
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		b.Skip("/usr/bin/time is not installed; it measures the child's peak RSS")
	}
	repo := longHistoryRepo(b)
	exe, _ := os.Executable()
	env := append(os.Environ(), historyRSSEnv+"="+repo)
	var runT, cloneT time.Duration
	var runRSS, cloneRSS float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, rss := peakOf(b, env, "", exe, "-test.run=^TestLongHistoryRunHelper$", "-test.count=1")
		runT, runRSS = runT+t, max(runRSS, rss)
		t, rss = peakOf(b, os.Environ(), "", "git", "clone", "-q", "--no-local", "--no-checkout", repo, filepath.Join(b.TempDir(), "clone"))
		cloneT, cloneRSS = cloneT+t, max(cloneRSS, rss)
	}
	b.StopTimer()
	b.ReportMetric(runRSS, "peak-RSS-MiB")
	b.ReportMetric(runRSS/cloneRSS, "x-clone-RSS")
	b.ReportMetric(float64(runT)/float64(cloneT), "x-clone-time")
	if runRSS > 256 {
		b.Errorf("a run on a 20,000-commit history peaked at %.0f MiB (git clone: %.0f MiB); the target is ≤ 256 MiB", runRSS, cloneRSS)
	}
}
