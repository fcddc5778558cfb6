package warmcache_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/warmcache"
)

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// The host's npm is asked where its cache is, with the user's .npmrc, and
// asking writes nothing into that cache (npm logs every command there).
func TestDetectNpmAsksNpm(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed")
	}
	home, cache := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte("cache="+cache+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := warmcache.DetectNpm(context.Background(), getenv(map[string]string{"PATH": os.Getenv("PATH"), "HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if n.Cache != cache {
		t.Errorf("cache %q, want %q", n.Cache, cache)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("asking npm wrote into its cache: %v", ents)
	}
	// The variable wins and runs nothing; a relative one is refused.
	if n, err := warmcache.DetectNpm(context.Background(), getenv(map[string]string{"npm_config_cache": "/x/npm"})); err != nil || n.Cache != "/x/npm" {
		t.Errorf("npm_config_cache: %+v, %v", n, err)
	}
	if _, err := warmcache.DetectNpm(context.Background(), getenv(map[string]string{"npm_config_cache": "npm"})); !errors.Is(err, warmcache.ErrUnavailable) {
		t.Errorf("a relative npm_config_cache: %v", err)
	}
	// No npm on PATH: ~/.npm.
	if n, err := warmcache.DetectNpm(context.Background(), getenv(map[string]string{"PATH": t.TempDir(), "HOME": "/home/u"})); err != nil || n.Cache != "/home/u/.npm" {
		t.Errorf("without npm: %+v, %v", n, err)
	}
}

// pip is asked too (`pip cache dir`), following XDG_CACHE_HOME.
func TestDetectPip(t *testing.T) {
	pip, err := exec.LookPath("pip3")
	if err != nil {
		t.Skip("pip3 is not on PATH")
	}
	xdg := t.TempDir()
	env := map[string]string{"PATH": filepath.Dir(pip) + ":" + os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "XDG_CACHE_HOME": xdg, "PYENV_ROOT": os.Getenv("PYENV_ROOT")}
	p, err := warmcache.DetectPip(context.Background(), getenv(env), "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Cache != filepath.Join(xdg, "pip") {
		t.Errorf("cache %q, want %q", p.Cache, filepath.Join(xdg, "pip"))
	}
	if _, err := warmcache.DetectPip(context.Background(), getenv(env), "/nonexistent/wheels"); !errors.Is(err, warmcache.ErrUnavailable) {
		t.Errorf("a missing wheelhouse: %v", err)
	}
	wh := t.TempDir()
	p, err = warmcache.DetectPip(context.Background(), getenv(map[string]string{"PIP_CACHE_DIR": "/c/pip"}), wh)
	if err != nil || p.Cache != "/c/pip" || p.Wheelhouse != wh {
		t.Errorf("PIP_CACHE_DIR and a wheelhouse: %+v, %v", p, err)
	}
}

// Offline, each tool is told to use only its cache; online, it is not.
func TestEnvOffline(t *testing.T) {
	npmCache, pipCache := t.TempDir(), t.TempDir()
	n := warmcache.Npm{Cache: npmCache}
	if e := n.Env(true); !slices.Contains(e, "npm_config_offline=true") || !slices.Contains(e, "npm_config_cache="+npmCache) {
		t.Errorf("npm offline: %v", e)
	}
	if e := n.Env(false); slices.Contains(e, "npm_config_offline=true") || !slices.Contains(e, "npm_config_prefer_offline=true") {
		t.Errorf("npm online: %v", e)
	}
	p := warmcache.Pip{Cache: pipCache, Wheelhouse: "/w"}
	if e := p.Env(true); !slices.Contains(e, "PIP_NO_INDEX=1") || !slices.Contains(e, "PIP_FIND_LINKS=/w") || !slices.Contains(e, "PIP_CACHE_DIR="+pipCache) {
		t.Errorf("pip offline: %v", e)
	}
	if e := p.Env(false); slices.Contains(e, "PIP_NO_INDEX=1") {
		t.Errorf("pip online: %v", e)
	}
	// A cache the host does not have is not shown, and not named: the
	// tool would fail to create it inside the hidden home.
	for _, e := range [][]string{warmcache.Npm{Cache: "/nonexistent/npm"}.Env(true), warmcache.Pip{Cache: "/nonexistent/pip"}.Env(true)} {
		for _, kv := range e {
			if strings.Contains(kv, "/nonexistent/") {
				t.Errorf("a missing cache is named: %v", e)
			}
		}
	}
	c := warmcache.Cargo{Home: "/h/.cargo"}
	if e := c.Env("/s/home", true); !slices.Equal(e, []string{"CARGO_HOME=/s/home/.cargo", "CARGO_NET_OFFLINE=true"}) {
		t.Errorf("cargo offline: %v", e)
	}
	d := c.Dirs("/s/home")
	if len(d) != 2 || d[0].Host != "/h/.cargo/registry" || d[0].At != "/s/home/.cargo/registry" || d[1].Host != "/h/.cargo/git" {
		t.Errorf("cargo dirs: %+v", d)
	}
}

// A directory the host does not have is left out and named; the others
// get a layer each under the run's layer directory.
func TestShowDirs(t *testing.T) {
	have, layer := t.TempDir(), filepath.Join(t.TempDir(), "warm")
	ovs, missing, err := warmcache.ShowDirs([]warmcache.Dir{{Name: "npm", Host: have, At: have}, {Name: "pip", Host: "/nonexistent/pip", At: "/nonexistent/pip"}}, layer)
	if err != nil {
		t.Fatal(err)
	}
	if len(ovs) != 1 || ovs[0].Lower != have || ovs[0].Upper != filepath.Join(layer, "npm", "upper") {
		t.Errorf("overlays %+v", ovs)
	}
	if len(missing) != 1 || missing[0] != "pip (/nonexistent/pip)" {
		t.Errorf("missing %v", missing)
	}
	if st, err := os.Stat(filepath.Join(layer, "npm", "work")); err != nil || !st.IsDir() {
		t.Errorf("no work directory: %v", err)
	}
}
