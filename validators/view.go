package validators

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// homeRoots are hidden from every view, whatever the config says.
var homeRoots = []string{"/root", "/home"}

// checkSandboxView checks the recorded filesystem views: a sandboxed Case
// process had one, each digest matches its mounts, nothing writable lies
// outside the fixture and the scratch directory (bar the private /tmp,
// /dev/shm and device nodes), and the source, owned and Target roots, home
// directories and every recorded hidden path are absent from it.
func checkSandboxView(v *runView, c collector) {
	const chk = "sandbox_view"
	r := v.report
	if r.Sandbox.Enforced && r.CaseProcessStarted && r.Backend == ctoharness.BackendCase && r.Sandbox.View == nil {
		c.fail(chk, evidence.ReportJSON, "Case ran in the sandbox but report.json records no filesystem view (sandbox.view)")
	}
	// A kept build cache the report names was read by the verification.
	if k := r.Sandbox.KeptBuildCache; k != nil && k.Layer != "" && r.Sandbox.VerificationView != nil {
		read := false
		for _, m := range r.Sandbox.VerificationView.Mounts {
			read = read || (m.Kind == ctoharness.ViewOverlay && slices.Contains(m.Lowers, k.Layer))
		}
		if !read {
			c.fail(chk, evidence.ReportJSON, "sandbox.kept_build_cache names the layer %s, which the verification's view does not show", k.Layer)
		}
	}
	for _, vv := range []struct {
		name         string
		rec          *ctoharness.ViewRecord
		verification bool
	}{{"sandbox.view", r.Sandbox.View, false}, {"sandbox.verification_view", r.Sandbox.VerificationView, true}} {
		if vv.rec != nil {
			checkView(r, vv.name, vv.rec, vv.verification, func(format string, a ...any) { c.fail(chk, evidence.ReportJSON, vv.name+": "+format, a...) })
		}
	}
}

// checkView checks one view. Case's may write its fixture and scratch; the
// verification's only its own checkout and scratch, and must not show
// Case's at all: what Case left outside the result must not reach it.
func checkView(r *ctoharness.Report, name string, rec *ctoharness.ViewRecord, verification bool, fail func(string, ...any)) {
	if got := ctoharness.ViewDigest(rec.Mounts); got != rec.Digest {
		fail("digest %s does not match its mounts (%s)", rec.Digest, got)
	}
	work, scratch := r.FixturePath, filepath.Join(r.RuntimeWorkspaceRoot, "scratch")
	if verification {
		caseScratch := scratch
		work, scratch = checkout.Dirs(r.RuntimeWorkspaceRoot)
		for _, m := range rec.Mounts {
			if m.Source != "" && ((r.FixturePath != "" && inside(m.Source, r.FixturePath)) || (r.RuntimeWorkspaceRoot != "" && inside(m.Source, caseScratch))) {
				fail("Case's %s is visible to the verification through the mount at %s", m.Source, m.Path)
			}
		}
	}
	own := func(p string) bool {
		return (work != "" && inside(p, work)) || (r.RuntimeWorkspaceRoot != "" && inside(p, scratch))
	}
	for _, m := range rec.Mounts {
		if m.Mode != ctoharness.ViewRW {
			continue
		}
		switch {
		case m.Kind == ctoharness.ViewBind && m.Source == m.Path && own(m.Path):
		case verification && m.Kind == ctoharness.ViewBind && m.Source == work && r.Sandbox.KeptBuildCache != nil && m.Path == r.Sandbox.KeptBuildCache.CheckoutPath:
			// The checkout, shown at the fixed path Go's build cache keys
			// its packages by.
		case m.Kind == ctoharness.ViewTmpfs && (m.Path == "/tmp" || m.Path == "/dev/shm"):
		case m.Kind == ctoharness.ViewDevice && inside(m.Path, "/dev"):
		case m.Kind == ctoharness.ViewOverlay && m.Layer != "" && r.RuntimeWorkspaceRoot != "" && inside(m.Layer, scratch):
			// A warm cache: the host's copy is only read, the writes stay in
			// the run's own scratch.
		default:
			fail("writable %s mount at %s (from %q) lies outside its work and scratch directories", m.Kind, m.Path, m.Source)
		}
	}
	// A kept build cache is only ever read: a layer under an overlay, kept
	// in the runs directory's cache, and the one the report names.
	kept := filepath.Join(filepath.Dir(r.RunArtifactDir), ".cache", "go-build")
	for _, m := range rec.Mounts {
		for _, l := range m.Lowers {
			switch {
			case m.Kind != ctoharness.ViewOverlay:
				fail("the %s mount at %s has read-only layers (%s); only an overlay has", m.Kind, m.Path, l)
			case !verification || r.Sandbox.KeptBuildCache == nil || l != r.Sandbox.KeptBuildCache.Layer || !inside(l, kept):
				fail("the overlay at %s reads the layer %s, which is not this run's kept build cache under %s", m.Path, l, kept)
			}
		}
	}
	type root struct {
		path     string
		readable bool // a bind inside it is allowed when it is a configured read path
	}
	var roots []root
	for _, p := range append(append(append([]string{r.SourcePath, r.SourceGitDir}, r.Policy.OwnedSources...), r.Policy.TargetRoots...), r.Policy.ExternalRoots...) {
		if p != "" && p != "/" {
			roots = append(roots, root{p, false})
		}
	}
	for _, p := range append(append([]string{}, homeRoots...), rec.HidePaths...) {
		roots = append(roots, root{p, true})
	}
	for _, rt := range roots {
		for _, m := range rec.Mounts {
			if m.Kind != ctoharness.ViewBind || m.Source == "" {
				continue
			}
			// A hidden path that does not exist on this machine has nothing to
			// mask; the source and the owned and Target roots must never be
			// shown, even once the run's materialized source is gone.
			if inside(rt.path, m.Source) && !masked(rec.Mounts, m, rt.path) && (!rt.readable || exists(rt.path)) {
				fail("%s is visible through the bind of %s at %s", rt.path, m.Source, m.Path)
			}
			if m.Source != rt.path && inside(m.Source, rt.path) && !own(m.Source) && !inside(m.Source, r.RunArtifactDir) &&
				!(rt.readable && slices.Contains(rec.ReadPaths, m.Path)) && !hostsFile(r, m) {
				fail("%s from inside %s is bound at %s", m.Source, rt.path, m.Path)
			}
		}
	}
}

// hostsFile reports whether bind m is the harness's own hosts file, read
// only at /etc/hosts from the run's workspace. It is inside an owned root
// whenever the runs directory is (owned_sources names ~/src and the harness
// runs from ~/src/cto-harness), and it holds nothing of that root.
func hostsFile(r *ctoharness.Report, m ctoharness.ViewMount) bool {
	return m.Path == "/etc/hosts" && m.Mode == ctoharness.ViewRO && r.RuntimeWorkspaceRoot != "" && r.RunArtifactDir != "" &&
		// the workspace is RUNS_DIR/work/<run_id>, beside the run's directory
		filepath.Dir(filepath.Dir(r.RuntimeWorkspaceRoot)) == filepath.Dir(r.RunArtifactDir) &&
		filepath.Dir(m.Source) == filepath.Join(r.RuntimeWorkspaceRoot, egress.HostsDir) &&
		strings.HasPrefix(filepath.Base(m.Source), "hosts-")
}

// masked reports whether a mask covers hidden path h where bind m would show it.
func masked(mounts []ctoharness.ViewMount, m ctoharness.ViewMount, h string) bool {
	rel, err := filepath.Rel(m.Source, h)
	if err != nil {
		return false
	}
	at := filepath.Join(m.Path, rel)
	for _, k := range mounts {
		if k.Kind == ctoharness.ViewMask && inside(at, k.Path) && inside(k.Path, m.Path) && k.Path != m.Path {
			return true
		}
	}
	return false
}

// inside is under that also handles the root directory.
func inside(p, root string) bool {
	if root == "/" {
		return filepath.IsAbs(p)
	}
	return under(p, root)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
