package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// nodeRepo is a Node project built at test time on public npm packages
// (mocha and its 70-odd dependencies, ms, semver), its lock file written by
// a direct `npm install` from the registry. That install also warms the
// host's npm cache, a directory the test owns, named in the .npmrc of a
// HOME the test owns: the harness finds it the way it finds a user's, by
// asking `npm config get cache`.
type nodeRepo struct {
	src, home, cache string
	hostEnv          []string // the host's environment for a direct `npm ci && npm test`
}

// plantedEntry is where Case plants a file in the npm cache.
const plantedEntry = "_cacache/planted"

func newNodeRepo(t testing.TB) nodeRepo {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the warm npm cache is not checked")
	}
	root := t.TempDir()
	n := nodeRepo{src: filepath.Join(root, "owned", "app"), home: filepath.Join(root, "host", "home"), cache: filepath.Join(root, "host", "npm-cache")}
	writeFile(t, filepath.Join(n.home, ".npmrc"), "cache="+n.cache+"\nupdate-notifier=false\nfund=false\naudit=false\n")
	files := map[string]string{
		"package.json": `{"name": "warm-npm", "version": "1.0.0", "private": true, "scripts": {"test": "mocha"},
  "dependencies": {"ms": "2.1.3", "semver": "7.6.0"}, "devDependencies": {"mocha": "10.4.0"}}` + "\n",
		"index.js": "const ms = require('ms');\nconst semver = require('semver');\n\n" +
			"exports.later = (s) => ms(s);\nexports.newer = (a, b) => semver.gt(a, b);\n",
		// The cache the test ran with must not hold what Case planted.
		"test/app.test.js": `const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { later, newer } = require('../index.js');

describe('app', () => {
  it('reads durations', () => assert.strictEqual(later('2h'), 7200000));
  it('compares versions', () => assert.ok(newer('1.2.10', '1.2.9')));
  it('sees no entry planted in the npm cache', () => {
    assert.ok(!fs.existsSync(path.join(process.env.npm_config_cache || '', ` + "'" + plantedEntry + "'" + `)));
  });
});
`,
		".gitignore":     "node_modules/\n",
		"docs/README.md": "# app\n",
	}
	for name, data := range files {
		writeFile(t, filepath.Join(n.src, name), data)
	}
	n.hostEnv = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + n.home, "LANG=C.UTF-8"}
	cmd := exec.Command("npm", "install")
	cmd.Dir, cmd.Env = n.src, n.hostEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("npm install from the registry failed, so the warm npm cache is not checked (is registry.npmjs.org reachable?): %v\n%s", err, out)
	}
	if err := os.RemoveAll(filepath.Join(n.src, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@invalid", "commit", "-q", "-m", "app"}} {
		n.run(t, "git", args...)
	}
	return n
}

func (n nodeRepo) run(t testing.TB, name string, args ...string) time.Duration {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = n.src, n.hostEnv
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return time.Since(start)
}

// getenv is the harness's environment with the test's HOME.
func (n nodeRepo) getenv(base func(string) string) func(string) string {
	return func(k string) string {
		if k == "HOME" {
			return n.home
		}
		return base(k)
	}
}

// npmOptions is a stage 3 run on the project with caches.npm on, the setup
// `npm ci` and the verification `npm test`, and no network for either.
func npmOptions(t testing.TB, set *schemas.Set, n nodeRepo, base harness.Options) harness.Options {
	t.Helper()
	o := base
	o.Source = n.src
	o.Config = config.Config{OwnedSources: []string{n.src}, Caches: &config.Caches{Npm: true}}
	o.Getenv = n.getenv(o.Getenv)
	spec, err := task.Parse([]byte(`{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"setup": {"command": "npm ci", "timeout_seconds": 300},
		"verification": {"command": "npm test", "timeout_seconds": 300}}`), "warm-npm", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	o.Spec = &spec
	return o
}

// gateCaches is the warm_caches record of the run's gate_checked event.
func gateCaches(t *testing.T, rep *ctoharness.Report) map[string]struct {
	Host  string `json:"host"`
	Shown bool   `json:"shown"`
} {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				WarmCaches map[string]struct {
					Host  string `json:"host"`
					Shown bool   `json:"shown"`
				} `json:"warm_caches"`
			} `json:"data"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.Type == string(ctoharness.EvGateChecked) {
			return ev.Data.WarmCaches
		}
	}
	t.Fatal("no gate_checked event")
	return nil
}

// With caches.npm a Node project's `npm ci` runs offline on the host's npm
// cache; what Case writes into the cache reaches neither the host's cache
// nor the verification, and without the cache the same setup fails.
func TestWarmNpmCache(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	base, _ := stage3(t, set)
	n := newNodeRepo(t)
	before := treeDigest(t, n.cache)
	o := npmOptions(t, set, n, base)

	// Run 1: Case plants an entry in the cache. Its write works, in its
	// own layer; the verification, with a layer of its own, does not see
	// it and passes offline.
	poisoned := o
	poisoned.Scenario = "write-source-abs=" + filepath.Join(n.cache, plantedEntry)
	rep, err := harness.Run(context.Background(), poisoned)
	if err != nil {
		t.Fatal(err)
	}
	setupLog, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.SetupLog))
	testLog, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "test.log"))
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s, blockers %v\nsetup.log:\n%s\ntest.log:\n%s", rep.Status, rep.Blockers, setupLog, testLog)
	}
	mustValidate(t, set, rep, true)
	if !strings.Contains(string(testLog), "3 passing") {
		t.Errorf("test.log:\n%s", testLog)
	}
	events, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.CaseEvents))
	if !strings.Contains(string(events), `"attempt":"write-source-abs"`) || strings.Contains(string(events), `"denied":true`) {
		t.Errorf("Case's write into its overlay should have worked: %s", events)
	}
	if got := gateCaches(t, rep)["npm"]; got.Host != n.cache || !got.Shown {
		t.Errorf("gate_checked's warm_caches.npm = %+v, want the host's cache %s shown", got, n.cache)
	}
	if treeDigest(t, n.cache) != before {
		t.Fatal("the run changed the host's npm cache")
	}
	overlays := 0
	for _, m := range rep.Sandbox.VerificationView.Mounts {
		if m.Kind == ctoharness.ViewOverlay && m.Path == n.cache {
			overlays++
		}
	}
	if overlays != 1 {
		t.Errorf("the verification's view shows the npm cache through %d overlays, want 1", overlays)
	}

	// Run 2: a clean run does not see run 1's entry either.
	rep, err = harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("second run: status %s, blockers %v", rep.Status, rep.Blockers)
	}
	if treeDigest(t, n.cache) != before {
		t.Error("the second run changed the host's npm cache")
	}

	// A host without the cache: it is left out, said so at the gate, and
	// npm, offline, fails at once on the first package it lacks.
	cold := o
	cold.Getenv = func(k string) string {
		if k == "npm_config_cache" {
			return filepath.Join(t.TempDir(), "no-cache-here")
		}
		return o.Getenv(k)
	}
	rep, err = harness.Run(context.Background(), cold)
	if err != nil {
		t.Fatal(err)
	}
	if got := gateCaches(t, rep)["npm"]; got.Shown {
		t.Errorf("a cache the host does not have is recorded as shown: %+v", got)
	}
	if rep.Status == ctoharness.StatusPass || len(rep.Blockers) == 0 || rep.Blockers[0].Code != ctoharness.BlockSetupFailed {
		t.Errorf("without the cache the offline setup should fail: status %s, blockers %v", rep.Status, rep.Blockers)
	}
	setupLog, _ = os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.SetupLog))
	if !strings.Contains(string(setupLog), "ENOTCACHED") {
		t.Errorf("npm did not run in its offline mode; setup.log:\n%s", setupLog)
	}
}

// BenchmarkWarmNpmCache compares a stage 3 run's setup and verification
// (`npm ci`, `npm test`) of a Node project, with caches.npm and no
// network, with the same commands run directly on the host on the same
// warm cache (x-direct: the ratio).
func BenchmarkWarmNpmCache(b *testing.B) {
	exe, _ := os.Executable()
	if f := sandbox.ProbeWith(exe); !f.Available() {
		b.Skipf("sandbox unavailable on this machine: %s", f.Reason)
	}
	set := compileB(b)
	runs := b.TempDir()
	keys, err := attest.Ephemeral()
	if err != nil {
		b.Fatal(err)
	}
	if res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys}); !res.OK {
		b.Fatalf("stage 2: %v", res.Errors)
	}
	n := newNodeRepo(b)
	base := harness.Options{Stage: 3, RunsDir: runs, Schemas: set, SelfExe: exe,
		Getenv: env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}.get, VerifyRun: validators.StageRunVerifier(set), Signing: keys}
	o := npmOptions(b, set, n, base)
	if rep, err := harness.Run(context.Background(), o); err != nil || rep.Status != ctoharness.StatusPass {
		b.Fatalf("first run: %v %+v", err, rep.Blockers)
	}
	direct := n.run(b, "npm", "ci", "--offline") + n.run(b, "npm", "test")
	var inHarness time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := harness.Run(context.Background(), o)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("warm run: %v %+v", err, rep.Blockers)
		}
		inHarness += time.Duration(rep.Setup.DurationMs+rep.Tests.DurationMs) * time.Millisecond
	}
	b.StopTimer()
	per := inHarness / time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "setup+verify-ms")
	b.ReportMetric(float64(direct.Milliseconds()), "direct-ms")
	b.ReportMetric(float64(per)/float64(direct), "x-direct")
}
