package harness

import (
	"context"
	"path/filepath"
	"sort"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/toolenv"
	"github.com/cto-harness/cto-harness/harness/warmcache"
)

// tools is what the config's toolchains and variables give cmd (package
// toolenv). It is a function of the config and the harness's environment,
// so the gate's check (checkTools) holds for every later call.
func tools(o Options, cmd egress.Command) (toolenv.Set, error) {
	s, err := toolenv.For(o.Config, string(cmd), o.Getenv)
	if err != nil {
		return s, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepGate, err, "the config's toolchains or env cannot be used")
	}
	return s, nil
}

// warmGo is the host's Go caches when the config offers them (ok false
// when it does not).
func warmGo(o Options) (g warmcache.Go, ok bool, err error) {
	if o.Config.Caches == nil || !o.Config.Caches.Go {
		return g, false, nil
	}
	g, err = warmcache.DetectGo(context.Background(), o.Getenv)
	if err != nil {
		return g, false, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepGate, err, "the config's caches.go cannot be offered")
	}
	return g, true, nil
}

// checkTools refuses, at the gate, a run whose toolchains, variables or
// caches cannot be given to every command.
func (r *run) checkTools() {
	for _, cmd := range []egress.Command{egress.CommandCase, egress.CommandSetup, egress.CommandVerify} {
		if _, err := tools(r.o, cmd); err != nil {
			r.BlockErr(err, ctoharness.StepGate)
			return
		}
	}
	if _, _, err := warmGo(r.o); err != nil {
		r.BlockErr(err, ctoharness.StepGate)
		return
	}
	e, err := warmEco(r.o)
	if err != nil {
		r.BlockErr(err, ctoharness.StepGate)
		return
	}
	r.o.Getenv = e.pin(r.o.Getenv)
}

// toolEnv is env with cmd's toolchains, variables and warm caches in it;
// the gate has checked that they resolve.
func (r *run) toolEnv(cmd egress.Command, env []string) []string {
	s, _ := tools(r.o, cmd)
	env = s.Apply(env)
	// Unsandboxed, the host's caches would be written directly: they are
	// offered only through the sandbox's overlays.
	if g, ok, _ := warmGo(r.o); ok && !r.o.Unsandboxed {
		env = replaceEnv(env, g.Env())
	}
	return r.ecoEnv(cmd, env)
}

// replaceEnv is env with each of set's variables in place of the one env
// already has. Appending would leave two GOCACHE entries, and exec keeps
// whichever sorts last: the scratch's, when the host's cache path sorts
// first, so every command compiled from a cold cache.
func replaceEnv(env, set []string) []string {
	drop := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	out = append(out, set...)
	sort.Strings(out)
	return out
}

// warmView adds the warm caches to a view (the verification's when
// verification is set): both Go caches as overlays at their host paths,
// with a layer of this run's own. The verification's view also shows its
// checkout at checkoutInView and, when keepGo found or made one for the
// baseline, the kept build cache layer over the host's (keptcache.go).
func (r *run) warmView(v *sandbox.View, verification bool) error {
	g, ok, _ := warmGo(r.o)
	if !ok || r.o.Unsandboxed {
		return nil
	}
	work, scratch := r.roots(verification)
	var kept []string
	if verification {
		v.Moved = append(v.Moved, sandbox.Bind{Path: checkoutInView, Source: work})
		v.Cwd = checkoutInView
		if k := r.Report.Sandbox.KeptBuildCache; k != nil && k.Layer != "" {
			kept = []string{k.Layer} // checked by keepGo, which ran first
		}
	}
	ovs, err := g.Overlays(filepath.Join(scratch, "warm"), kept...)
	if err != nil {
		return err
	}
	v.Overlays = append(v.Overlays, ovs...)
	return nil
}
