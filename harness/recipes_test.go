package harness_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// The recipes of docs/real-repositories.md, each run as written on a small
// real repository built here: a stage 3 run whose verification is the
// project's own test command, in the sandbox, with no network.

// recipeRepo commits files as an owned git repository.
func recipeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "owned", "project")
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@invalid", "commit", "-q", "-m", "project"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// recipeRun runs stage 3 on src with the recipe's task and config and
// requires a pass; it returns the report and test.log.
func recipeRun(t *testing.T, src, spec string, cfg config.Config, getenv func(func(string) string) func(string) string) (*ctoharness.Report, string) {
	t.Helper()
	requireSandbox(t)
	set := compile(t)
	o, _ := sharedStage3(t, set)
	o.Source = src
	cfg.OwnedSources = []string{src}
	o.Config = cfg
	if getenv != nil {
		o.Getenv = getenv(o.Getenv)
	}
	s, err := task.Parse([]byte(spec), "recipe", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	o.Spec = &s
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "test.log"))
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s, blockers %v, results %+v\ntest.log:\n%s", rep.Status, rep.Blockers, rep.Tests.Results, log)
	}
	mustValidate(t, set, rep, true)
	return rep, string(log)
}

// runRecipe is recipeRun requiring that test.log holds want.
func runRecipe(t *testing.T, src, spec string, cfg config.Config, getenv func(func(string) string) func(string) string, want string) {
	t.Helper()
	if _, log := recipeRun(t, src, spec, cfg, getenv); !strings.Contains(log, want) {
		t.Errorf("test.log does not hold %q:\n%s", want, log)
	}
}

// Node: the built-in test runner, with a test that serves HTTP on the
// sandbox's loopback.
func TestRecipeNode(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the Node recipe is not checked")
	}
	src := recipeRepo(t, map[string]string{
		"package.json": `{"name": "recipe", "version": "1.0.0", "private": true, "scripts": {"test": "node --test"}}` + "\n",
		"index.js":     "exports.greet = (n) => `hello, ${n}`;\n",
		"test/greet.test.js": `const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const { greet } = require('../index.js');

test('greet', () => assert.strictEqual(greet('world'), 'hello, world'));

test('a server on loopback', async () => {
  const srv = http.createServer((req, res) => res.end(greet('loopback')));
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const body = await new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: srv.address().port }, (res) => {
      let b = '';
      res.on('data', (c) => (b += c));
      res.on('end', () => resolve(b));
    }).on('error', reject);
  });
  srv.close();
  assert.strictEqual(body, 'hello, loopback');
});
`,
		"docs/README.md": "# recipe\n",
	})
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"verification": {"command": "npm test", "timeout_seconds": 120}}`, config.Config{}, nil, "# pass 2")
}

// Python: unittest from the standard library, with a test that binds an
// ephemeral loopback port.
func TestRecipePython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the Python recipe is not checked")
	}
	src := recipeRepo(t, map[string]string{
		"pyproject.toml":      "[project]\nname = \"recipe\"\nversion = \"1.0\"\n",
		"recipe/__init__.py":  "def greet(name):\n    return 'hello, ' + name\n",
		"tests/__init__.py":   "",
		"tests/test_greet.py": "import socket\nimport unittest\n\nfrom recipe import greet\n\n\nclass GreetTest(unittest.TestCase):\n    def test_greet(self):\n        self.assertEqual(greet('world'), 'hello, world')\n\n    def test_loopback(self):\n        s = socket.socket()\n        s.bind(('127.0.0.1', 0))\n        s.listen()\n        c = socket.create_connection(s.getsockname())\n        a, _ = s.accept()\n        c.sendall(b'ping')\n        self.assertEqual(a.recv(4), b'ping')\n        for x in (a, c, s):\n            x.close()\n",
		"docs/README.md":      "# recipe\n",
	})
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"verification": {"command": "python3 -m unittest discover -v", "timeout_seconds": 120}}`, config.Config{}, nil, "Ran 2 tests")
}

// Rust: rustup's cargo in the home directory, declared as a toolchain;
// a crate without dependencies tested offline.
func TestRecipeRust(t *testing.T) {
	home := os.Getenv("HOME")
	cargoBin, rustup := filepath.Join(home, ".cargo", "bin"), filepath.Join(home, ".rustup")
	if _, err := os.Stat(filepath.Join(cargoBin, "cargo")); err != nil {
		t.Skip("no rustup cargo in ~/.cargo/bin: the Rust recipe is not checked")
	}
	if _, err := os.Stat(rustup); err != nil {
		t.Skip("no ~/.rustup: the Rust recipe is not checked")
	}
	src := recipeRepo(t, map[string]string{
		"Cargo.toml":     "[package]\nname = \"recipe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
		"Cargo.lock":     "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 3\n\n[[package]]\nname = \"recipe\"\nversion = \"0.1.0\"\n",
		"src/lib.rs":     "pub fn greet(name: &str) -> String { format!(\"hello, {name}\") }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn greets() { assert_eq!(super::greet(\"world\"), \"hello, world\"); }\n}\n",
		".gitignore":     "/target\n",
		"docs/README.md": "# recipe\n",
	})
	cfg := config.Config{Toolchains: []config.Toolchain{{Name: "rust", Paths: []string{cargoBin, rustup}, Path: []string{cargoBin},
		Env: map[string]string{"RUSTUP_HOME": rustup}}}}
	withHome := func(base func(string) string) func(string) string {
		return func(k string) string {
			if k == "HOME" {
				return home
			}
			return base(k)
		}
	}
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"verification": {"command": "cargo test --offline", "timeout_seconds": 300}}`, cfg, withHome, "test result: ok. 1 passed")
}

// Python with the distribution's pytest (Debian's python3-pytest): the
// system interpreter has it, so a src/ layout runs with no setup.
func TestRecipePytestFromSystem(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import pytest").Run(); err != nil {
		t.Skip("/usr/bin/python3 has no pytest (apt-get install python3-pytest): the pytest recipe is not checked")
	}
	src := recipeRepo(t, map[string]string{
		"src/recipe/__init__.py": "def greet(name):\n    return 'hello, ' + name\n",
		"tests/test_greet.py":    "from recipe import greet\n\n\ndef test_greet():\n    assert greet('world') == 'hello, world'\n",
		"docs/README.md":         "# recipe\n",
	})
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"verification": {"command": "PYTHONPATH=src python3 -m pytest -q", "timeout_seconds": 120}}`, config.Config{}, nil, "1 passed")
}

// C with CMake and CTest: configure, build and test in the verification's
// checkout.
func TestRecipeCMake(t *testing.T) {
	for _, p := range []string{"cmake", "ctest", "cc"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed: the CMake recipe is not checked", p)
		}
	}
	src := recipeRepo(t, map[string]string{
		"CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(recipe C)\nenable_testing()\nadd_executable(greet_test greet_test.c)\nadd_test(NAME greet COMMAND greet_test)\n",
		"greet_test.c":   "#include <string.h>\nint main(void) { return strcmp(\"hello\", \"hello\"); }\n",
		".gitignore":     "/build\n",
		"docs/README.md": "# recipe\n",
	})
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"verification": {"command": "cmake -S . -B build && cmake --build build && cd build && ctest --output-on-failure", "timeout_seconds": 300}}`,
		config.Config{}, nil, "100% tests passed")
}

// runGraded runs a recipe with a test report and returns the report's
// per-test summary of a passing, validated run.
func runGraded(t *testing.T, src, spec string) *ctoharness.TestResultsSummary {
	t.Helper()
	rep, _ := recipeRun(t, src, spec, config.Config{}, nil)
	if rep.Tests.Results == nil {
		t.Fatal("the run read no test report")
	}
	return rep.Tests.Results
}

// Node's own test runner writing TAP: each test read from the report.
func TestRecipeNodeTestReport(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the Node test report recipe is not checked")
	}
	src := recipeRepo(t, map[string]string{
		"index.js": "exports.greet = (n) => `hello, ${n}`;\n",
		"test/greet.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\nconst { greet } = require('../index.js');\n\n" +
			"test('greets the world', () => assert.strictEqual(greet('world'), 'hello, world'));\ntest('greets nobody', () => assert.strictEqual(greet(''), 'hello, '));\n",
		"docs/README.md": "# recipe\n",
	})
	r := runGraded(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"test_results": {"format": "tap", "path": "results.tap"}, "pass_to_pass": ["greets the world", "greets nobody"],
		"verification": {"command": "node --test --test-reporter=tap --test-reporter-destination=results.tap", "timeout_seconds": 120}}`)
	if r.Total != 2 || r.Pass != 2 || r.Grading == nil || !r.Grading.Passed {
		t.Errorf("results %+v, grading %+v: want both tests read and graded", r, r.Grading)
	}
}

// pytest's JUnit XML (the distribution's pytest), graded by its ids.
func TestRecipePytestJUnit(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import pytest").Run(); err != nil {
		t.Skip("/usr/bin/python3 has no pytest (apt-get install python3-pytest): the pytest JUnit recipe is not checked")
	}
	src := recipeRepo(t, map[string]string{
		"src/recipe/__init__.py": "def greet(name):\n    return 'hello, ' + name\n",
		"tests/test_greet.py":    "import pytest\n\nfrom recipe import greet\n\n\ndef test_greet():\n    assert greet('world') == 'hello, world'\n\n\n@pytest.mark.xfail(reason='not yet')\ndef test_shout():\n    assert greet('x') == 'HELLO, X'\n",
		"docs/README.md":         "# recipe\n",
	})
	r := runGraded(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"test_results": {"format": "junit", "path": "report.xml"}, "pass_to_pass": ["tests.test_greet.test_greet"],
		"verification": {"command": "PYTHONPATH=src python3 -m pytest -q -p no:cacheprovider --junitxml=report.xml", "timeout_seconds": 120}}`)
	if r.Total != 2 || r.Pass != 1 || r.XFail != 1 || r.Grading == nil || !r.Grading.Passed {
		t.Errorf("results %+v, grading %+v: want one pass, one expected failure, the listed test graded", r, r.Grading)
	}
}

// reachable skips the test unless every registry endpoint answers a TCP
// connection from this machine: the recipes below fetch from the real
// PyPI and crates.io, which a closed network does not reach.
func reachable(t *testing.T, endpoints ...string) {
	t.Helper()
	for _, e := range endpoints {
		c, err := net.DialTimeout("tcp", e, 5*time.Second)
		if err != nil {
			t.Skipf("%s cannot be reached from this machine (%v): the recipe that fetches from it is not checked", e, err)
		}
		c.Close()
	}
}

// Python with a dependency from PyPI, as docs/real-repositories.md says:
// the task's setup makes a virtual environment in the scratch TMPDIR
// (shared with the verification) and pip installs a pinned package through
// the egress forwarder (its own allowlist: PyPI alone); the verification,
// which has no network, imports it.
func TestRecipePipFromPyPI(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import venv, ensurepip").Run(); err != nil {
		t.Skip("/usr/bin/python3 has no venv module (apt-get install python3-venv): the pip recipe is not checked")
	}
	reachable(t, "pypi.org:443", "files.pythonhosted.org:443")
	src := recipeRepo(t, map[string]string{
		"requirements.txt":    "packaging==24.1\n",
		"recipe/__init__.py":  "from packaging.version import Version\n\n\ndef newer(a, b):\n    return Version(a) > Version(b)\n",
		"tests/__init__.py":   "",
		"tests/test_newer.py": "import unittest\n\nfrom recipe import newer\n\n\nclass NewerTest(unittest.TestCase):\n    def test_newer(self):\n        self.assertTrue(newer('1.10', '1.9'))\n",
		"docs/README.md":      "# recipe\n",
	})
	allow := []string{"pypi.org:443", "files.pythonhosted.org:443"}
	cfg := config.Config{Network: &config.NetworkAllow{SetupAllow: allow}}
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"network": {"setup_allow": ["pypi.org:443", "files.pythonhosted.org:443"]},
		"setup": {"command": "python3 -m venv \"$TMPDIR/venv\" && \"$TMPDIR/venv/bin/pip\" install --no-input --disable-pip-version-check -q -r requirements.txt", "timeout_seconds": 300},
		"verification": {"command": "\"$TMPDIR/venv/bin/python\" -m unittest discover -v", "timeout_seconds": 120}}`, cfg, nil, "Ran 1 test")
}

// Rust with a dependency from crates.io, as docs/real-repositories.md
// says: the task's setup fetches the locked crate through the egress
// forwarder (crates.io's index and downloads alone) into cargo's home in
// the command's scratch HOME; the verification builds and tests offline.
func TestRecipeCargoFromCratesIO(t *testing.T) {
	home := os.Getenv("HOME")
	cargoBin, rustup := filepath.Join(home, ".cargo", "bin"), filepath.Join(home, ".rustup")
	if _, err := os.Stat(filepath.Join(cargoBin, "cargo")); err != nil {
		t.Skip("no rustup cargo in ~/.cargo/bin: the cargo recipe is not checked")
	}
	reachable(t, "index.crates.io:443", "static.crates.io:443")
	src := recipeRepo(t, map[string]string{
		"Cargo.toml": "[package]\nname = \"recipe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.11\"\n",
		"Cargo.lock": "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"itoa\"\nversion = \"1.0.11\"\n" +
			"source = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"49f1f14873335454500d59611f1cf4a4b0f786f9ac11f4312a78e4cf2566695b\"\n\n" +
			"[[package]]\nname = \"recipe\"\nversion = \"0.1.0\"\ndependencies = [\n \"itoa\",\n]\n",
		"src/lib.rs":     "pub fn show(n: u64) -> String { itoa::Buffer::new().format(n).to_string() }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn shows() { assert_eq!(super::show(42), \"42\"); }\n}\n",
		".gitignore":     "/target\n",
		"docs/README.md": "# recipe\n",
	})
	cfg := config.Config{Toolchains: []config.Toolchain{{Name: "rust", Paths: []string{cargoBin, rustup}, Path: []string{cargoBin},
		Env: map[string]string{"RUSTUP_HOME": rustup}}},
		Network: &config.NetworkAllow{SetupAllow: []string{"index.crates.io:443", "static.crates.io:443"}}}
	withHome := func(base func(string) string) func(string) string {
		return func(k string) string {
			if k == "HOME" {
				return home
			}
			return base(k)
		}
	}
	runRecipe(t, src, `{"task": "Add a note under docs/.", "allowed_paths": ["docs/**"],
		"network": {"setup_allow": ["index.crates.io:443", "static.crates.io:443"]},
		"setup": {"command": "cargo fetch --locked", "timeout_seconds": 300},
		"verification": {"command": "cargo test --offline --locked", "timeout_seconds": 600}}`, cfg, withHome, "test result: ok. 1 passed")
}
