package source

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// benchRepo builds a committed repository of about n files spread over
// nested directories, the shape of a small real project.
func benchRepo(b testing.TB, n int) Repo {
	b.Helper()
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("pkg%02d/sub%02d/file%04d.go", i%20, (i/20)%10, i)] = fmt.Sprintf("package p\n\n// file %d\nvar x%d = %d\n", i, i, i)
	}
	base := realTempDir(b)
	dir := filepath.Join(base, "repo")
	initRepo(b, dir, files)
	repo, err := Classify(context.Background(), dir, Policy{Owned: []string{base}}, ctoharness.NopTracer{})
	if err != nil {
		b.Fatal(err)
	}
	return repo
}

// BenchmarkProve measures a full proof (go-git HEAD, refs and status plus
// the manifest walk) of a 3000-file repository, shallow and deep.
func BenchmarkProve(b *testing.B) {
	repo := benchRepo(b, 3000)
	for _, deep := range []bool{false, true} {
		b.Run(fmt.Sprintf("deep=%v", deep), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Prove(context.Background(), repo, ProofOptions{Kind: KindBefore, Deep: deep}, ctoharness.NopTracer{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkManifest measures the lstat walk alone, the part Prove adds on
// top of what git status itself costs.
func BenchmarkManifest(b *testing.B) {
	repo := benchRepo(b, 3000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := walkManifest(context.Background(), repo.Root, false); err != nil {
			b.Fatal(err)
		}
	}
}

// goTreeRepo builds a git repository from the Go toolchain's source tree
// (about 11.5k files) with the git CLI: the benchmark's own scratch
// repository.
func goTreeRepo(b *testing.B, e gitEnv) string {
	b.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skip("go env GOROOT:", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	if _, err := os.Stat(src); err != nil {
		b.Skipf("the Go source tree is not available at %s", src)
	}
	dir := filepath.Join(realTempDir(b), "gosrc")
	if out, err := exec.Command("cp", "-a", src, dir).CombinedOutput(); err != nil {
		b.Fatalf("cp -a: %v\n%s", err, out)
	}
	e.run(b, dir, "init", "-q", "-b", "main")
	e.run(b, dir, "add", "-A")
	e.run(b, dir, "-c", "gc.auto=0", "commit", "-q", "-m", "go tree")
	e.run(b, dir, "repack", "-a", "-d", "-q")
	e.run(b, dir, "prune")
	return dir
}

// BenchmarkProofStatesGoTree measures a source proof against
// `git --no-optional-locks status --porcelain` (the whole git process) on
// the Go source tree in each repository state the status route handles,
// as medians of alternating runs, and fails when the targets are missed:
// at most 2x git when clean, at most 3x in every other state.
func BenchmarkProofStatesGoTree(b *testing.B) {
	e := newGitEnv(b)
	dir := goTreeRepo(b, e)
	repo := mustClassify(b, dir)
	touchAll := func(n int) {
		now := time.Now().Add(time.Minute)
		k := 0
		_ = filepath.WalkDir(filepath.Join(dir, "runtime"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && k < n {
				_ = os.Chtimes(p, now, now)
				k++
			}
			return nil
		})
	}
	states := []struct {
		name  string
		setup func()
		limit float64
	}{
		{"clean", func() {}, 2},
		{"sparse checkout", func() { e.run(b, dir, "sparse-checkout", "set", "runtime", "cmd/go") }, 3},
		{"modified and untracked", func() {
			e.run(b, dir, "sparse-checkout", "disable")
			writeAt(b, dir, "fmt/print.go", "package fmt\n")
			writeAt(b, dir, "untracked/new.txt", "new\n")
		}, 3},
		{"intent to add", func() { e.run(b, dir, "add", "-N", "untracked/new.txt") }, 3},
		{"500 files touched", func() { touchAll(500) }, 3},
		{"core.autocrlf, files touched", func() {
			e.run(b, dir, "config", "core.autocrlf", "true")
			touchAll(500)
		}, 3},
		{"split index", func() {
			e.run(b, dir, "config", "--unset", "core.autocrlf")
			e.run(b, dir, "update-index", "--split-index")
		}, 3},
		{"submodule", func() {
			e.run(b, dir, "update-index", "--no-split-index")
			sub := subRepo(b, e, dir, "subsrc")
			e.run(b, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "zz-sub")
			writeAt(b, dir, "zz-sub/s.txt", "edited\n")
		}, 3},
	}
	const runs = 5
	b.ResetTimer()
	for b.Loop() {
		for _, st := range states {
			st.setup()
			// Deleting or rewriting many files slows the filesystem for a
			// while on some machines; settle before measuring.
			syscall.Sync()
			time.Sleep(2 * time.Second)
			var proofs, gits []time.Duration
			for range runs {
				start := time.Now()
				if _, err := Prove(context.Background(), repo, ProofOptions{RunID: "bench", Kind: KindBefore, Now: time.Now(), Getenv: e.get}, nil); err != nil {
					b.Fatalf("%s: %v", st.name, err)
				}
				proofs = append(proofs, time.Since(start))
				start = time.Now()
				e.run(b, dir, "--no-optional-locks", "status", "--porcelain")
				gits = append(gits, time.Since(start))
			}
			p, g := median(proofs), median(gits)
			ratio := float64(p) / float64(g)
			b.ReportMetric(ratio, "x-git/"+strings.ReplaceAll(st.name, " ", "-"))
			b.Logf("%-30s proof %8v  git status %8v  %.2fx (target <= %gx)", st.name, p.Round(time.Millisecond), g.Round(time.Millisecond), ratio, st.limit)
			if ratio > st.limit {
				b.Errorf("%s: a source proof took %.2fx git status; the target is <= %gx", st.name, ratio, st.limit)
			}
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
