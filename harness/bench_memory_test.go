package harness_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
)

// memRunEnv makes TestMemoryRunHelper, run as a child of the peak-RSS
// benchmarks below, run stage 3 on the repository it names and write the
// size of the run's directory to the file memRunEnv+"_OUT" names.
const memRunEnv = "CTO_MEMORY_RUN_HELPER"

// memProfileEnv, when set beside memRunEnv, names a file the helper writes
// a heap profile to each time the heap passes its last high mark: the
// profile of the run's peak (go tool pprof -sample_index=inuse_space).
// Each earlier mark is kept beside it, numbered (name.1, name.2, …), so
// the steps on the way to the peak can be told apart.
const memProfileEnv = "CTO_MEMORY_RUN_PROFILE"

// TestMemoryRunHelper is not a test: the peak-RSS benchmarks run it in a
// child process, so that the child's peak RSS is one run's alone.
func TestMemoryRunHelper(t *testing.T) {
	repo := os.Getenv(memRunEnv)
	if repo == "" {
		t.Skip("run by the peak-RSS benchmarks only")
	}
	// The command's own soft target, so the peak is the command's.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(harness.MemoryLimit)
	}
	if p := os.Getenv(memProfileEnv); p != "" {
		stop := profileHeapPeaks(p)
		defer stop()
	}
	o := stage3Options(t, repo, "true", 600*time.Second)
	rep, err := harness.Run(context.Background(), o)
	if err != nil || rep.Status != ctoharness.StatusPass {
		t.Fatalf("run: %v %v", err, rep.Blockers)
	}
	size, err := diskUsage(filepath.Join(o.RunsDir, rep.RunID))
	if err != nil {
		t.Fatal(err)
	}
	// The harness process's own peak, so the benchmark can say whether the
	// peak is the harness's or one of its children's. (A child's own peak
	// is not readable here: exec records the parent's as the child's.)
	var self unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &self)
	if err := os.WriteFile(os.Getenv(memRunEnv+"_OUT"), fmt.Appendf(nil, "%d %d", size, self.Maxrss), 0o644); err != nil {
		t.Fatal(err)
	}
}

// profileHeapPeaks writes a heap profile to path whenever the live heap
// passes its last high mark by 8 MiB, polled every 20 ms, until stop.
func profileHeapPeaks(path string) (stop func()) {
	runtime.MemProfileRate = 64 << 10
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var mark uint64
		var top rssSample
		defer func() { _ = os.WriteFile(path+".rss", []byte(top.String()), 0o644) }()
		n := 0
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if rss := statusKB("VmRSS"); rss > top.rss {
				top = rssSample{rss: rss, anon: statusKB("RssAnon"), file: statusKB("RssFile"), ms: ms}
			}
			if ms.HeapInuse < mark+8<<20 {
				continue
			}
			mark = ms.HeapInuse
			n++
			if n > 1 {
				_ = os.Rename(path, fmt.Sprintf("%s.%d", path, n-1))
			}
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}()
	return func() { close(done); <-ended }
}

// rssSample is what the process's resident set held when it was largest:
// anonymous memory and mapped files (the kernel's), and the Go runtime's
// heap in use, heap kept but free and stacks.
type rssSample struct {
	rss, anon, file uint64 // KiB
	ms              runtime.MemStats
}

func (s rssSample) String() string {
	const mib = 1 << 20
	return fmt.Sprintf("peak VmRSS %d MiB: anonymous %d MiB, files %d MiB; Go heap in use %d MiB (live objects %d MiB), idle not released %d MiB, stacks %d MiB, runtime %d MiB\n",
		s.rss>>10, s.anon>>10, s.file>>10, s.ms.HeapInuse/mib, s.ms.HeapAlloc/mib, (s.ms.HeapIdle-s.ms.HeapReleased)/mib, s.ms.StackInuse/mib,
		(s.ms.MSpanInuse+s.ms.MCacheInuse+s.ms.GCSys+s.ms.OtherSys+s.ms.BuckHashSys)/mib)
}

// statusKB is a "kB" field of /proc/self/status, 0 when unreadable.
func statusKB(field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// diskUsage is the space the files under dir take (st_blocks), each inode
// once.
func diskUsage(dir string) (int64, error) {
	var total int64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

// bigPackRepo writes, with git fast-import, a repository whose history
// holds mib MiB of incompressible blobs (one 8 MiB file added every 500
// commits of 20,000, each changing one of 4,000 text files) that its HEAD
// no longer has, and a side branch and tag with one more blob that the
// base's history does not reach, packed into one pack by git gc: the
// shape of a clone of git/git (one 496 MB pack, tags off the main line, a
// small HEAD tree).
func bigPackRepo(b *testing.B, mib int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "bigpack")
	const commits, files = 20000, 4000
	every := commits / (mib / 8)
	fastImport(b, dir, func(w *bufio.Writer) {
		when := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		blob := make([]byte, 8<<20)
		filler := strings.Repeat("a line of the file that most commits leave alone\n", 20)
		for c := 0; c < commits; c++ {
			fmt.Fprintf(w, "commit refs/heads/main\ncommitter bench <bench@invalid> %d +0000\ndata 2\nc\n", when+int64(c))
			if c == 0 {
				for f := 0; f < files; f++ {
					body := fmt.Sprintf("file %d\n%s", f, filler)
					fmt.Fprintf(w, "M 100644 inline d%02d/f%04d.txt\ndata %d\n%s\n", f%40, f, len(body), body)
				}
			}
			f := (c * 7919) % files
			body := fmt.Sprintf("file %d, change %d\n%s", f, c, filler)
			fmt.Fprintf(w, "M 100644 inline d%02d/f%04d.txt\ndata %d\n%s\n", f%40, f, len(body), body)
			if c%every == 0 && c < commits-1 {
				_, _ = rand.Read(blob)
				fmt.Fprintf(w, "M 100644 inline blobs/b%05d.bin\ndata %d\n", c, len(blob))
				w.Write(blob)
				w.WriteString("\n")
			}
			if c == commits-1 {
				w.WriteString("D blobs\n") // the HEAD tree is small again
			}
		}
		_, _ = rand.Read(blob)
		fmt.Fprintf(w, "commit refs/heads/side\ncommitter bench <bench@invalid> %d +0000\ndata 5\nside\nfrom refs/heads/main\n", when+commits)
		fmt.Fprintf(w, "M 100644 inline side.bin\ndata %d\n", len(blob))
		w.Write(blob)
		fmt.Fprintf(w, "\ntag v1\nfrom refs/heads/side\ntagger bench <bench@invalid> %d +0000\ndata 3\nv1\n", when+commits)
	})
	run(b, dir, "git", "-c", "gc.auto=0", "gc", "-q", "--prune=now")
	run(b, dir, "git", "checkout", "-q", "main")
	return dir
}

// manyFilesRepo writes a repository of one commit holding files small
// files in directories of 1,000, and checks it out.
func manyFilesRepo(b *testing.B, files int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "manyfiles")
	fastImport(b, dir, func(w *bufio.Writer) {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter bench <bench@invalid> 1577836800 +0000\ndata 5\nmany\n")
		for f := 0; f < files; f++ {
			body := fmt.Sprintf("file %d\n", f)
			fmt.Fprintf(w, "M 100644 inline d%04d/f%06d.txt\ndata %d\n%s\n", f/1000, f, len(body), body)
		}
	})
	run(b, dir, "git", "-c", "gc.auto=0", "checkout", "-q", "main")
	return dir
}

// fastImport makes a repository at dir from the stream write writes.
func fastImport(b *testing.B, dir string, write func(*bufio.Writer)) {
	b.Helper()
	run(b, "", "git", "init", "-q", "-b", "main", dir)
	cmd := exec.Command("git", "-c", "gc.auto=0", "fast-import", "--quiet", "--big-file-threshold=1m")
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	write(w)
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("git fast-import: %v", err)
	}
}

// memoryRun runs one stage 3 run on repo in a child process and reports
// its peak RSS (git processes included), the repository's file count and
// .git size, and the run directory's size against the .git's; it fails
// when the peak passes 256 MiB, or, with packBound, when the run directory
// holds half the .git (a run directory holds proofs that list every file,
// so only a repository of few files bounds it by its pack).
func memoryRun(b *testing.B, repo string, files int, packBound bool) {
	b.Helper()
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		b.Skip("/usr/bin/time is not installed; it measures the child's peak RSS")
	}
	gitSize, err := diskUsage(filepath.Join(repo, ".git"))
	if err != nil {
		b.Fatal(err)
	}
	exe, _ := os.Executable()
	out := filepath.Join(b.TempDir(), "rundir-size")
	env := append(os.Environ(), memRunEnv+"="+repo, memRunEnv+"_OUT="+out)
	var peak, clone float64 // clone: git clone --no-local of repo, the direct way to a working copy
	var self float64        // the harness process's own peak
	var runDir int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, rss := peakOf(b, env, "", exe, "-test.run=^TestMemoryRunHelper$", "-test.count=1", "-test.timeout=30m")
		peak = max(peak, rss)
		data, err := os.ReadFile(out)
		if err != nil {
			b.Fatal(err)
		}
		var n, selfKB int64
		if _, err := fmt.Sscan(string(data), &n, &selfKB); err != nil {
			b.Fatalf("the helper wrote %q: %v", data, err)
		}
		runDir, self = max(runDir, n), max(self, float64(selfKB)/1024)
		_, rss = peakOf(b, os.Environ(), "", "git", "clone", "-q", "--no-local", repo, filepath.Join(b.TempDir(), "clone"))
		clone = max(clone, rss)
	}
	b.StopTimer()
	b.ReportMetric(peak/clone, "x-clone-RSS")
	b.ReportMetric(peak, "peak-RSS-MiB")
	b.ReportMetric(float64(files), "files")
	b.ReportMetric(float64(gitSize)/(1<<20), "git-MiB")
	b.ReportMetric(float64(runDir)/(1<<20), "rundir-MiB")
	b.ReportMetric(float64(runDir)/float64(gitSize), "x-git-rundir")
	b.Logf("peak RSS %.0f MiB (the harness process %.0f MiB; git clone: %.0f MiB), %d files, .git %.0f MiB, run directory %.0f MiB",
		peak, self, clone, files, float64(gitSize)/(1<<20), float64(runDir)/(1<<20))
	if peak > 256 {
		b.Errorf("a run on %d files and a %.0f MiB .git peaked at %.0f MiB; the target is ≤ 256 MiB", files, float64(gitSize)/(1<<20), peak)
	}
	if packBound && float64(runDir) > 0.5*float64(gitSize) {
		b.Errorf("the run directory is %.0f MiB beside a %.0f MiB .git; it must not hold the source's pack", float64(runDir)/(1<<20), float64(gitSize)/(1<<20))
	}
}

// BenchmarkPeakRSSBigPack is one stage 3 run (history full, verification
// true) on a repository with one pack of 320 MiB of blobs and 80,000
// objects, and a small HEAD tree.
func BenchmarkPeakRSSBigPack(b *testing.B) {
	repo := bigPackRepo(b, 320)
	memoryRun(b, repo, 4000, true)
}

// BenchmarkPeakRSSManyFiles is one stage 3 run on a tree of 200,000 small
// files, or as many as CTO_BENCH_FILES says (the 1,000,000), when
// the disk has room for the source and the run's copies of it.
func BenchmarkPeakRSSManyFiles(b *testing.B) {
	files := 200_000
	if s := os.Getenv("CTO_BENCH_FILES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("CTO_BENCH_FILES=%q: give a number of files", s)
		}
		files = n
	}
	var st unix.Statfs_t
	tmp := b.TempDir()
	if err := unix.Statfs(tmp, &st); err != nil {
		b.Fatal(err)
	}
	// A small file takes a block in the source, the fixture and the
	// checkout, and an inode in each.
	if need := uint64(files) * 3; st.Ffree < need || st.Bavail*uint64(st.Bsize) < need*8192 {
		b.Skipf("%s has %d free inodes and %d MiB free; %d files need about %d and %d MiB", tmp, st.Ffree, st.Bavail*uint64(st.Bsize)>>20, files, need, need*8192>>20)
	}
	repo := manyFilesRepo(b, files)
	memoryRun(b, repo, files, false)
}
