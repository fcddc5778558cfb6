package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
)

// netState is the run's network egress: the allowlists, each command's
// in-namespace layout and hosts file, and the forwarder that serves them.
// Every sandboxed run has one, with or without an allowlist: the forwarder
// also keeps the record of the socket calls the sandbox refuses.
type netState struct {
	policy egress.Policy
	plans  map[egress.Command]egress.Plan
	hosts  map[egress.Command]string
	fwd    *egress.Forwarder
	log    *lazyLog

	// watches are the verification and setup launches' seccomp watches
	// (their socket and connection watches), closed with the forwarder:
	// such a launch has no other place to report a watch that broke down.
	mu      sync.Mutex
	watches []*notify.Watch
}

// Grants are the network endpoints the user granted a run: the config's
// lists and the --allow-net flags (with where each flag came from).
type Grants struct {
	Config              *config.NetworkAllow
	Case, Verify, Setup []string
	Origin              map[string]string
}

// Egress is what the run's network is started with, known only at the
// contract: the grants (a coding agent adds its endpoint at the gate) and
// the adversary agent's model meter ("" when the adversary is no agent).
type Egress struct {
	Grants Grants
	Meter  string
}

// netPolicy is NetPolicy for the run's task, with the adversary's meter
// as its agent's only endpoint.
func (l *Launcher) netPolicy(e Egress) (egress.Policy, error) {
	p, err := NetPolicy(e.Grants, l.spec.Network)
	if err != nil || e.Meter == "" {
		return p, err
	}
	// The adversary's agent reaches its meter and nothing else.
	meter := e.Meter
	if p.Adversary, err = egress.ParseList([]string{meter}, egress.SourceFlag, map[string]string{meter: "adversary"}); err != nil {
		return p, ctoharness.Block(ctoharness.BlockInternal, ctoharness.StepContract, err, "the adversary's model meter address cannot be allowed")
	}
	return p, nil
}

// NetPolicy resolves each command's allowlist: the config's and the flags'
// entries are granted as given; each of the task's entries (asked) must be
// covered by them (a task never widens what the user granted).
func NetPolicy(g Grants, asked *task.NetworkAllow) (egress.Policy, error) {
	var cfgCase, cfgVerify, cfgSetup, specCase, specVerify, specSetup []string
	if n := g.Config; n != nil {
		cfgCase, cfgVerify, cfgSetup = n.CaseAllow, n.VerifyAllow, n.SetupAllow
	}
	if n := asked; n != nil {
		specCase, specVerify, specSetup = n.CaseAllow, n.VerifyAllow, n.SetupAllow
	}
	resolve := func(what string, cfg, flags, spec []string) (egress.List, error) {
		c, err := egress.ParseList(cfg, egress.SourceConfig, nil)
		if err != nil {
			return nil, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepContract, err, "the config's network %s list is invalid", what)
		}
		f, err := egress.ParseList(flags, egress.SourceFlag, g.Origin)
		if err != nil {
			return nil, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepContract, err, "a --allow-net value is invalid")
		}
		granted := c.Merge(f)
		t, err := egress.ParseList(spec, egress.SourceTask, nil)
		if err != nil {
			return nil, ctoharness.Block(ctoharness.BlockTaskInvalid, ctoharness.StepContract, err, "the task's network %s list is invalid", what)
		}
		kept, refused := egress.Narrow(t, granted)
		if len(refused) > 0 {
			return nil, ctoharness.Block(ctoharness.BlockTaskInvalid, ctoharness.StepContract,
				fmt.Errorf("not granted: %s", strings.Join(refused, ", ")),
				"the task asks for network endpoints that neither the config's network.%s nor the run's flags allow; grant them there, or remove them from the task", what)
		}
		return granted.Merge(kept), nil
	}
	caseList, err := resolve("case_allow", cfgCase, g.Case, specCase)
	if err != nil {
		return egress.Policy{}, err
	}
	verifyList, err := resolve("verify_allow", cfgVerify, g.Verify, specVerify)
	if err != nil {
		return egress.Policy{}, err
	}
	setupList, err := resolve("setup_allow", cfgSetup, g.Setup, specSetup)
	if err != nil {
		return egress.Policy{}, err
	}
	return egress.Policy{Case: caseList, Verify: verifyList, Setup: setupList}, nil
}

// StartEgress sets the run's egress up when an allowlist is in force: the
// network log, the hosts files and the forwarder. Without any list the
// commands keep an empty network namespace, and the forwarder only records
// the socket calls the sandbox refuses: network.jsonl and the report's
// network section appear with the first such record. Unsandboxed runs
// have the host's network anyway, so no forwarder is started for them.
func (l *Launcher) StartEgress(ctx context.Context, e Egress) bool {
	pol, err := l.netPolicy(e)
	if err != nil {
		l.sink.BlockErr(err, ctoharness.StepContract)
		return false
	}
	if l.in.Unsandboxed {
		return true
	}
	n := &netState{policy: pol, plans: map[egress.Command]egress.Plan{}, hosts: map[egress.Command]string{}}
	newForwarder := func(log *lazyLog) *egress.Forwarder {
		return egress.New(egress.Options{Policy: pol, Log: log, Clock: l.in.Clock,
			Limits: l.in.NetLimits, Validate: l.in.ValidateNet})
	}
	if pol.Empty() {
		n.log = &lazyLog{open: func() (*os.File, error) { return l.sink.Dir.OpenAppend(evidence.NetworkLog) }}
		n.fwd = newForwarder(n.log)
		l.net = n
		return true
	}
	dir := filepath.Join(l.sink.Report.RuntimeWorkspaceRoot, egress.HostsDir)
	l.sink.Trace.Trace(ctoharness.TraceMkdir, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.sink.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepContract,
			Message: fmt.Sprintf("network egress cannot be set up: %v", err)})
		return false
	}
	for _, cmd := range egress.Commands() {
		if len(pol.For(cmd)) == 0 {
			continue
		}
		plan := egress.NewPlan(cmd, pol.For(cmd))
		p := filepath.Join(dir, "hosts-"+string(cmd))
		l.sink.Trace.Trace(ctoharness.TraceWrite, p)
		if err := os.WriteFile(p, plan.Hosts(), 0o644); err != nil {
			l.sink.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepContract,
				Message: fmt.Sprintf("network egress cannot be set up: %v", err)})
			return false
		}
		n.plans[cmd], n.hosts[cmd] = plan, p
	}
	f, err := l.sink.Dir.OpenAppend(evidence.NetworkLog)
	if err != nil {
		l.sink.BlockWrite(err, ctoharness.StepContract)
		return false
	}
	n.log = &lazyLog{f: f}
	n.fwd = newForwarder(n.log)
	l.net = n
	for _, kv := range (egress.Plan{}).ProxyEnv() {
		k, _, _ := strings.Cut(kv, "=")
		l.sink.Report.Sandbox.EnvAllowlist = append(l.sink.Report.Sandbox.EnvAllowlist, k)
	}
	sum := n.fwd.Summary()
	l.sink.Report.Network = &sum
	return l.tryEgress(ctx)
}

// tryEgress builds each command's network layout once in a throwaway
// launcher, so a layout that cannot be built blocks before any command
// starts (never a fallback to the host network).
func (l *Launcher) tryEgress(ctx context.Context) bool {
	if err := l.in.MakeScratch(); err != nil {
		l.sink.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepContract,
			Message: fmt.Sprintf("network egress cannot be tried: %v", err)})
		return false
	}
	for _, cmd := range egress.Commands() {
		if _, ok := l.net.plans[cmd]; !ok {
			continue
		}
		nw, ctl, connects, err := l.netLayout(cmd)
		if err == nil {
			var watchCtl *os.File
			var w *notify.Watch
			if watchCtl, w, err = notify.Attach(notify.Options{Connect: connects}); err != nil {
				ctl.Close()
			} else {
				// Only the network is tried here: the verification's own
				// directories do not exist yet, so Case's stand in.
				pol := l.Policy(false)
				pol.Network = nw
				err = sandbox.TryNetwork(ctx, l.in.SelfExe, pol, ctl, watchCtl)
				if werr := w.Close(); err == nil {
					err = werr
				}
			}
		}
		if err != nil {
			l.sink.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepContract,
				Message: fmt.Sprintf("the network egress of the %s command cannot be set up: %v", cmd, err)})
			return false
		}
	}
	return true
}

// NetEnv are the proxy variables of cmd, when it has an allowlist.
func (l *Launcher) NetEnv(cmd egress.Command) []string {
	if l == nil || l.net == nil {
		return nil
	}
	plan, ok := l.net.plans[cmd]
	if !ok {
		return nil
	}
	return plan.ProxyEnv()
}

// netLayout attaches a forwarder session for one launch of cmd and returns
// the layout the launcher must build, the control socket it gets as fd 3,
// and the session's connection watch. All are nil without an allowlist.
func (l *Launcher) netLayout(cmd egress.Command) (*sandbox.Network, *os.File, notify.Handler, error) {
	if l.net == nil {
		return nil, nil, nil, nil
	}
	plan, ok := l.net.plans[cmd]
	if !ok {
		return nil, nil, nil, nil
	}
	child, connects, err := l.net.fwd.Attach(plan)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("network egress for %s cannot be set up: %w", cmd, err)
	}
	addrs := make([]string, len(plan.Addrs))
	for i, a := range plan.Addrs {
		addrs[i] = a.String()
	}
	return &sandbox.Network{Ports: plan.Ports, ProxyPort: plan.ProxyPort, Addrs: addrs, HostsFile: l.net.hosts[cmd]},
		child, connects, nil
}

// StopEgress stops the forwarder, closes network.jsonl and records the
// summary. A record that could not be written, or listeners the harness
// could not take, block the run.
func (l *Launcher) StopEgress() {
	if l.net == nil {
		return
	}
	l.net.fwd.Close()
	l.net.mu.Lock()
	watches := l.net.watches
	l.net.watches = nil
	l.net.mu.Unlock()
	var broken []string
	for _, w := range watches {
		if err := w.Close(); err != nil {
			broken = append(broken, err.Error())
		}
	}
	sum := l.net.fwd.Summary()
	if !l.net.policy.Empty() || sum.Attempts > 0 || len(sum.Errors) > 0 {
		// Without an allowlist the section says what the socket watch
		// recorded, and is left out when it recorded nothing.
		l.sink.Report.Network = &sum
	}
	setup, write := l.net.fwd.Failures()
	setup = append(setup, broken...)
	write = append(write, l.net.log.close()...)
	if len(write) > 0 {
		l.sink.BlockWrite(fmt.Errorf("%w: %s: %s", evidence.ErrWrite, evidence.NetworkLog, strings.Join(write, "; ")), ctoharness.StepReport)
	}
	if len(setup) > 0 {
		l.sink.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepReport,
			Message: "network egress failed: " + strings.Join(setup, "; ")})
	}
}

// WrapFor is the sandbox wrapper of the verification command: its
// launches' seccomp watches are closed, and checked, with the forwarder.
func (l *Launcher) WrapFor(cmd egress.Command) func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
	return l.WrapIn(cmd, nil)
}

// WrapIn is WrapFor in a sandbox of the caller's (an extra test run's,
// whose view shows its own checkout): own, or the verification's when nil.
func (l *Launcher) WrapIn(cmd egress.Command, own *sandbox.Policy) func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
	return func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
		launch, attr, extra, w, err := l.LaunchFor(cmd, argv, nil, own)
		if w != nil {
			l.net.mu.Lock()
			l.net.watches = append(l.net.watches, w)
			l.net.mu.Unlock()
		}
		return launch, attr, extra, err
	}
}

// LaunchFor prepares one sandboxed launch of cmd (Case or the verification
// command): its egress session when it has an allowlist, and its seccomp
// watch, which serves the socket watch, the session's connection watch
// and, when execs is set, the exec watch. The launcher gets the egress
// control socket and the watch control socket as extra files
// (sandbox.Policy.WatchFD). The caller closes the watch once the launcher
// has exited; it is nil only unsandboxed. own, when set, is the sandbox to
// launch in instead of cmd's own (see confine).
func (l *Launcher) LaunchFor(cmd egress.Command, argv []string, execs *execwatch.Watch, own *sandbox.Policy) ([]string, *syscall.SysProcAttr, []*os.File, *notify.Watch, error) {
	if l.in.Unsandboxed {
		// No forwarder and no namespace: only the supervisor, so that
		// nothing the command starts outlives the harness.
		launch, attr, _, err := l.confine(cmd != egress.CommandCase, argv, nil, false, false, nil)
		return launch, attr, nil, nil, err
	}
	if l.net == nil {
		return nil, nil, nil, nil, fmt.Errorf("the %s command cannot be launched before the run's network record is set up", cmd)
	}
	nw, ctl, connects, err := l.netLayout(cmd)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var extra []*os.File
	if ctl != nil {
		extra = append(extra, ctl)
	}
	// Every sandboxed launch has the socket watch: the socket calls the
	// sandbox refuses are recorded in network.jsonl.
	o := notify.Options{Connect: connects, Socket: l.net.fwd.RefuseSockets(cmd)}
	if execs != nil {
		o.Exec, o.Started = execs.Handle, execs.Start
	}
	watchCtl, w, err := notify.Attach(o)
	if err != nil {
		for _, f := range extra {
			f.Close()
		}
		return nil, nil, nil, nil, err
	}
	extra = append(extra, watchCtl)
	launch, attr, pf, err := l.confine(cmd != egress.CommandCase, argv, nw, execs != nil, true, own)
	if err != nil {
		for _, f := range extra {
			f.Close()
		}
		w.Close()
		return nil, nil, nil, nil, err
	}
	// The policy is the launcher's last extra file (sandbox.Policy.PolicyFD).
	return launch, attr, append(extra, pf), w, nil
}

// lazyLog is network.jsonl. With an allowlist it is open from the start;
// without one it is created by the first record, so a run whose commands
// made no refused socket call has none.
type lazyLog struct {
	open func() (*os.File, error)
	mu   sync.Mutex
	f    *os.File
	err  error
}

func (l *lazyLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil && l.err == nil {
		l.f, l.err = l.open()
	}
	if l.err != nil {
		return 0, l.err
	}
	return l.f.Write(b)
}

// close syncs and closes the file, if there is one, and returns what failed.
func (l *lazyLog) close() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	var errs []string
	if err := l.f.Sync(); err != nil {
		errs = append(errs, err.Error())
	}
	if err := l.f.Close(); err != nil {
		errs = append(errs, err.Error())
	}
	return errs
}

// NetAllowed says which hosts cmd's allowlist lets it reach; nil before
// the egress is started, and always unsandboxed. The network accessors
// answer "none" on a nil Launcher, as for a run with no egress.
func (l *Launcher) NetAllowed(cmd egress.Command) func(host string) bool {
	if l == nil || l.net == nil {
		return nil
	}
	return l.net.policy.For(cmd).HasHost
}

// HasAllowlist says whether cmd has any network endpoint to reach through
// the run's forwarder.
func (l *Launcher) HasAllowlist(cmd egress.Command) bool {
	return l != nil && l.net != nil && len(l.net.policy.For(cmd).Strings()) > 0
}

// Unreachable are the allowed endpoints cmd could not reach from this
// machine (none before the egress is started).
func (l *Launcher) Unreachable(cmd egress.Command) []egress.Unreachable {
	if l == nil || l.net == nil {
		return nil
	}
	return l.net.fwd.Unreachable(cmd)
}
