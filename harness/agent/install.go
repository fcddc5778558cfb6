package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// EnvAgentsDir overrides where agents are installed.
const EnvAgentsDir = "CTO_HARNESS_AGENTS_DIR"

// ErrNpmMissing means npm is not on PATH, so nothing can be installed.
var ErrNpmMissing = errors.New("npm not found")

// ErrNotInstalled means the pinned release is not in the agents directory.
var ErrNotInstalled = errors.New("agent not installed")

// Dir resolves the agents directory: the flag, then $CTO_HARNESS_AGENTS_DIR,
// then $XDG_CACHE_HOME/cto-harness/agents, then ~/.cache/cto-harness/agents.
// It lies outside any repository, so installs are shared by every run.
func Dir(flag string, getenv func(string) string) (string, error) {
	switch {
	case flag != "":
		return filepath.Abs(flag)
	case getenv(EnvAgentsDir) != "":
		return filepath.Abs(getenv(EnvAgentsDir))
	case getenv("XDG_CACHE_HOME") != "":
		return filepath.Join(getenv("XDG_CACHE_HOME"), "cto-harness", "agents"), nil
	case getenv("HOME") != "":
		return filepath.Join(getenv("HOME"), ".cache", "cto-harness", "agents"), nil
	}
	return "", fmt.Errorf("cannot place the agents directory: set %s, XDG_CACHE_HOME or HOME", EnvAgentsDir)
}

// InstallDir is where one pinned release lives: DIR/<name>/<version>.
func (s Spec) InstallDir(dir string) string { return filepath.Join(dir, string(s.Name), s.Version) }

// BinPath is the installed executable, as the package's own package.json
// names it (npm's node_modules/.bin link is not relied on: it is sometimes
// not made).
func (s Spec) BinPath(dir string) string {
	p, _ := s.binAt(s.InstallDir(dir))
	return p
}

// Installed reports whether the pinned release is installed: the package's
// package.json says the pinned version and its executable exists.
func (s Spec) Installed(dir string) bool {
	return s.installedAt(s.InstallDir(dir))
}

func (s Spec) installedAt(prefix string) bool {
	p, err := s.binAt(prefix)
	if err != nil {
		return false
	}
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// binAt reads the package's package.json under prefix: its version must be
// the pinned one, and its "bin" (a string or a map) names the executable.
func (s Spec) binAt(prefix string) (string, error) {
	pkgDir := filepath.Join(prefix, "node_modules", filepath.FromSlash(s.Package))
	data, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string          `json:"version"`
		Bin     json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return "", fmt.Errorf("%s: %w", pkgDir, err)
	}
	if pkg.Version != s.Version {
		return "", fmt.Errorf("%s holds version %s, not the pinned %s", pkgDir, pkg.Version, s.Version)
	}
	var rel string
	var bins map[string]string
	if json.Unmarshal(pkg.Bin, &rel) != nil {
		if err := json.Unmarshal(pkg.Bin, &bins); err != nil {
			return "", fmt.Errorf("%s: package.json has no usable bin: %w", pkgDir, err)
		}
		rel = bins[s.Bin]
	}
	if rel == "" {
		return "", fmt.Errorf("%s: package.json names no %s executable", pkgDir, s.Bin)
	}
	return filepath.Join(pkgDir, filepath.FromSlash(rel)), nil
}

// Installer runs npm.
type Installer struct {
	Dir    string // agents directory
	Npm    string // npm executable; "" looks it up on PATH
	Output io.Writer
}

// Install installs the pinned release unless it is already there. npm
// installs into a temporary prefix next to the final one, which is renamed
// into place only when complete, so an interrupted or concurrent install
// never leaves a half-installed release that looks installed.
func (in Installer) Install(ctx context.Context, s Spec) (already bool, err error) {
	final := s.InstallDir(in.Dir)
	if s.installedAt(final) {
		return true, nil
	}
	npm := in.Npm
	if npm == "" {
		p, err := exec.LookPath("npm")
		if err != nil {
			return false, fmt.Errorf("%w on PATH: install Node.js and npm (e.g. apt-get install nodejs npm), or point the config's agent.command at an installed %s: %v", ErrNpmMissing, s.Bin, err)
		}
		npm = p
	}
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, fmt.Errorf("create %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, ".install-"+s.Version+"-")
	if err != nil {
		return false, fmt.Errorf("create a temporary install directory in %s: %w", parent, err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", s.Package+"@"+s.Version)
	out := in.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("npm install %s@%s into %s failed: %w (see npm's output above)", s.Package, s.Version, tmp, err)
	}
	if !s.installedAt(tmp) {
		return false, fmt.Errorf("npm install %s@%s finished but %s is not in %s", s.Package, s.Version, s.Bin, tmp)
	}
	if err := os.Rename(tmp, final); err != nil {
		if s.installedAt(final) { // another install finished first
			return true, nil
		}
		if rmErr := os.RemoveAll(final); rmErr == nil {
			err = os.Rename(tmp, final)
		}
		if err != nil {
			return false, fmt.Errorf("move the install into %s: %w", final, err)
		}
	}
	return false, nil
}

// Resolve finds the executable to run for an agent: override (the config's
// command) if given, else the installed pinned release.
func (s Spec) Resolve(dir string, override []string) ([]string, error) {
	if len(override) > 0 {
		return append([]string(nil), override...), nil
	}
	if !s.Installed(dir) {
		return nil, fmt.Errorf("%w: %s %s is not in %s; run `cto-harness agents install %s`, or set agent.command in the config",
			ErrNotInstalled, s.Name, s.Version, s.InstallDir(dir), s.Name)
	}
	return []string{s.BinPath(dir)}, nil
}
