// Package warm is what the gate offers a run's commands beyond their own
// scratch: the config's toolchains and variables, the host's warm Go,
// npm, pip and cargo caches (found by package warmcache), the environment
// and the view additions each command gets from them, and the kept Go
// build cache warm-up that runs beside Case. The gate finds the caches
// once (New) and refuses, with CONFIG_INVALID, a run whose toolchains or
// caches cannot be given to every command; the rest of the run asks the
// Caches value, so a cache cannot move mid-run.
package warm

import (
	"context"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/toolenv"
	"github.com/cto-harness/cto-harness/harness/warmcache"
)

// Commands are the commands the toolchains and caches are given to, in the
// order the gate checks them.
var commands = []egress.Command{egress.CommandCase, egress.CommandSetup, egress.CommandVerify}

// Input is what the gate offers the caches from.
type Input struct {
	// Config holds the caches, the toolchains and env, and the owned,
	// target and external roots no cache may lie inside.
	Config config.Config
	// Getenv is the harness's own environment.
	Getenv func(string) string
	// Source and RunsDir are protected like the config's roots.
	Source, RunsDir string
	// Unsandboxed: the host's caches would be written directly, so they
	// are not offered (they are offered only through the sandbox's
	// overlays); the toolchains still are.
	Unsandboxed bool
}

// Caches is what the gate found for one run.
type Caches struct {
	cfg         config.Config
	getenv      func(string) string // pinned to the caches found
	unsandboxed bool
	goc         *warmcache.Go // nil: caches.go is off
	eco         Eco
}

// New checks, at the gate, that every command's toolchains, variables and
// caches can be given, and finds the caches. The error is the gate's
// CONFIG_INVALID blocker, for the first thing that cannot be given.
func New(ctx context.Context, in Input) (*Caches, error) {
	for _, cmd := range commands {
		if _, err := Tools(in.Config, cmd, in.Getenv); err != nil {
			return nil, err
		}
	}
	g, ok, err := GoCaches(ctx, in.Config, in.Getenv)
	if err != nil {
		return nil, err
	}
	e, err := DetectEco(ctx, in)
	if err != nil {
		return nil, err
	}
	c := &Caches{cfg: in.Config, getenv: e.Pin(in.Getenv), unsandboxed: in.Unsandboxed, eco: e}
	if ok {
		c.goc = &g
	}
	return c, nil
}

// Getenv is the harness's environment answering the caches' variables
// with what the gate found: every later detection (npm, pip) gets that
// answer instead of asking the tool again.
func (c *Caches) Getenv() func(string) string { return c.getenv }

// Tools is what the config's toolchains and variables give cmd (package
// toolenv). It is a function of the config and the harness's environment,
// so the gate's check holds for every later call.
func Tools(cfg config.Config, cmd egress.Command, getenv func(string) string) (toolenv.Set, error) {
	s, err := toolenv.For(cfg, string(cmd), getenv)
	if err != nil {
		return s, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepGate, err, "the config's toolchains or env cannot be used")
	}
	return s, nil
}

// GoCaches is the host's Go caches when the config offers them (ok false
// when it does not).
func GoCaches(ctx context.Context, cfg config.Config, getenv func(string) string) (g warmcache.Go, ok bool, err error) {
	if cfg.Caches == nil || !cfg.Caches.Go {
		return g, false, nil
	}
	g, err = warmcache.DetectGo(ctx, getenv)
	if err != nil {
		return g, false, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepGate, err, "the config's caches.go cannot be offered")
	}
	return g, true, nil
}

// Env is env with cmd's toolchains, variables and warm caches in it;
// allowed says whether cmd's allowlist lets it reach a host (without the
// registry, each tool runs in its offline mode on the cache).
func (c *Caches) Env(cmd egress.Command, env []string, allowed func(host string) bool) []string {
	s, _ := Tools(c.cfg, cmd, c.getenv) // checked by New
	env = s.Apply(env)
	if c.unsandboxed {
		return env
	}
	if c.goc != nil {
		env = backend.ReplaceEnv(env, c.goc.Env())
	}
	if add := c.eco.Env(backend.EnvValue(env, "HOME"), allowed); len(add) > 0 {
		env = backend.ReplaceEnv(env, add)
	}
	return env
}

// Record is the npm, pip and cargo caches' record for the gate's event:
// which are shown and which the host does not have.
func (c *Caches) Record() map[string]any { return c.eco.Record() }
