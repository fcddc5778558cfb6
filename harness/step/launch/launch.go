// Package launch is how a run starts a command in its sandbox: the probe of
// what the machine can enforce, each command's policy and filesystem view
// (built and tried once, then recorded), the network egress every
// sandboxed launch goes through, and the supervisor an unsandboxed one runs
// under. The pipeline holds one Launcher per run and asks it for every
// launch, so Case, the setup, the verification and the extra test runs are
// confined by the same rules and recorded in the same report fields.
package launch

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/toolenv"
)

// Input is what the launches of one run are built from, all of it known
// when the run starts. The hooks are the parts of a view other concerns of
// the pipeline own (toolchains, warm caches, Case's scratch); they are
// called when a view is planned, so they see the run as it is then.
type Input struct {
	SelfExe     string                           // the harness binary: the sandbox launcher and supervisor
	Unsandboxed bool                             // --unsandboxed: only the supervisor
	Probe       func() sandbox.Facts             // what the sandbox can enforce; nil probes this machine
	Trials      *sandbox.Trials                  // views already tried by other runs of a batch; nil tries each
	TrialsRoot  string                           // a directory taken out of the view shapes as well ("": none)
	Clock       func() time.Time                 // the run's clock, for network records
	ValidateNet func([]byte) error               // checks each network.jsonl record
	NetLimits   egress.Limits                    // the execution profile's connection and byte limits
	Config      config.Config                    // view lists, protected roots, signing files
	SignerFile  string                           // the evidence signing key's file ("" without one)
	RunsDir     string                           // hidden from every view
	Workspace   string                           // runtime_workspace_root: the verification's dirs, the hosts files
	Scratch     string                           // Case's scratch (HOME, TMPDIR, caches)
	Getenv      func(string) string              // the harness's environment (HOME, PATH, the signing key variable)
	Tools       func(egress.Command) toolenv.Set // the config's toolchains and variables for a command
	// Warm adds the warm caches to a view of a command whose scratch is
	// scratch (the verification's when verification is set).
	Warm func(v *sandbox.View, verification bool, scratch string) error
	// MakeScratch makes Case's scratch directories (once); the egress trial
	// launches in them.
	MakeScratch func() error
}

// Source is the repository a run copies, hidden from every view.
type Source struct {
	Root, Given string
	GitDir      string // its git directory when kept outside the worktree, else ""
}

// Launcher prepares every command launch of one run and owns what they
// share: the sandbox facts, the supervisor's mode, the egress and the
// views built so far.
type Launcher struct {
	in   Input
	sink *runsink.Sink

	facts     sandbox.Facts           // what the machine can enforce, probed at the gate
	superMode supervise.Mode          // how an unsandboxed command's process tree is held
	src       Source                  // set once the source is classified
	spec      task.Spec               // the task, once read: its view and network lists
	fixture   string                  // Case's work directory, once copied
	limits    ctoharness.Limits       // the contract's rlimits, once written
	net       *netState               // network egress, once started (sandboxed runs)
	views     map[bool]*sandbox.View  // the views built for Case (false) and verification (true)
	viewFiles map[bool][]sandbox.Bind // the harness-supplied files each view was built with
}

// New is the launcher of the run whose evidence goes to sink.
func New(in Input, sink *runsink.Sink) *Launcher {
	return &Launcher{in: in, sink: sink}
}

// SetSource names the source once it is classified: views hide it.
func (l *Launcher) SetSource(s Source) { l.src = s }

// SetTask is the task once read: its view lists, hidden tests and network
// list narrow what the config grants.
func (l *Launcher) SetTask(spec task.Spec) { l.spec = spec }

// SetFixture is Case's work directory once the fixture exists.
func (l *Launcher) SetFixture(dir string) { l.fixture = dir }

// SetLimits are the contract's rlimits once it is written.
func (l *Launcher) SetLimits(lim ctoharness.Limits) { l.limits = lim }

// Probe checks, at the gate, that the sandbox can be established, and
// records what will be enforced. Without it the run is blocked before the
// source is touched, unless the user opted out.
func (l *Launcher) Probe() {
	rec := &l.sink.Report.Sandbox
	rec.EnvAllowlist = []string{"PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "GOCACHE", "GOPATH", "LANG", backend.EnvTaskFile}
	rec.ProcessGroupKill = true
	if l.in.Unsandboxed {
		rec.Unsandboxed = true
		// Even unconfined, every process Case starts dies with the harness:
		// Case runs under a supervisor (see harness/supervise).
		mode, why := supervise.Probe(l.in.SelfExe)
		l.superMode = mode
		rec.Mechanisms = []string{"process_group", mode.Mechanism(), "explicit_environment", "timeout"}
		rec.NotEnforcedReason = "--unsandboxed: filesystem, network and process isolation were switched off by the user; source mutation is only detected, not prevented, and this run never qualifies as stage evidence"
		if why != "" {
			rec.NotEnforcedReason += "; " + why
		}
		return
	}
	if l.in.Probe != nil {
		l.facts = l.in.Probe()
	} else {
		l.facts = sandbox.ProbeWith(l.in.SelfExe)
	}
	if !l.facts.Available() {
		rec.NotEnforcedReason = l.facts.Reason
		l.sink.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepGate,
			Message: fmt.Sprintf("the sandbox cannot be established on this machine (%s); fix that, or pass --unsandboxed to run without it (such a run never qualifies as stage evidence)", l.facts.Reason)})
		return
	}
	rec.Enforced = true
	rec.LandlockABI = l.facts.LandlockABI
}

// Roots are the directories a command works in and may write: Case's
// fixture and scratch, or the verification's checkout and scratch (package
// checkout), which Case never sees.
func (l *Launcher) Roots(verification bool) (work, scratch string) {
	if verification {
		return checkout.Dirs(l.in.Workspace)
	}
	return l.fixture, l.in.Scratch
}

// Policy is what Case or the verification command may touch: its work
// directory and scratch directories (not the whole workspace root, which
// for stages 1–2 also holds the materialized source).
func (l *Launcher) Policy(verification bool) sandbox.Policy {
	lim := l.limits
	work, scratch := l.Roots(verification)
	return sandbox.Policy{Writable: append([]string{work}, backend.ScratchDirs(scratch)...), DenyNetwork: true,
		Rlimits: sandbox.Rlimits{CPUSeconds: lim.CPUSeconds, FileSizeBytes: lim.FileSizeBytes, OpenFiles: lim.OpenFiles,
			Processes: lim.Processes, AddressSpaceBytes: lim.AddressSpaceBytes}}
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
func (l *Launcher) confine(verification bool, argv []string, nw *sandbox.Network, execWatch, socketWatch bool, own *sandbox.Policy) ([]string, *syscall.SysProcAttr, *os.File, error) {
	if l.in.Unsandboxed {
		launch, attr, err := supervise.Command(l.in.SelfExe, l.superMode, argv)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("cannot prepare the supervisor for %s: %w", argv[0], err)
		}
		return launch, attr, nil, nil
	}
	if own != nil {
		return confineIn(l.in.SelfExe, *own, argv, nw, execWatch, socketWatch)
	}
	pol := l.Policy(verification)
	var files []sandbox.Bind
	if nw != nil {
		// The command's /etc/hosts names the allowed hosts' in-namespace
		// addresses; it is part of the view that is tried and recorded.
		files = append(files, sandbox.Bind{Path: "/etc/hosts", Source: nw.HostsFile})
	}
	view, err := l.View(context.Background(), verification, argv, files...)
	if err != nil {
		return nil, nil, nil, err
	}
	pol.View = view
	pol.Network = nw
	pol.ExecWatch = execWatch
	pol.SocketWatch = socketWatch
	launch, attr, pf, err := sandbox.Command(l.in.SelfExe, pol, argv)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot prepare the sandbox for %s: %w", argv[0], err)
	}
	rec := &l.sink.Report.Sandbox
	rec.Mechanisms = append(pol.Mechanisms(l.facts), "explicit_environment", "timeout")
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
