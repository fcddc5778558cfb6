package harness_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	"github.com/cto-harness/cto-harness/harness/warmcache"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// nodeRepo is a Node project built at test time on public npm packages
// (mocha and its 70-odd dependencies, ms, semver), its lock file written by
// a direct `npm install` from the registry. That install also warms the
// host's npm cache, ~/.npm in a HOME the test owns: the harness finds it
// the way it finds a user's, by asking `npm config get cache`.
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
	// npm's default place, inside the harness user's HOME, which every
	// sandboxed command has hidden: the overlay is shown inside the mask.
	n := nodeRepo{src: filepath.Join(root, "owned", "app"), home: filepath.Join(root, "host", "home")}
	n.cache = filepath.Join(n.home, ".npm")
	writeFile(t, filepath.Join(n.home, ".npmrc"), "update-notifier=false\nfund=false\naudit=false\n")
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

	// A host without the cache (a user who never ran npm: no ~/.npm in the
	// home every command has hidden): it is left out, said so at the gate,
	// and npm, offline, fails at once on the first package it lacks, not on
	// a cache directory it cannot create.
	cold := o
	cold.Getenv = func(k string) string {
		if k == "npm_config_cache" {
			return filepath.Join(n.home, ".npm-never-made")
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
	if len(rep.Blockers) > 0 && !strings.Contains(rep.Blockers[0].Message, "its cache does not have") {
		t.Errorf("the blocker does not say the package is missing from the cache: %s", rep.Blockers[0].Message)
	}

	// The same host with the registry allowed for the setup: npm downloads
	// into a cache of the command's own. Pointed at the missing host path
	// inside the hidden home, it could not create it (ENOENT) and the
	// setup failed.
	cold.Config.Network = &config.NetworkAllow{SetupAllow: []string{warmcache.NpmRegistry + ":443"}}
	rep, err = harness.Run(context.Background(), cold)
	if err != nil {
		t.Fatal(err)
	}
	setupLog, _ = os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.SetupLog))
	if rep.Status != ctoharness.StatusPass {
		t.Errorf("no host cache, registry allowed: status %s, blockers %v\nsetup.log:\n%s", rep.Status, rep.Blockers, setupLog)
	}
	if _, err := os.Stat(filepath.Join(n.home, ".npm-never-made")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the run made the host's npm cache: %v", err)
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
	// For comparison, once: the same run without the cache, its setup
	// downloading from the registry (cold-ms; left out when the registry
	// cannot be reached through the harness's egress).
	cold := o
	cold.Config.Caches = nil
	cold.Config.Network = &config.NetworkAllow{SetupAllow: []string{"registry.npmjs.org:443"}}
	coldMs := int64(-1)
	if rep, err := harness.Run(context.Background(), cold); err == nil && rep.Status == ctoharness.StatusPass {
		coldMs = rep.Setup.DurationMs + rep.Tests.DurationMs
	} else if err == nil {
		b.Logf("the cold run without the cache did not pass (%v): no cold-setup+verify-ms", rep.Blockers)
	}
	// Each iteration also runs the direct commands, so both sides see the
	// same load on a shared machine.
	var inHarness, direct time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := harness.Run(context.Background(), o)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("warm run: %v %+v", err, rep.Blockers)
		}
		inHarness += time.Duration(rep.Setup.DurationMs+rep.Tests.DurationMs) * time.Millisecond
		b.StopTimer()
		direct += n.run(b, "npm", "ci", "--offline") + n.run(b, "npm", "test")
		b.StartTimer()
	}
	b.StopTimer()
	per, perDirect := inHarness/time.Duration(b.N), direct/time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "setup+verify-ms")
	b.ReportMetric(float64(perDirect.Milliseconds()), "direct-ms")
	b.ReportMetric(float64(per)/float64(perDirect), "x-direct")
	if coldMs >= 0 {
		b.ReportMetric(float64(coldMs), "cold-setup+verify-ms")
	}
}

// With caches.cargo, cargo's registry and git checkouts come from the
// host's CARGO_HOME (a directory the test owns), shown inside the
// command's own CARGO_HOME: a crate with a path dependency builds and
// tests offline, the verification sees the host's registry but not its
// credentials, and what it writes there stays in its layer. A crate from
// crates.io is not tested: this machine may not reach it.
func TestWarmCargoCache(t *testing.T) {
	home := os.Getenv("HOME")
	cargoBin, rustup := filepath.Join(home, ".cargo", "bin"), filepath.Join(home, ".rustup")
	if _, err := os.Stat(filepath.Join(cargoBin, "cargo")); err != nil {
		t.Skip("no rustup cargo in ~/.cargo/bin: the warm cargo registry is not checked")
	}
	if _, err := os.Stat(rustup); err != nil {
		t.Skip("no ~/.rustup: the warm cargo registry is not checked")
	}
	hostCargo := filepath.Join(t.TempDir(), "host", "cargo")
	writeFile(t, filepath.Join(hostCargo, "registry", "index", "marker"), "the host's registry\n")
	writeFile(t, filepath.Join(hostCargo, "git", "db", "marker"), "the host's git checkouts\n")
	writeFile(t, filepath.Join(hostCargo, "credentials.toml"), "[registry]\ntoken = \"secret\"\n")
	before := treeDigest(t, hostCargo)
	src := recipeRepo(t, map[string]string{
		"Cargo.toml": "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ngreet = { path = \"vendor/greet\" }\n",
		"Cargo.lock": "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 3\n\n" +
			"[[package]]\nname = \"app\"\nversion = \"0.1.0\"\ndependencies = [\n \"greet\",\n]\n\n[[package]]\nname = \"greet\"\nversion = \"0.1.0\"\n",
		"src/lib.rs":              "pub fn hello() -> String { greet::greet(\"world\") }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn hello() { assert_eq!(super::hello(), \"hello, world\"); }\n}\n",
		"vendor/greet/Cargo.toml": "[package]\nname = \"greet\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"vendor/greet/src/lib.rs": "pub fn greet(name: &str) -> String { format!(\"hello, {name}\") }\n",
		"scripts/check-cargo.sh":  "set -e\ntest -f \"$CARGO_HOME/registry/index/marker\"\ntest -f \"$CARGO_HOME/git/db/marker\"\ntest ! -e \"$CARGO_HOME/credentials.toml\"\ntest \"$CARGO_NET_OFFLINE\" = true\necho planted > \"$CARGO_HOME/registry/planted\"\n",
		".gitignore":              "/target\n",
		"docs/README.md":          "# app\n",
	})
	cfg := config.Config{Caches: &config.Caches{Cargo: true},
		Toolchains: []config.Toolchain{{Name: "rust", Paths: []string{cargoBin, rustup}, Path: []string{cargoBin},
			Env: map[string]string{"RUSTUP_HOME": rustup}}}}
	withCargo := func(base func(string) string) func(string) string {
		return func(k string) string {
			switch k {
			case "HOME":
				return home
			case "CARGO_HOME":
				return hostCargo
			}
			return base(k)
		}
	}
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"verification": {"command": "sh scripts/check-cargo.sh && cargo test --offline", "timeout_seconds": 300}}`, cfg, withCargo, "test result: ok. 1 passed")
	if treeDigest(t, hostCargo) != before {
		t.Error("the run changed the host's CARGO_HOME")
	}
}

// Caches that are asked for and cannot be offered refuse the run at the
// gate, naming the fix.
func TestWarmEcoCachesRefused(t *testing.T) {
	set := compile(t)
	base, src := stage3(t, set)
	badNpm := filepath.Join(t.TempDir(), "bin")
	writeFile(t, filepath.Join(badNpm, "npm"), "#!/bin/sh\necho 'npm is broken here' >&2\nexit 3\n")
	if err := os.Chmod(filepath.Join(badNpm, "npm"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		caches config.Caches
		env    map[string]string
		tools  []config.Toolchain
		want   []string
	}{
		{"npm-fails", config.Caches{Npm: true}, map[string]string{"PATH": badNpm + ":" + os.Getenv("PATH")},
			nil, []string{"caches.npm", "npm_config_cache", "npm is broken here"}},
		{"npm-relative", config.Caches{Npm: true}, map[string]string{"npm_config_cache": "cache/npm"},
			nil, []string{"caches.npm", "not an absolute path"}},
		{"wheelhouse-missing", config.Caches{PipWheelhouse: "/nonexistent/wheels"}, nil,
			nil, []string{"caches.pip", "/nonexistent/wheels"}},
		{"wheelhouse-in-source", config.Caches{PipWheelhouse: src}, nil,
			nil, []string{"caches.pip", "inside " + src}},
		// Refused even before the host has a pip cache to show.
		{"pip-cache-dir-from-toolchain", config.Caches{Pip: true}, map[string]string{"PIP_CACHE_DIR": "/nonexistent/pip"},
			[]config.Toolchain{{Name: "py", Paths: []string{t.TempDir()}, Env: map[string]string{"PIP_CACHE_DIR": "/somewhere"}}},
			[]string{"PIP_CACHE_DIR", "toolchains"}},
		{"cargo-home-from-toolchain", config.Caches{Cargo: true}, map[string]string{"CARGO_HOME": t.TempDir()},
			[]config.Toolchain{{Name: "rust", Paths: []string{t.TempDir()}, Env: map[string]string{"CARGO_HOME": "/somewhere"}}},
			[]string{"CARGO_HOME", "toolchains"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := base
			caches := c.caches
			o.Config = config.Config{OwnedSources: []string{src}, Caches: &caches, Toolchains: c.tools}
			get := o.Getenv
			o.Getenv = func(k string) string {
				if v, ok := c.env[k]; ok {
					return v
				}
				return get(k)
			}
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Blockers) == 0 || rep.Blockers[0].Code != ctoharness.BlockConfigInvalid || rep.Blockers[0].Step != ctoharness.StepGate {
				t.Fatalf("want CONFIG_INVALID at the gate, got status %s, blockers %v", rep.Status, rep.Blockers)
			}
			for _, w := range c.want {
				if !strings.Contains(rep.Blockers[0].Message, w) {
					t.Errorf("the blocker does not say %q: %s", w, rep.Blockers[0].Message)
				}
			}
			if rep.CaseProcessStarted {
				t.Error("Case ran though the gate refused the caches")
			}
		})
	}
}

// writeWheel writes a pure-Python wheel of package name (one module whose
// source is src) into dir, as `pip wheel` would, RECORD hashes included.
func writeWheel(t *testing.T, dir, name, version, src string) {
	t.Helper()
	info := name + "-" + version + ".dist-info"
	files := []struct{ path, data string }{
		{name + "/__init__.py", src},
		{info + "/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: cto-harness-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, name+"-"+version+"-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	var record strings.Builder
	for _, x := range files {
		w, err := zw.Create(x.path)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, x.data)
		sum := sha256.Sum256([]byte(x.data))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", x.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(x.data))
	}
	record.WriteString(info + "/RECORD,,\n")
	w, err := zw.Create(info + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, record.String())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// With caches.pip and a wheelhouse, a setup that installs a dependency
// into a virtual environment works with no network: pip skips the index
// and installs from the wheelhouse; the host's pip cache and wheelhouse
// stay as they were.
func TestWarmPipWheelhouse(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3: the pip wheelhouse is not checked")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import ensurepip, venv").Run(); err != nil {
		t.Skip("the system python3 cannot make a virtual environment with pip (python3-venv): the pip wheelhouse is not checked")
	}
	host := t.TempDir()
	wheels, pipCache := filepath.Join(host, "wheels"), filepath.Join(host, "pip-cache")
	writeWheel(t, wheels, "greetlib", "1.0", "def greet(name):\n    return 'hello, ' + name\n")
	writeFile(t, filepath.Join(pipCache, "marker"), "the host's pip cache\n")
	before := treeDigest(t, host)
	src := recipeRepo(t, map[string]string{
		"requirements.txt":    "greetlib==1.0\n",
		"tests/__init__.py":   "",
		"tests/test_greet.py": "import unittest\n\nfrom greetlib import greet\n\n\nclass GreetTest(unittest.TestCase):\n    def test_greet(self):\n        self.assertEqual(greet('world'), 'hello, world')\n",
		"docs/README.md":      "# app\n",
	})
	withPip := func(base func(string) string) func(string) string {
		return func(k string) string {
			if k == "PIP_CACHE_DIR" {
				return pipCache
			}
			return base(k)
		}
	}
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"setup": {"command": "python3 -m venv \"$TMPDIR/venv\" && \"$TMPDIR/venv/bin/pip\" install -r requirements.txt", "timeout_seconds": 300},
		"verification": {"command": "\"$TMPDIR/venv/bin/python\" -m unittest discover -v", "timeout_seconds": 300}}`,
		config.Config{Caches: &config.Caches{Pip: true, PipWheelhouse: wheels}}, withPip, "Ran 1 test")
	if treeDigest(t, host) != before {
		t.Error("the run changed the host's pip cache or wheelhouse")
	}
}

// --dry-run shows what each command gets: npm offline for a setup that may
// not reach the registry, online (preferring the cache) for one that may.
func TestWarmNpmDryRun(t *testing.T) {
	set := compile(t)
	base, src := stage3(t, set)
	o := base
	o.Config = config.Config{OwnedSources: []string{src}, Caches: &config.Caches{Npm: true}}
	hostCache := t.TempDir()
	get := o.Getenv
	o.Getenv = func(k string) string {
		if k == "npm_config_cache" {
			return hostCache
		}
		return get(k)
	}
	spec := *o.Spec
	spec.Setup = &task.Verification{Command: "npm ci", TimeoutSeconds: 60}
	o.Spec = &spec
	keys := func(o harness.Options) map[string][]string {
		plan, err := harness.Plan(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Blockers) > 0 {
			t.Fatalf("blockers %v", plan.Blockers)
		}
		out := map[string][]string{}
		for _, c := range plan.Commands {
			out[c.Role] = c.EnvKeys
		}
		return out
	}
	plan, err := harness.Plan(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range plan.Warnings {
		if strings.Contains(w, "nothing to install from") {
			t.Errorf("a warning though the npm cache is offered: %s", w)
		}
	}
	none := o
	none.Config.Caches = nil
	if plan, err = harness.Plan(context.Background(), none); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(plan.Warnings, func(w string) bool {
		return strings.Contains(w, "the setup runs npm ci with no network") && strings.Contains(w, `"caches": {"npm": true}`)
	}) {
		t.Errorf("no warning for npm ci with neither the registry nor the cache: %q", plan.Warnings)
	}
	got := keys(o)
	for _, role := range []string{"setup", "verification"} {
		if !slices.Contains(got[role], "npm_config_cache") || !slices.Contains(got[role], "npm_config_offline") {
			t.Errorf("%s without a network: env keys %v, want npm_config_cache and npm_config_offline", role, got[role])
		}
	}
	o.AllowNetSetup = []string{"registry.npmjs.org:443"}
	got = keys(o)
	if slices.Contains(got["setup"], "npm_config_offline") || !slices.Contains(got["setup"], "npm_config_prefer_offline") {
		t.Errorf("a setup allowed the registry: env keys %v, want npm_config_prefer_offline and no npm_config_offline", got["setup"])
	}
	if !slices.Contains(got["verification"], "npm_config_offline") {
		t.Errorf("the verification may not reach the registry: env keys %v", got["verification"])
	}
}
