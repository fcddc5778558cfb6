package launch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
)

// newSink is a sink with a report and nothing to write to: enough for the
// launcher's records and blockers.
func newSink() *runsink.Sink {
	rep := &ctoharness.Report{Sandbox: ctoharness.SandboxRecord{Mechanisms: []string{}}, Blockers: []ctoharness.Blocker{}}
	return runsink.New("run-1", "nonce", nil, nil, rep, nil, nil)
}

// A machine that cannot build the sandbox blocks the run at the gate with
// SANDBOX_UNAVAILABLE and says why; one that can records what it enforces.
func TestProbe(t *testing.T) {
	s := newSink()
	New(Input{Probe: func() sandbox.Facts { return sandbox.Facts{Reason: "no user namespaces"} }}, s).Probe()
	if len(s.Report.Blockers) != 1 || s.Report.Blockers[0].Code != ctoharness.BlockSandboxUnavailable || s.Report.Blockers[0].Step != ctoharness.StepGate {
		t.Fatalf("blockers %+v, want one SANDBOX_UNAVAILABLE at the gate", s.Report.Blockers)
	}
	if !strings.Contains(s.Report.Blockers[0].Message, "no user namespaces") || s.Report.Sandbox.NotEnforcedReason != "no user namespaces" {
		t.Errorf("the reason is not recorded: %+v", s.Report)
	}
	if s.Report.Sandbox.Enforced {
		t.Error("an unavailable sandbox is recorded as enforced")
	}

	s = newSink()
	New(Input{Probe: func() sandbox.Facts { return sandbox.Facts{Launcher: true, LandlockABI: 4} }}, s).Probe()
	if !s.OK() || !s.Report.Sandbox.Enforced || s.Report.Sandbox.LandlockABI != 4 || !s.Report.Sandbox.ProcessGroupKill {
		t.Errorf("an available sandbox: %+v, blockers %+v", s.Report.Sandbox, s.Report.Blockers)
	}
}

// Roots and the policy follow what the launcher was told: Case works in the
// fixture once it is set, the verification in its own checkout, and the
// contract's limits become the rlimits.
func TestRootsAndPolicy(t *testing.T) {
	l := New(Input{Workspace: "/w/run-1", Scratch: "/w/run-1/scratch"}, newSink())
	if work, _ := l.Roots(false); work != "" {
		t.Errorf("Case's work directory before the fixture exists: %q", work)
	}
	l.SetFixture("/runs/run-1/fixture")
	l.SetLimits(ctoharness.Limits{CPUSeconds: 7, OpenFiles: 9})
	work, scratch := l.Roots(false)
	if work != "/runs/run-1/fixture" || scratch != "/w/run-1/scratch" {
		t.Errorf("Case's roots %q %q", work, scratch)
	}
	if vwork, _ := l.Roots(true); vwork == work || !strings.HasPrefix(vwork, "/w/run-1/") {
		t.Errorf("the verification's work directory %q is not its own in the workspace", vwork)
	}
	pol := l.Policy(false)
	if pol.Writable[0] != work || !pol.DenyNetwork || pol.Rlimits.CPUSeconds != 7 || pol.Rlimits.OpenFiles != 9 {
		t.Errorf("Case's policy %+v", pol)
	}
}

// A task narrows what the config and the flags grant, never widens it: an
// endpoint nobody granted, or a malformed list, is a typed blocker.
func TestNetPolicy(t *testing.T) {
	grants := Grants{Config: &config.NetworkAllow{VerifyAllow: []string{"proxy.golang.org:443"}}, Case: []string{"api.example.com:443"}}
	p, err := NetPolicy(grants, &task.NetworkAllow{VerifyAllow: []string{"proxy.golang.org:443"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Verify.Strings(); !slices.Equal(got, []string{"proxy.golang.org:443"}) {
		t.Errorf("verify list %v", got)
	}
	if got := p.Case.Strings(); !slices.Equal(got, []string{"api.example.com:443"}) {
		t.Errorf("case list %v", got)
	}
	if len(p.Setup) != 0 || len(p.Adversary) != 0 {
		t.Errorf("lists nobody granted: %+v", p)
	}
	cases := []struct {
		name   string
		grants Grants
		asked  *task.NetworkAllow
		code   ctoharness.BlockerCode
		msg    string
	}{
		{"task widens", grants, &task.NetworkAllow{SetupAllow: []string{"registry.npmjs.org:443"}}, ctoharness.BlockTaskInvalid, "network.setup_allow"},
		{"config malformed", Grants{Config: &config.NetworkAllow{CaseAllow: []string{"nohost"}}}, nil, ctoharness.BlockConfigInvalid, "case_allow list is invalid"},
		{"flag malformed", Grants{Verify: []string{"x:0"}}, nil, ctoharness.BlockConfigInvalid, "--allow-net"},
		{"task malformed", Grants{}, &task.NetworkAllow{CaseAllow: []string{"x"}}, ctoharness.BlockTaskInvalid, "task's network case_allow"},
	}
	for _, tc := range cases {
		_, err := NetPolicy(tc.grants, tc.asked)
		b := ctoharness.AsBlocker(err, ctoharness.StepGate)
		if err == nil || b.Code != tc.code || b.Step != ctoharness.StepContract || !strings.Contains(b.Message, tc.msg) {
			t.Errorf("%s: %v (%+v), want %s naming %q", tc.name, err, b, tc.code, tc.msg)
		}
	}
}

// The adversary's agent gets its meter and nothing else; unsandboxed, no
// forwarder is started and every command answers "no network".
func TestStartEgressUnsandboxed(t *testing.T) {
	s := newSink()
	l := New(Input{Unsandboxed: true}, s)
	if !l.StartEgress(context.Background(), Egress{Meter: "127.0.0.1:4000"}) || !s.OK() {
		t.Fatalf("unsandboxed egress: %+v", s.Report.Blockers)
	}
	if l.NetAllowed(egress.CommandVerify) != nil || l.HasAllowlist(egress.CommandAdversary) || l.NetEnv(egress.CommandCase) != nil || l.Unreachable(egress.CommandSetup) != nil {
		t.Error("an unsandboxed run has a network state")
	}
	l.StopEgress() // nothing to stop
	p, err := l.netPolicy(Egress{Meter: "127.0.0.1:4000"})
	if err != nil || !slices.Equal(p.Adversary.Strings(), []string{"127.0.0.1:4000"}) || len(p.Case) != 0 {
		t.Errorf("the adversary's policy %+v, %v", p, err)
	}

	s = newSink()
	if New(Input{Unsandboxed: true}, s).StartEgress(context.Background(), Egress{Meter: "no-port"}) || !s.Has(ctoharness.BlockInternal) {
		t.Errorf("a meter address that cannot be allowed: %+v", s.Report.Blockers)
	}
	var nl *Launcher
	if nl.NetAllowed(egress.CommandCase) != nil || nl.HasAllowlist(egress.CommandCase) || nl.NetEnv(egress.CommandCase) != nil {
		t.Error("a nil launcher has a network")
	}
}

// A task's view list narrows the config's, never widens it.
func TestPlanViewNarrowsOnly(t *testing.T) {
	l := New(Input{Workspace: t.TempDir(), Getenv: func(string) string { return "" }}, newSink())
	l.SetTask(task.Spec{Sandbox: &task.SpecSandbox{ViewPaths: task.ViewPaths{ReadPaths: []string{"/srv/secret"}}}})
	if _, _, err := l.PlanView(true, nil); err == nil || !strings.Contains(err.Error(), "/srv/secret") {
		t.Errorf("a task's read path outside every allowed one: %v", err)
	}
	l.SetTask(task.Spec{HiddenTests: "/srv/hidden"})
	l.SetSource(Source{Root: "/src/repo", Given: "/src/link"})
	v, rec, err := l.PlanView(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rec.HidePaths, "/srv/hidden") {
		t.Errorf("the hidden tests are not hidden: %v", rec.HidePaths)
	}
	for _, p := range []string{"/src/repo", "/src/link"} {
		if !slices.Contains(v.Protected, p) {
			t.Errorf("%s is not protected: %v", p, v.Protected)
		}
	}
}

// The shape two runs' views share leaves the run id out, so a batch tries
// the view once.
func TestViewShapeMasksRunID(t *testing.T) {
	shape := func(id string) string {
		return viewShape(sandbox.Policy{Writable: []string{"/runs/" + id + "/fixture"}, View: &sandbox.View{Cwd: "/runs/" + id + "/fixture"}}, id, "")
	}
	a, b := shape("run-a"), shape("run-b")
	if a != b || strings.Contains(a, "run-a") || !strings.Contains(a, "{run}") {
		t.Errorf("shapes %s and %s", a, b)
	}
}

// With a root, the shape leaves it out too, but only as a whole path or a
// path's leading directories: runs in folders of their own, laid out
// alike, share a shape; a path that merely begins with the root's name
// stays, and so does everything else that differs.
func TestViewShapeMasksRoot(t *testing.T) {
	shape := func(root, id string, extra ...string) string {
		return viewShape(sandbox.Policy{Writable: []string{root + "/runs/" + id + "/fixture"},
			View: &sandbox.View{Cwd: root + "/runs/" + id + "/fixture", Protected: append([]string{root}, extra...)}}, id, root)
	}
	a, b := shape("/m/row-1", "run-a"), shape("/m/row-22", "run-b")
	if a != b || strings.Contains(a, "row-1") || !strings.Contains(a, `"{root}/runs/{run}/fixture"`) || !strings.Contains(a, `"{root}"`) {
		t.Errorf("shapes %s and %s", a, b)
	}
	if c := shape("/m/row-1", "run-a", "/m/row-12/x"); c == a || !strings.Contains(c, "/m/row-12/x") {
		t.Errorf("a path that only begins with the root's name is taken out: %s", c)
	}
	if d := shape("/m/row-1", "run-a", "/m/row-1/hidden"); d == a {
		t.Errorf("a view that differs inside the root has the same shape: %s", d)
	}
	if e := viewShape(sandbox.Policy{Writable: []string{"/m/row-1/w"}}, "run-a", "relative"); strings.Contains(e, "{root}") {
		t.Errorf("a relative root is taken out: %s", e)
	}
}

// A command's view shows its executable (found on the PATH), an absolute
// script it runs and the node_modules install directory it loads from,
// but nothing the system paths already show.
func TestCommandReads(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	mods := filepath.Join(dir, "lib", "node_modules", "agent")
	for _, d := range []string{bin, mods} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tool := filepath.Join(bin, "tool")
	script := filepath.Join(mods, "cli.js")
	for _, f := range []string{tool, script} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := commandReads(nil, []string{"tool", script, "/not/there.js", "relative.js"}, []string{"/usr"}, bin)
	want := []string{tool, script, filepath.Join(dir, "lib")}
	if !slices.Equal(got, want) {
		t.Errorf("reads %v, want %v", got, want)
	}
	if got := commandReads(nil, []string{"tool"}, []string{dir}, bin); len(got) != 0 {
		t.Errorf("an executable inside the system paths is added: %v", got)
	}
	if got := commandReads(nil, []string{"missing"}, nil, bin); len(got) != 0 {
		t.Errorf("a program not on the PATH is added: %v", got)
	}
}
