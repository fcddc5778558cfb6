package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
)

// probeSandbox checks, at the gate, that the sandbox can be established, and
// records what will be enforced. Without it the run is blocked before the
// source is touched, unless the user opted out.
func (r *run) probeSandbox() {
	rec := &r.Report.Sandbox
	rec.EnvAllowlist = []string{"PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "GOCACHE", "GOPATH", "LANG", backend.EnvTaskFile}
	rec.ProcessGroupKill = true
	if r.o.Unsandboxed {
		rec.Unsandboxed = true
		// Even unconfined, every process Case starts dies with the harness:
		// Case runs under a supervisor (see harness/supervise).
		mode, why := supervise.Probe(r.o.SelfExe)
		r.superMode = mode
		rec.Mechanisms = []string{"process_group", mode.Mechanism(), "explicit_environment", "timeout"}
		rec.NotEnforcedReason = "--unsandboxed: filesystem, network and process isolation were switched off by the user; source mutation is only detected, not prevented, and this run never qualifies as stage evidence"
		if why != "" {
			rec.NotEnforcedReason += "; " + why
		}
		return
	}
	if r.o.SandboxProbe != nil {
		r.facts = r.o.SandboxProbe()
	} else {
		r.facts = sandbox.ProbeWith(r.o.SelfExe)
	}
	if !r.facts.Available() {
		rec.NotEnforcedReason = r.facts.Reason
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepGate,
			Message: fmt.Sprintf("the sandbox cannot be established on this machine (%s); fix that, or pass --unsandboxed to run without it (such a run never qualifies as stage evidence)", r.facts.Reason)})
		return
	}
	rec.Enforced = true
	rec.LandlockABI = r.facts.LandlockABI
}

// roots are the directories a command works in and may write: Case's
// fixture and scratch, or the verification's checkout and scratch (package
// checkout), which Case never sees.
func (r *run) roots(verification bool) (work, scratch string) {
	if verification {
		return checkout.Dirs(r.Report.RuntimeWorkspaceRoot)
	}
	return r.fixture, r.scratch
}

// policy is what Case or the verification command may touch: its work
// directory and scratch directories (not the whole workspace root, which
// for stages 1–2 also holds the materialized source).
func (r *run) policy(verification bool) sandbox.Policy {
	l := r.contract.Limits
	work, scratch := r.roots(verification)
	return sandbox.Policy{Writable: append([]string{work}, backend.ScratchDirs(scratch)...), DenyNetwork: true,
		Rlimits: sandbox.Rlimits{CPUSeconds: l.CPUSeconds, FileSizeBytes: l.FileSizeBytes, OpenFiles: l.OpenFiles,
			Processes: l.Processes, AddressSpaceBytes: l.AddressSpaceBytes}}
}

// confine wraps argv in the sandbox launcher with its command's filesystem
// view (Case's, or the verification command's when verification is set)
// and, when nw is set, its network egress layout, with the exec watch when
// execWatch is set and the socket watch when socketWatch is set, and
// records what it enforces. The returned file is the
// launcher's policy (sandbox.Command), nil unsandboxed; the caller passes it
// as the last extra file. With own set, argv runs in that sandbox instead
// (an extra test run's, whose view shows its own checkout), which the
// report's sandbox record does not describe.
func (r *run) confine(verification bool, argv []string, nw *sandbox.Network, execWatch, socketWatch bool, own *sandbox.Policy) ([]string, *syscall.SysProcAttr, *os.File, error) {
	if r.o.Unsandboxed {
		launch, attr, err := supervise.Command(r.o.SelfExe, r.superMode, argv)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("cannot prepare the supervisor for %s: %w", argv[0], err)
		}
		return launch, attr, nil, nil
	}
	if own != nil {
		return confineIn(r.o.SelfExe, *own, argv, nw, execWatch, socketWatch)
	}
	pol := r.policy(verification)
	var files []sandbox.Bind
	if nw != nil {
		// The command's /etc/hosts names the allowed hosts' in-namespace
		// addresses; it is part of the view that is tried and recorded.
		files = append(files, sandbox.Bind{Path: "/etc/hosts", Source: nw.HostsFile})
	}
	view, err := r.view(context.Background(), verification, argv, files...)
	if err != nil {
		return nil, nil, nil, err
	}
	pol.View = view
	pol.Network = nw
	pol.ExecWatch = execWatch
	pol.SocketWatch = socketWatch
	launch, attr, pf, err := sandbox.Command(r.o.SelfExe, pol, argv)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot prepare the sandbox for %s: %w", argv[0], err)
	}
	rec := &r.Report.Sandbox
	rec.Mechanisms = append(pol.Mechanisms(r.facts), "explicit_environment", "timeout")
	rec.WritableRoots = pol.Writable
	rec.ReadOnlyRoots = []string{"/"}
	if len(pol.ReadOnly) > 0 {
		rec.ReadOnlyRoots = pol.ReadOnly
	}
	eff := pol.Rlimits.Effective()
	rec.Rlimits = ctoharness.Limits{CPUSeconds: eff.CPUSeconds, FileSizeBytes: eff.FileSizeBytes, OpenFiles: eff.OpenFiles,
		Processes: eff.Processes, AddressSpaceBytes: eff.AddressSpaceBytes}
	return launch, attr, pf, nil
}

// confineIn wraps argv in the sandbox launcher with pol, and nw's layout
// when set: its /etc/hosts joins pol's view.
func confineIn(self string, pol sandbox.Policy, argv []string, nw *sandbox.Network, execWatch, socketWatch bool) ([]string, *syscall.SysProcAttr, *os.File, error) {
	if nw != nil && pol.View != nil {
		v := *pol.View
		v.Files = append(slices.Clone(v.Files), sandbox.Bind{Path: "/etc/hosts", Source: nw.HostsFile})
		pol.View = &v
	}
	pol.Network, pol.ExecWatch, pol.SocketWatch = nw, execWatch, socketWatch
	launch, attr, pf, err := sandbox.Command(self, pol, argv)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot prepare the sandbox for %s: %w", argv[0], err)
	}
	return launch, attr, pf, nil
}

func exitCode(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
