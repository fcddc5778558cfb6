package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirPrecedence(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	env["HOME"] = "/home/u"
	if d, _ := Dir("", get); d != "/home/u/.cache/cto-harness/agents" {
		t.Fatalf("HOME default: %s", d)
	}
	env["XDG_CACHE_HOME"] = "/xdg"
	if d, _ := Dir("", get); d != "/xdg/cto-harness/agents" {
		t.Fatalf("XDG: %s", d)
	}
	env[EnvAgentsDir] = "/env/agents"
	if d, _ := Dir("", get); d != "/env/agents" {
		t.Fatalf("env: %s", d)
	}
	if d, _ := Dir("/flag", get); d != "/flag" {
		t.Fatalf("flag: %s", d)
	}
	if _, err := Dir("", func(string) string { return "" }); err == nil {
		t.Fatal("no HOME, no XDG: want an error")
	}
}

func TestLookup(t *testing.T) {
	for _, n := range Names() {
		s, err := Lookup(n)
		if err != nil || string(s.Name) != n || s.Version == "" || s.Package == "" || s.Bin == "" || s.KeyVar == "" {
			t.Fatalf("%s: %+v %v", n, s, err)
		}
	}
	if _, err := Lookup("aider"); err == nil || !strings.Contains(err.Error(), "qwen-code") {
		t.Fatalf("unknown agent: %v", err)
	}
}

// fakePackage lays out what npm leaves behind for spec under prefix.
func fakePackage(t *testing.T, s Spec, prefix, version string) {
	t.Helper()
	pkg := filepath.Join(prefix, "node_modules", filepath.FromSlash(s.Package))
	if err := os.MkdirAll(filepath.Join(pkg, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version":"`+version+`","bin":{"`+s.Bin+`":"bin/cli.js"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "bin", "cli.js"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestInstalledNeedsPinnedVersionAndBin(t *testing.T) {
	s, _ := Lookup(string(QwenCode))
	dir := t.TempDir()
	if s.Installed(dir) {
		t.Fatal("empty dir counted as installed")
	}
	fakePackage(t, s, s.InstallDir(dir), "0.0.1")
	if s.Installed(dir) {
		t.Fatal("wrong version counted as installed")
	}
	fakePackage(t, s, s.InstallDir(dir), s.Version)
	if !s.Installed(dir) || !strings.HasSuffix(s.BinPath(dir), "bin/cli.js") {
		t.Fatalf("pinned version not seen: %s", s.BinPath(dir))
	}
	argv, err := s.Resolve(dir, nil)
	if err != nil || argv[0] != s.BinPath(dir) {
		t.Fatalf("resolve: %v %v", argv, err)
	}
	if argv, _ := s.Resolve(dir, []string{"/opt/qwen", "--x"}); argv[0] != "/opt/qwen" {
		t.Fatalf("override ignored: %v", argv)
	}
	if _, err := s.Resolve(t.TempDir(), nil); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "agents install qwen-code") {
		t.Fatalf("missing install: %v", err)
	}
}

// Install runs the real npm protocol against a stand-in npm script: the
// arguments are the documented ones, the result lands under the final
// directory, and a second install does nothing.
func TestInstallIdempotentWithStandInNpm(t *testing.T) {
	s, _ := Lookup(string(Codex))
	dir := t.TempDir()
	log := filepath.Join(t.TempDir(), "npm.log")
	npm := filepath.Join(t.TempDir(), "npm")
	script := `#!/bin/sh
echo "$@" >> ` + log + `
prefix=$3
mkdir -p "$prefix/node_modules/@openai/codex/bin"
printf '{"version":"` + s.Version + `","bin":{"codex":"bin/codex.js"}}' > "$prefix/node_modules/@openai/codex/package.json"
printf '#!/bin/sh\n' > "$prefix/node_modules/@openai/codex/bin/codex.js"
chmod +x "$prefix/node_modules/@openai/codex/bin/codex.js"
`
	if err := os.WriteFile(npm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	in := Installer{Dir: dir, Npm: npm}
	already, err := in.Install(context.Background(), s)
	if err != nil || already {
		t.Fatalf("first install: already=%v err=%v", already, err)
	}
	if !s.Installed(dir) {
		t.Fatal("not installed after install")
	}
	already, err = in.Install(context.Background(), s)
	if err != nil || !already {
		t.Fatalf("second install: already=%v err=%v", already, err)
	}
	data, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "install --prefix ") || !strings.HasSuffix(lines[0], "--no-audit --no-fund @openai/codex@0.169.0") {
		t.Fatalf("npm calls: %q", lines)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "codex", ".install-*"))
	if len(left) != 0 {
		t.Fatalf("temporary install dirs left: %v", left)
	}
}

func TestInstallWithoutNpm(t *testing.T) {
	s, _ := Lookup(string(GeminiCLI))
	t.Setenv("PATH", t.TempDir())
	_, err := Installer{Dir: t.TempDir()}.Install(context.Background(), s)
	if !errors.Is(err, ErrNpmMissing) || !strings.Contains(err.Error(), "install Node.js and npm") {
		t.Fatalf("err = %v", err)
	}
}

func TestInstallFailingNpm(t *testing.T) {
	s, _ := Lookup(string(GeminiCLI))
	npm := filepath.Join(t.TempDir(), "npm")
	if err := os.WriteFile(npm, []byte("#!/bin/sh\necho 'E404' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err := Installer{Dir: dir, Npm: npm}.Install(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "npm install @google/gemini-cli@0.61.0") || s.Installed(dir) {
		t.Fatalf("err = %v", err)
	}
}
