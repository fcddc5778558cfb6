package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
)

func requireSandbox(t *testing.T) {
	t.Helper()
	exe, _ := os.Executable()
	if f := sandbox.ProbeWith(exe); !f.Available() {
		t.Skipf("sandbox unavailable on this machine: %s", f.Reason)
	}
}

// A view that cannot be built blocks the run with SANDBOX_UNAVAILABLE before
// any Case process starts, and the evidence is still valid.
func TestViewFailsClosedBeforeCase(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	base, src := sharedStage3(t, set)
	cases := []struct {
		name string
		edit func(o *harness.Options)
		want string
	}{
		{"missing read path", func(o *harness.Options) {
			o.Config.Sandbox = &config.Sandbox{ViewPaths: config.ViewPaths{ReadPaths: []string{filepath.Join(t.TempDir(), "gone")}}}
		}, "does not exist"},
		{"read path inside the source", func(o *harness.Options) {
			o.Config.Sandbox = &config.Sandbox{ViewPaths: config.ViewPaths{ReadPaths: []string{filepath.Join(src, "README.md")}}}
		}, "must never see"},
		{"task widens the view", func(o *harness.Options) {
			spec := *o.Spec
			spec.Sandbox = &task.SpecSandbox{ViewPaths: task.ViewPaths{ReadPaths: []string{t.TempDir()}}}
			o.Spec = &spec
		}, "never widen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := base
			c.edit(&o)
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !hasCode(rep, ctoharness.BlockSandboxUnavailable) || rep.CaseProcessStarted {
				t.Fatalf("blockers %v, case started %v", rep.Blockers, rep.CaseProcessStarted)
			}
			if b := rep.Blockers[0]; b.Step != ctoharness.StepCase || !strings.Contains(b.Message, c.want) {
				t.Fatalf("blocker %+v; want one at the case step saying %q", b, c.want)
			}
			mustValidate(t, set, rep, false)
		})
	}
}

// A passing run records both views; the configured lists reach them, the
// verification command gets its own, and a task's hide path is hidden.
func TestViewRecorded(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	o, src := sharedStage3(t, set)
	extra := t.TempDir()
	if err := os.WriteFile(filepath.Join(extra, "tool"), []byte("tool\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	verifyOnly := t.TempDir()
	o.Config.Sandbox = &config.Sandbox{ViewPaths: config.ViewPaths{ReadPaths: []string{extra}, HidePaths: []string{"/opt/nothing-here"}},
		Verification: &config.ViewPaths{ReadPaths: []string{verifyOnly}}}
	spec := *o.Spec
	spec.Sandbox = &task.SpecSandbox{ViewPaths: task.ViewPaths{HidePaths: []string{"/usr/share/doc"}}}
	o.Spec = &spec
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s blockers %v", rep.Status, rep.Blockers)
	}
	cv, vv := rep.Sandbox.View, rep.Sandbox.VerificationView
	if cv == nil || vv == nil {
		t.Fatalf("views not recorded: case %v verification %v", cv, vv)
	}
	has := func(v *ctoharness.ViewRecord, path, kind string) bool {
		return slices.ContainsFunc(v.Mounts, func(m ctoharness.ViewMount) bool { return m.Path == path && m.Kind == kind })
	}
	if !has(cv, extra, ctoharness.ViewBind) || has(cv, verifyOnly, ctoharness.ViewBind) {
		t.Errorf("Case's view: want %s and not %s: %+v", extra, verifyOnly, cv.Mounts)
	}
	if !has(vv, verifyOnly, ctoharness.ViewBind) || has(vv, extra, ctoharness.ViewBind) {
		t.Errorf("verification's view: want %s and not %s: %+v", verifyOnly, extra, vv.Mounts)
	}
	if !has(cv, "/usr/share/doc", ctoharness.ViewMask) {
		t.Errorf("the task's hide path is not masked in Case's view")
	}
	if !has(cv, rep.FixturePath, ctoharness.ViewBind) || has(cv, src, ctoharness.ViewBind) {
		t.Errorf("Case's view lacks the fixture or shows the source")
	}
	if !slices.Contains(rep.Sandbox.Mechanisms, "fs_view") {
		t.Errorf("mechanisms %v lack fs_view", rep.Sandbox.Mechanisms)
	}
	mustValidate(t, set, rep, true)
}

// A verification view that cannot be built blocks at the verification step,
// before the command runs, and the evidence stays valid.
func TestVerificationViewFailsClosed(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	o, _ := sharedStage3(t, set)
	o.Config.Sandbox = &config.Sandbox{Verification: &config.ViewPaths{ReadPaths: []string{filepath.Join(t.TempDir(), "gone")}}}
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.CaseProcessStarted || !hasCode(rep, ctoharness.BlockSandboxUnavailable) {
		t.Fatalf("case started %v, blockers %v", rep.CaseProcessStarted, rep.Blockers)
	}
	if b := rep.Blockers[0]; b.Step != ctoharness.StepVerify || rep.Tests.Classification != ctoharness.TestNotRun {
		t.Fatalf("blocker %+v, tests %s", b, rep.Tests.Classification)
	}
	if rep.Sandbox.View == nil || rep.Sandbox.VerificationView != nil {
		t.Fatalf("views recorded: case %v, verification %v", rep.Sandbox.View != nil, rep.Sandbox.VerificationView != nil)
	}
	mustValidate(t, set, rep, false)
}
