package warm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/warmcache"
)

// Eco is the npm, pip and cargo caches the config offers, as found on
// this host (nil: not asked for).
type Eco struct {
	npm   *warmcache.Npm
	pip   *warmcache.Pip
	cargo *warmcache.Cargo
}

// The pin* variables are the ones each detection reads first: once the gate
// has found a cache, the rest of the run asks for that answer, so a cache
// cannot move mid-run and npm or pip is asked only once.
const (
	pinNpm   = "npm_config_cache"
	pinPip   = "PIP_CACHE_DIR"
	pinCargo = "CARGO_HOME"
)

// DetectEco finds the caches the config offers. A cache that was asked for
// and cannot be found blocks with CONFIG_INVALID, naming the fix; so does
// one inside a protected root, and a toolchain or variable that sets what
// the caches set.
func DetectEco(ctx context.Context, in Input) (Eco, error) {
	var e Eco
	c := in.Config.Caches
	if c == nil {
		return e, nil
	}
	fail := func(which, fix string, err error) error {
		return ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepGate, err,
			"the config's caches.%s cannot be offered (%s)", which, fix)
	}
	if c.Npm {
		n, err := warmcache.DetectNpm(ctx, in.Getenv)
		if err != nil {
			return e, fail("npm", "set npm_config_cache in the harness's environment to the npm cache, or turn caches.npm off", err)
		}
		e.npm = &n
	}
	if c.Pip || c.PipWheelhouse != "" {
		p, err := warmcache.DetectPip(ctx, in.Getenv, c.PipWheelhouse)
		if err != nil {
			return e, fail("pip", "set PIP_CACHE_DIR in the harness's environment to pip's cache, fix caches.pip_wheelhouse, or turn caches.pip off", err)
		}
		e.pip = &p
	}
	if c.Cargo {
		g, err := warmcache.DetectCargo(ctx, in.Getenv)
		if err != nil {
			return e, fail("cargo", "set CARGO_HOME in the harness's environment, or turn caches.cargo off", err)
		}
		e.cargo = &g
	}
	if err := e.outsideRoots(in); err != nil {
		return e, err
	}
	return e, e.notSetByTools(in)
}

// outsideRoots refuses a cache inside a repository or root the harness
// protects: it would show it to Case, and the view would refuse it later,
// with less to say.
func (e Eco) outsideRoots(in Input) error {
	cfg := in.Config
	for _, d := range e.Dirs("/") {
		for _, group := range [][]string{{in.Source, in.RunsDir}, cfg.OwnedSources, cfg.TargetRoots, cfg.ExternalRoots} {
			for _, root := range group {
				if root != "" && filepath.IsAbs(root) && filepath.Clean(root) != "/" && sandbox.Within(d.Host, root) {
					key, _, _ := strings.Cut(strings.Replace(d.Name, "pip-wheelhouse", "pip_wheelhouse", 1), "-")
					return ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepGate,
						fmt.Errorf("%w: %s lies inside %s", warmcache.ErrUnavailable, d.Host, root),
						"the config's caches.%s cannot be offered: a warm cache must not be inside the source, the runs directory or a configured root (move it, or turn that cache off)", key)
				}
			}
		}
	}
	return nil
}

// notSetByTools refuses a toolchain or variable that sets a cache's
// variable: the caches' variables are the harness's, and a toolchain's
// CARGO_HOME would send cargo to the host's home, past the overlays.
func (e Eco) notSetByTools(in Input) error {
	set := e.Keys()
	for _, cmd := range commands {
		s, _ := Tools(in.Config, cmd, in.Getenv)
		for _, kv := range s.Env {
			if k, _, _ := strings.Cut(kv, "="); set[k] {
				return ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepGate,
					fmt.Errorf("%w: the config's toolchains or env set %s for %s", warmcache.ErrUnavailable, k, cmd),
					"the warm caches set %s themselves; remove it from the config's toolchains and env, or turn that cache off", k)
			}
		}
	}
	return nil
}

// Keys are the variables the offered caches may set, whether or not the
// host has the cache yet.
func (e Eco) Keys() map[string]bool {
	set := map[string]bool{}
	add := func(ks ...string) {
		for _, k := range ks {
			set[k] = true
		}
	}
	if e.npm != nil {
		add("npm_config_cache", "npm_config_prefer_offline", "npm_config_offline")
	}
	if e.pip != nil {
		add("PIP_CACHE_DIR", "PIP_FIND_LINKS", "PIP_NO_INDEX")
	}
	if e.cargo != nil {
		add("CARGO_HOME", "CARGO_NET_OFFLINE")
	}
	return set
}

// Pin is getenv answering the caches' variables with what the gate found.
func (e Eco) Pin(getenv func(string) string) func(string) string {
	pins := map[string]string{}
	if e.npm != nil {
		pins[pinNpm] = e.npm.Cache
	}
	if e.pip != nil {
		pins[pinPip] = e.pip.Cache
	}
	if e.cargo != nil {
		pins[pinCargo] = e.cargo.Home
	}
	if len(pins) == 0 {
		return getenv
	}
	return func(k string) string {
		if v, ok := pins[k]; ok {
			return v
		}
		return getenv(k)
	}
}

// Env is what the caches add to the environment of a command whose HOME is
// home; allowed says whether its allowlist lets it reach a host. Without
// the registry, each tool runs in its offline mode on the cache.
func (e Eco) Env(home string, allowed func(host string) bool) []string {
	var env []string
	if e.npm != nil {
		env = append(env, e.npm.Env(!allowed(warmcache.NpmRegistry))...)
	}
	if e.pip != nil {
		env = append(env, e.pip.Env(!allowed(warmcache.PipIndex))...)
	}
	if e.cargo != nil {
		env = append(env, e.cargo.Env(home, !allowed(warmcache.CargoIndex))...)
	}
	return env
}

// Dirs are the host directories shown to a command whose HOME is home.
func (e Eco) Dirs(home string) []warmcache.Dir {
	var d []warmcache.Dir
	if e.npm != nil {
		d = append(d, e.npm.Dirs()...)
	}
	if e.pip != nil {
		d = append(d, e.pip.Dirs()...)
	}
	if e.cargo != nil {
		d = append(d, e.cargo.Dirs(home)...)
	}
	return d
}

// Record says, for the gate's event, which caches are shown and which the
// host does not have (left out: the tool starts from an empty cache).
func (e Eco) Record() map[string]any {
	out := map[string]any{}
	for _, d := range e.Dirs("/") {
		st, err := os.Stat(d.Host)
		out[d.Name] = map[string]any{"host": d.Host, "shown": err == nil && st.IsDir()}
	}
	return out
}

// Warnings are --dry-run's warnings for a setup or verification that
// installs with npm or pip with neither the registry allowed nor the cache
// offered: it has nothing to install from, so the run will likely fail.
// (cargo says so itself at run time, see verify's offline reasons.)
func Warnings(c *config.Caches, spec task.Spec, pol egress.Policy) []string {
	if c == nil {
		c = &config.Caches{}
	}
	tools := []struct {
		programs, verbs []string
		offered         bool
		host, fix       string
	}{
		{[]string{"npm"}, []string{"ci", "install", "i"}, c.Npm, warmcache.NpmRegistry, `"caches": {"npm": true} (run the install on the host once to fill it)`},
		{[]string{"pip", "pip3"}, []string{"install"}, c.PipWheelhouse != "", warmcache.PipIndex, `"caches": {"pip_wheelhouse": DIR} (wheels from pip download -d DIR)`},
	}
	type run struct {
		role, command string
		allow         egress.List
	}
	runs := []run{{"verification", spec.Verification.Command, pol.Verify}}
	if spec.Setup != nil {
		runs = append([]run{{"setup", spec.Setup.Command, pol.Setup}}, runs...)
	}
	var out []string
	for _, r := range runs {
		words := commandWords(r.command)
		for _, t := range tools {
			i := slices.IndexFunc(words, func(w string) bool { return slices.Contains(t.programs, filepath.Base(w)) })
			if i < 0 || i+1 >= len(words) || !slices.Contains(t.verbs, words[i+1]) || t.offered || r.allow.HasHost(t.host) {
				continue
			}
			out = append(out, fmt.Sprintf("the %s runs %s %s with no network to %s and no warm cache, so it has nothing to install from; add %s to the config, or allow %s:443 for it",
				r.role, filepath.Base(words[i]), words[i+1], t.host, t.fix, t.host))
		}
	}
	return out
}

// commandWords splits a shell command into words, roughly: enough to find
// a program (by name or path: "$TMPDIR/venv/bin/pip") and its first
// argument.
func commandWords(command string) []string {
	return strings.FieldsFunc(command, func(r rune) bool { return strings.ContainsRune(" \t\n;&|()`'\"", r) })
}
