package warm

import (
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/warmcache"
)

// ShowGo adds the Go caches to v, the view of a command whose work
// directory is work and scratch is scratch (the verification's when
// verification is set): both caches as overlays at their host paths, with
// a layer of this run's own. The verification's view also shows its
// checkout at CheckoutInView and, when the warm-up found or made one for
// the baseline (kept, nil before it ended), the kept build cache layer
// over the host's.
func (c *Caches) ShowGo(v *sandbox.View, verification bool, work, scratch string, kept *ctoharness.KeptCacheRecord) error {
	if c.goc == nil || c.unsandboxed {
		return nil
	}
	var layers []string
	if verification {
		v.Moved = append(v.Moved, sandbox.Bind{Path: CheckoutInView, Source: work})
		v.Cwd = CheckoutInView
		if kept != nil && kept.Layer != "" {
			layers = []string{kept.Layer} // checked by the warm-up, which ran first
		}
	}
	ovs, err := c.goc.Overlays(filepath.Join(scratch, "warm"), layers...)
	if err != nil {
		return err
	}
	v.Overlays = append(v.Overlays, ovs...)
	return nil
}

// ShowEco adds the warm npm, pip and cargo caches to v, the view of a
// command whose scratch is scratch, each with a layer of this run's own.
func (c *Caches) ShowEco(v *sandbox.View, scratch string) error {
	if c.unsandboxed {
		return nil
	}
	home := backend.EnvValue(backend.Env(scratch, "", "", ""), "HOME")
	ovs, _, err := warmcache.ShowDirs(c.eco.Dirs(home), filepath.Join(scratch, "warm"))
	if err != nil {
		return err
	}
	v.Overlays = append(v.Overlays, ovs...)
	return nil
}
