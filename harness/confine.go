package harness

import (
	"fmt"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
)

// probeSandbox checks, at the gate, that the sandbox can be established, and
// records what will be enforced. Without it the run is blocked before the
// source is touched, unless the user opted out.
func (r *run) probeSandbox() {
	rec := &r.rep.Sandbox
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
	r.facts = sandbox.ProbeWith(r.o.SelfExe)
	if !r.facts.Available() {
		rec.NotEnforcedReason = r.facts.Reason
		r.block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepGate,
			Message: fmt.Sprintf("the sandbox cannot be established on this machine (%s); fix that, or pass --unsandboxed to run without it (such a run never qualifies as stage evidence)", r.facts.Reason)})
		return
	}
	rec.Enforced = true
	rec.LandlockABI = r.facts.LandlockABI
}

// policy is what Case and the verification command may touch: the fixture
// and the scratch directories (not the whole workspace root, which for
// stages 1–2 also holds the materialized source).
func (r *run) policy() sandbox.Policy {
	l := r.contract.Limits
	return sandbox.Policy{Writable: append([]string{r.fixture}, backend.ScratchDirs(r.scratch)...), DenyNetwork: true,
		Rlimits: sandbox.Rlimits{CPUSeconds: l.CPUSeconds, FileSizeBytes: l.FileSizeBytes, OpenFiles: l.OpenFiles,
			Processes: l.Processes, AddressSpaceBytes: l.AddressSpaceBytes}}
}

// confine wraps argv in the sandbox launcher, and records what it enforces.
// nw, when set, is the command's network egress layout.
func (r *run) confine(argv []string, nw *sandbox.Network) ([]string, *syscall.SysProcAttr, error) {
	if r.o.Unsandboxed {
		launch, attr, err := supervise.Command(r.o.SelfExe, r.superMode, argv)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot prepare the supervisor for %s: %w", argv[0], err)
		}
		return launch, attr, nil
	}
	pol := r.policy()
	pol.Network = nw
	launch, attr, err := sandbox.Command(r.o.SelfExe, pol, argv)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot prepare the sandbox for %s: %w", argv[0], err)
	}
	rec := &r.rep.Sandbox
	rec.Mechanisms = append(pol.Mechanisms(r.facts), "explicit_environment", "timeout")
	rec.WritableRoots = pol.Writable
	rec.ReadOnlyRoots = []string{"/"}
	if len(pol.ReadOnly) > 0 {
		rec.ReadOnlyRoots = pol.ReadOnly
	}
	eff := pol.Rlimits.Effective()
	rec.Rlimits = ctoharness.Limits{CPUSeconds: eff.CPUSeconds, FileSizeBytes: eff.FileSizeBytes, OpenFiles: eff.OpenFiles,
		Processes: eff.Processes, AddressSpaceBytes: eff.AddressSpaceBytes}
	return launch, attr, nil
}

func exitCode(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
