package harness_test

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/warmcache"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// goRepo is a Go module with one dependency, built at test time: the
// dependency is served by a file:// module proxy, and the host's caches
// (GOMODCACHE, GOCACHE) are the test's own directories, warmed by running
// the tests directly once.
type goRepo struct {
	src, modCache, buildCache string
	hostEnv                   []string // the host's environment for a direct `go test`
}

// sharedGoRepo is the goRepo the package's tests copy: warming a fresh
// GOCACHE compiles the standard library's test dependencies, half a minute
// of a 2-core machine, so it is made once per test binary (in a directory
// TestMain removes) and each test gets a copy of its own (cp -a), which
// it may change as it likes.
var sharedGoRepo struct {
	once sync.Once
	root string // empty until made
}

// newGoRepo copies the shared repository and caches into a temporary
// directory of t's.
func newGoRepo(t testing.TB) goRepo {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	sharedGoRepo.once.Do(func() {
		dir, err := os.MkdirTemp("", "cto-harness-gorepo-")
		if err != nil {
			t.Fatal(err)
		}
		sharedDirs = append(sharedDirs, dir)
		makeGoRepo(t, dir)
		sharedGoRepo.root = dir
	})
	if sharedGoRepo.root == "" {
		t.Fatal("the shared Go repository could not be made: see the first test that made it")
	}
	root := t.TempDir()
	if out, err := exec.Command("cp", "-a", sharedGoRepo.root+"/.", root).CombinedOutput(); err != nil {
		t.Fatalf("copy the shared Go repository: %v\n%s", err, out)
	}
	return goRepoAt(root)
}

// goRepoAt is the goRepo laid out under root.
func goRepoAt(root string) goRepo {
	g := goRepo{src: filepath.Join(root, "owned", "app"), modCache: filepath.Join(root, "host", "gomod"), buildCache: filepath.Join(root, "host", "gobuild")}
	g.hostEnv = append(os.Environ(), "GOMODCACHE="+g.modCache, "GOCACHE="+g.buildCache, "GOPROXY=file://"+filepath.Join(root, "proxy"),
		"GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	return g
}

// makeGoRepo lays out the module, its dependency's proxy and the warmed
// host caches under root.
func makeGoRepo(t testing.TB, root string) {
	t.Helper()
	g := goRepoAt(root)
	dep := map[string]string{
		"go.mod":       "module example.com/greet\n\ngo 1.21\n",
		"greet.go":     "package greet\n\nimport \"strings\"\n\n// Hello greets name.\nfunc Hello(name string) string { return \"hello, \" + strings.TrimSpace(name) }\n",
		"greet/doc.go": "// Package greet is a sub-package that nothing imports.\npackage greet\n",
	}
	writeModule(t, filepath.Join(root, "proxy"), "example.com/greet", "v1.0.0", dep)
	app := map[string]string{
		"go.mod":         "module example.com/app\n\ngo 1.21\n\nrequire example.com/greet v1.0.0\n",
		"app.go":         "package app\n\nimport \"example.com/greet\"\n\n// Greeting is the app's greeting.\nfunc Greeting() string { return greet.Hello(\" world \") }\n",
		"app_test.go":    "package app\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif Greeting() != \"hello, world\" {\n\t\tt.Fatal(Greeting())\n\t}\n}\n",
		"docs/README.md": "# app\n",
	}
	for name, data := range app {
		writeFile(t, filepath.Join(g.src, name), data)
	}
	g.run(t, g.src, "go", "mod", "tidy")
	g.run(t, g.src, "go", "test", "./...")
	g.run(t, g.src, "git", "init", "-q", "-b", "main")
	g.run(t, g.src, "git", "add", "-A")
	g.run(t, g.src, "git", "-c", "user.name=t", "-c", "user.email=t@invalid", "commit", "-q", "-m", "app")
}

func (g goRepo) run(t testing.TB, dir, name string, args ...string) time.Duration {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, g.hostEnv
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return time.Since(start)
}

// getenv is the harness's environment: the host's caches are the test's.
func (g goRepo) getenv(base func(string) string) func(string) string {
	return func(k string) string {
		switch k {
		case "GOMODCACHE":
			return g.modCache
		case "GOCACHE":
			return g.buildCache
		}
		return base(k)
	}
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeModule lays out one module version in a file:// module proxy.
func writeModule(t testing.TB, proxy, mod, version string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(proxy, mod, "@v")
	writeFile(t, filepath.Join(dir, "list"), version+"\n")
	writeFile(t, filepath.Join(dir, version+".info"), `{"Version":"`+version+`","Time":"2026-01-01T00:00:00Z"}`)
	writeFile(t, filepath.Join(dir, version+".mod"), files["go.mod"])
	f, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, err := zw.Create(mod + "@" + version + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, files[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// treeDigest hashes every path, mode and content under dir, so a test can
// tell whether anything there changed.
func treeDigest(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		io.WriteString(h, rel+"\x00"+info.Mode().String()+"\x00")
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			io.Copy(h, f)
			f.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// warmOptions is a stage 3 run on the repository with caches.go on and the
// verification `go test -count=1 ./...`.
func warmOptions(t testing.TB, set *schemas.Set, g goRepo, base harness.Options) harness.Options {
	t.Helper()
	o := base
	o.Source = g.src
	o.Config = config.Config{OwnedSources: []string{g.src}, Caches: &config.Caches{Go: true}}
	o.Getenv = g.getenv(o.Getenv)
	spec, err := task.Parse([]byte(`{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"verification": {"command": "go test -count=1 ./...", "timeout_seconds": 300}}`), "warm", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	o.Spec = &spec
	return o
}

// With caches.go the verification of a repository with a dependency runs
// offline on the host's caches, and nothing the run writes reaches them.
func TestWarmGoCaches(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	start := time.Now()
	base, _ := stage3(t, set)
	t.Logf("stage 2 record: %s", time.Since(start))
	g := newGoRepo(t)
	t.Logf("repository and host caches: %s", time.Since(start))
	modBefore, buildBefore := treeDigest(t, g.modCache), treeDigest(t, g.buildCache)
	o := warmOptions(t, set, g, base)
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s, blockers %v, tests %q", rep.Status, rep.Blockers, rep.Tests.Reason)
	}
	mustValidate(t, set, rep, true)
	t.Logf("run: %s, its verification %d ms", time.Since(start), rep.Tests.DurationMs)
	if treeDigest(t, g.modCache) != modBefore || treeDigest(t, g.buildCache) != buildBefore {
		t.Error("the run changed the host's Go caches")
	}
	// Each variable once: a second GOCACHE (the scratch's) made exec keep
	// whichever sorted last, and the warm build cache went unused.
	seen := map[string]bool{}
	for _, k := range rep.Case.EnvKeys {
		if seen[k] {
			t.Errorf("Case's environment sets %s twice: %v", k, rep.Case.EnvKeys)
		}
		seen[k] = true
	}
	if !seen["GOCACHE"] {
		t.Errorf("Case's environment has no GOCACHE: %v", rep.Case.EnvKeys)
	}
	log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "test.log"))
	if !strings.Contains(string(log), "ok  \texample.com/app") {
		t.Errorf("test.log:\n%s", log)
	}
	// Case plants an entry in the build cache and a module in the module
	// cache: the writes succeed in its overlay and reach neither the host
	// nor the verification, which still passes.
	poisoned := o
	poisoned.Scenario = "write-source-abs=" + filepath.Join(g.buildCache, "00", "planted-d")
	rep, err = harness.Run(context.Background(), poisoned)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("run with a planted cache entry: status %s, blockers %v", rep.Status, rep.Blockers)
	}
	events, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.CaseEvents))
	if !strings.Contains(string(events), `"attempt":"write-source-abs"`) || strings.Contains(string(events), `"denied":true`) {
		t.Errorf("Case's write into its overlay should have worked: %s", events)
	}
	if treeDigest(t, g.modCache) != modBefore || treeDigest(t, g.buildCache) != buildBefore {
		t.Error("Case's write reached the host's Go caches")
	}
	// Without the caches the same verification has no module to build with.
	o.Config.Caches = nil
	rep, err = harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status == ctoharness.StatusPass {
		t.Error("the verification passed without the caches: the test does not show what they give")
	}
}

// BenchmarkWarmGoCache compares a stage 3 verification's `go test` on a
// repository with a dependency, on a warm second run with caches.go, with
// the same tests run directly on the host (x-direct: the ratio).
func BenchmarkWarmGoCache(b *testing.B) {
	exe, _ := os.Executable()
	if f := sandbox.ProbeWith(exe); !f.Available() {
		b.Skipf("sandbox unavailable on this machine: %s", f.Reason)
	}
	set := compileB(b)
	runs := b.TempDir()
	keys, err := attest.Ephemeral() // signed, as every run is by default
	if err != nil {
		b.Fatal(err)
	}
	if res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys}); !res.OK {
		b.Fatalf("stage 2: %v", res.Errors)
	}
	g := newGoRepo(b)
	base := harness.Options{Stage: 3, RunsDir: runs, Schemas: set, SelfExe: exe,
		Getenv: env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}.get, VerifyRun: validators.StageRunVerifier(set), Signing: keys}
	o := warmOptions(b, set, g, base)
	if rep, err := harness.Run(context.Background(), o); err != nil || rep.Status != ctoharness.StatusPass {
		b.Fatalf("first run: %v %+v", err, rep.Blockers)
	}
	direct := g.run(b, g.src, "go", "test", "-count=1", "./...")
	var inHarness time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := harness.Run(context.Background(), o)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("warm run: %v %+v", err, rep.Blockers)
		}
		inHarness += time.Duration(rep.Tests.DurationMs) * time.Millisecond
	}
	b.StopTimer()
	per := inHarness / time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "verify-ms")
	b.ReportMetric(float64(direct.Milliseconds()), "direct-ms")
	b.ReportMetric(float64(per)/float64(direct), "x-direct")
}

// The repository's own packages compiled by the first run's warm-up (on the
// baseline, never by Case or its tests) are kept and read by later runs'
// verifications, and nothing Case or its tests write to the build cache
// reaches a later run: Case overwrites every entry it is shown and adds a
// test that overwrites every entry the verification is shown, and the next
// run reads the same kept layer, unchanged, and passes. Two runs are
// needed, so this is a test here rather than a matrix row.
func TestKeptGoCacheNotPoisonable(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	base, _ := stage3(t, set)
	g := newGoRepo(t)
	buildBefore := treeDigest(t, g.buildCache)
	o := warmOptions(t, set, g, base)
	spec, err := task.Parse([]byte(`{"task": "Add a test.", "allowed_paths": ["docs/**", "poison_test.go"],
		"verification": {"command": "go test -count=1 -v ./...", "timeout_seconds": 300}}`), "poison", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	o.Spec = &spec
	o.Scenario = "poison-go-cache=poison_test.go"
	first, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mustValidate(t, set, first, first.Status == ctoharness.StatusPass)
	kept := first.Sandbox.KeptBuildCache
	if kept == nil || !kept.WarmedUp || kept.ID == "" || kept.Files == 0 {
		t.Fatalf("the first run should have warmed up and kept a layer: %+v", kept)
	}
	if kept.WarmUpExitCode == nil || *kept.WarmUpExitCode != 0 {
		t.Errorf("the warm-up on the baseline: exit %v", kept.WarmUpExitCode)
	}
	log, _ := os.ReadFile(filepath.Join(first.RunArtifactDir, "test.log"))
	if !strings.Contains(string(log), "poisoned") {
		t.Errorf("Case's test did not run in the first verification:\n%s", log)
	}
	events, _ := os.ReadFile(filepath.Join(first.RunArtifactDir, evidence.CaseEvents))
	if !strings.Contains(string(events), `"attempt":"poison-go-cache"`) || strings.Contains(string(events), `"denied":true`) {
		t.Errorf("Case's writes to its build cache should have worked (in its own layer): %s", events)
	}
	layerBefore := treeDigest(t, kept.Layer)
	// The verification showed the layer under a writable one of its own.
	var shown bool
	for _, m := range first.Sandbox.VerificationView.Mounts {
		if m.Kind == ctoharness.ViewOverlay && slices.Contains(m.Lowers, kept.Layer) && m.Path == g.buildCache {
			shown = true
		}
	}
	if !shown {
		t.Errorf("the verification's view does not show the kept layer over the build cache: %+v", first.Sandbox.VerificationView.Mounts)
	}

	o.Scenario = "" // the same task (so the same kept layer), now with the canned change
	second, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != ctoharness.StatusPass {
		t.Fatalf("the run after the poisoning: status %s, blockers %v, tests %q", second.Status, second.Blockers, second.Tests.Reason)
	}
	mustValidate(t, set, second, true)
	k2 := second.Sandbox.KeptBuildCache
	if k2 == nil || k2.WarmedUp || k2.ID != kept.ID || k2.Note != "" {
		t.Errorf("the second run should read the first run's layer as it was kept: %+v, first %+v", k2, kept)
	}
	if treeDigest(t, kept.Layer) != layerBefore {
		t.Error("the kept layer changed")
	}
	ev, _ := os.ReadFile(filepath.Join(second.RunArtifactDir, evidence.EventsFile))
	if !strings.Contains(string(ev), `"kept_build_cache":{"id":"`+kept.ID+`","note":"","warmed_up":false}`) {
		t.Errorf("verification_finished does not name the layer read: %s", ev)
	}
	if treeDigest(t, g.buildCache) != buildBefore {
		t.Error("the host's build cache changed")
	}
	if second.Sandbox.VerificationView == nil || !strings.Contains(fmt.Sprint(second.Sandbox.VerificationView.Mounts), "/cto-harness/checkout") {
		t.Errorf("the verification's checkout is not at its fixed path: %+v", second.Sandbox.VerificationView)
	}
	// A corrupt kept layer is discarded and made again; the run still passes.
	entries, _ := filepath.Glob(filepath.Join(kept.Layer, "*", "*-d"))
	if len(entries) == 0 {
		t.Fatal("the kept layer has no outputs")
	}
	os.Chmod(entries[0], 0o644)
	if err := os.WriteFile(entries[0], []byte("corrupted on disk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if third.Status != ctoharness.StatusPass {
		t.Fatalf("the run with a corrupt kept layer: status %s, blockers %v", third.Status, third.Blockers)
	}
	k3 := third.Sandbox.KeptBuildCache
	if k3 == nil || !k3.WarmedUp || !strings.Contains(k3.Note, "discarded") || k3.ID == "" {
		t.Errorf("a corrupt layer should be discarded and warmed up again: %+v", k3)
	}
}

// cobraVersion is the public Go repository BenchmarkKeptGoCache runs: a
// module with dependencies (pflag, go-md2man, yaml), fetched through the
// Go module proxy when the benchmark starts.
const cobraVersion = "github.com/spf13/cobra@v1.10.2"

// cobraTests is cobra's own `go test`, less one test that fails when run
// as root on the host (it expects writing a read-only file to fail).
const cobraTests = "go test -count=1 -skip TestFailGenFishCompletionFile ./..."

// newCobraRepo makes a git repository of cobra's module source, with the
// benchmark's own host caches warmed by running its tests directly once.
func newCobraRepo(b *testing.B) goRepo {
	b.Helper()
	root := b.TempDir()
	g := goRepo{src: filepath.Join(root, "owned", "cobra"), modCache: filepath.Join(root, "host", "gomod"), buildCache: filepath.Join(root, "host", "gobuild")}
	// -modcacherw: the module cache is a temporary directory to remove.
	g.hostEnv = append(os.Environ(), "GOMODCACHE="+g.modCache, "GOCACHE="+g.buildCache, "GOFLAGS=-modcacherw", "GOTOOLCHAIN=local")
	cmd := exec.Command("go", "mod", "download", "-json", cobraVersion)
	cmd.Dir, cmd.Env = root, g.hostEnv
	out, err := cmd.Output()
	if err != nil {
		b.Skipf("%s cannot be fetched through the Go module proxy from this machine: %v", cobraVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		b.Fatalf("go mod download printed %s: %v", out, err)
	}
	g.run(b, root, "mkdir", "-p", filepath.Dir(g.src))
	g.run(b, root, "cp", "-r", mod.Dir, g.src)
	g.run(b, root, "chmod", "-R", "u+w", g.src)
	g.run(b, g.src, "go", "mod", "download")
	g.run(b, g.src, "sh", "-c", cobraTests)
	g.run(b, g.src, "git", "init", "-q", "-b", "main")
	g.run(b, g.src, "git", "add", "-A")
	g.run(b, g.src, "git", "-c", "user.name=t", "-c", "user.email=t@invalid", "commit", "-q", "-m", "cobra")
	return g
}

// BenchmarkKeptGoCache runs cobra's own tests through the harness at
// stage 3 with caches.go, twice and more, and compares a warm run's
// verification (reading the layer the first run's warm-up kept) with the
// same tests run directly on the host (x-direct; the target is ≤ 1.5×).
// Everything in the sandbox is offline. first-verify-ms and warmup-ms are
// the first run's: its warm-up compiles the baseline before its own
// verification.
func BenchmarkKeptGoCache(b *testing.B) {
	exe, _ := os.Executable()
	if f := sandbox.ProbeWith(exe); !f.Available() {
		b.Skipf("sandbox unavailable on this machine: %s", f.Reason)
	}
	g := newCobraRepo(b)
	set := compileB(b)
	runs := b.TempDir()
	keys, err := attest.Ephemeral()
	if err != nil {
		b.Fatal(err)
	}
	if res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys}); !res.OK {
		b.Fatalf("stage 2: %v", res.Errors)
	}
	spec, err := task.Parse([]byte(`{"task": "Add a note.", "allowed_paths": ["CASE_NOTES.md"],
		"verification": {"command": "`+cobraTests+`", "timeout_seconds": 600}}`), "cobra", set.Validator(schemas.TaskSpec))
	if err != nil {
		b.Fatal(err)
	}
	o := harness.Options{Stage: 3, RunsDir: runs, Schemas: set, SelfExe: exe, Source: g.src, Spec: &spec,
		Config:    config.Config{OwnedSources: []string{g.src}, Caches: &config.Caches{Go: true}},
		VerifyRun: validators.StageRunVerifier(set), Signing: keys}
	o.Getenv = g.getenv(env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}.get)
	first, err := harness.Run(context.Background(), o)
	if err != nil || first.Status != ctoharness.StatusPass {
		b.Fatalf("first run: %v %+v %s", err, first.Blockers, first.Tests.Reason)
	}
	k := first.Sandbox.KeptBuildCache
	if k == nil || !k.WarmedUp || k.ID == "" {
		b.Fatalf("the first run kept no layer: %+v", k)
	}
	// What a run paid before the layer was kept: the same tests in a copy
	// of the repository at a new path, as each run's checkout was.
	moved := filepath.Join(b.TempDir(), "cobra")
	g.run(b, "", "cp", "-r", g.src, moved)
	elsewhere := g.run(b, moved, "sh", "-c", cobraTests)
	var inHarness, direct time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := harness.Run(context.Background(), o)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("warm run: %v %+v", err, rep.Blockers)
		}
		if k := rep.Sandbox.KeptBuildCache; k == nil || k.WarmedUp || k.ID != first.Sandbox.KeptBuildCache.ID {
			b.Fatalf("a warm run did not read the first run's layer: %+v", k)
		}
		inHarness += time.Duration(rep.Tests.DurationMs) * time.Millisecond
		direct += g.run(b, g.src, "sh", "-c", cobraTests) // paired, as the machine's load changes
	}
	b.StopTimer()
	per, direct := inHarness/time.Duration(b.N), direct/time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "verify-ms")
	b.ReportMetric(float64(direct.Milliseconds()), "direct-ms")
	b.ReportMetric(float64(per)/float64(direct), "x-direct")
	b.ReportMetric(float64(elsewhere.Milliseconds()), "direct-new-path-ms")
	b.ReportMetric(float64(k.WarmUpMs), "warmup-ms")
	b.ReportMetric(float64(first.Tests.DurationMs), "first-verify-ms")
	b.ReportMetric(float64(k.Bytes)/1e6, "kept-MB")
	// Each run checks the layer against its manifest before reading it.
	check := time.Now()
	if _, err := warmcache.OpenKept(filepath.Dir(filepath.Dir(k.Layer)), k.Key); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(check).Milliseconds()), "check-layer-ms")
}

// A warm-up that does not finish leaves the run without a kept layer, says
// so, and does not block the run: the verification is judged on its own.
func TestKeptGoCacheWarmUpFails(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	base, _ := stage3(t, set)
	g := newGoRepo(t)
	o := warmOptions(t, set, g, base)
	// On the baseline (no note yet) the command hangs until its timeout.
	spec, err := task.Parse([]byte(`{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"verification": {"command": "test -f docs/CASE_NOTES.md || sleep 600; go test -count=1 ./...", "timeout_seconds": 5}}`), "hang", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	o.Spec = &spec
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s, blockers %v, tests %q", rep.Status, rep.Blockers, rep.Tests.Reason)
	}
	mustValidate(t, set, rep, true)
	k := rep.Sandbox.KeptBuildCache
	if k == nil || !k.WarmedUp || k.Layer != "" || k.ID != "" || !strings.Contains(k.Note, "timed out") {
		t.Errorf("a warm-up that timed out: %+v", k)
	}
	for _, m := range rep.Sandbox.VerificationView.Mounts {
		if len(m.Lowers) > 0 {
			t.Errorf("the verification read a kept layer though none was made: %+v", m)
		}
	}
	if _, err := os.Stat(filepath.Join(o.RunsDir, ".cache", "go-build", k.Key)); err == nil {
		t.Error("a layer was published from a warm-up that did not finish")
	}
	// A profile that runs no tests warms nothing up, and its view and
	// record still agree.
	o.Profile = "smoke"
	rep, err = harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sandbox.VerificationView == nil {
		t.Fatal("the smoke run built no verification view: nothing to check")
	}
	// (A smoke run never qualifies; only its view is checked here.)
	res := validators.Run(context.Background(), rep.RunArtifactDir, set, validators.RunOptions{})
	for _, e := range res.Errors {
		if strings.Contains(fmt.Sprint(e), "sandbox_view") {
			t.Errorf("the smoke run's view: %v", e)
		}
	}
	if k := rep.Sandbox.KeptBuildCache; k == nil || k.WarmedUp || k.Layer != "" || !strings.Contains(k.Note, "smoke") {
		t.Errorf("the smoke run's record: %+v", k)
	}
	// A run blocked before its verification stops the warm-up running
	// beside Case, and its evidence validates.
	o.Profile, o.Scenario = "", "disallowed"
	rep, err = harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status == ctoharness.StatusPass {
		t.Fatal("the disallowed change passed")
	}
	mustValidate(t, set, rep, false)
	if _, err := os.Stat(filepath.Join(o.RunsDir, ".cache", "go-build", k.Key)); err == nil {
		t.Error("a layer was published from a warm-up the run stopped")
	}
}
