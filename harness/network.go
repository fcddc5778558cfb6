package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
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

// checkNet refuses malformed --allow-net / --verify-allow-net values before
// anything is written.
func (o *Options) checkNet() error {
	for _, l := range [][]string{o.AllowNetCase, o.AllowNetVerify, o.AllowNetSetup} {
		for _, s := range l {
			if _, err := egress.ParseEndpoint(s); err != nil {
				return fmt.Errorf("%w: %v", ErrUsage, err)
			}
		}
	}
	return nil
}

// netPolicy resolves each command's allowlist: the config's and the flags'
// entries are granted as given; each of the task's entries must be covered
// by them (a task never widens what the user granted).
func (r *run) netPolicy() (egress.Policy, error) {
	p, err := netPolicy(r.o, r.spec)
	if err != nil || r.adv == nil {
		return p, err
	}
	// The adversary's agent reaches its meter and nothing else.
	ep := r.adv.Endpoint()
	if p.Adversary, err = egress.ParseList([]string{ep}, egress.SourceFlag, map[string]string{ep: "adversary"}); err != nil {
		return p, ctoharness.Block(ctoharness.BlockInternal, ctoharness.StepContract, err, "the adversary's model meter address cannot be allowed")
	}
	return p, nil
}

func netPolicy(o Options, spec task.Spec) (egress.Policy, error) {
	var cfgCase, cfgVerify, cfgSetup, specCase, specVerify, specSetup []string
	if n := o.Config.Network; n != nil {
		cfgCase, cfgVerify, cfgSetup = n.CaseAllow, n.VerifyAllow, n.SetupAllow
	}
	if n := spec.Network; n != nil {
		specCase, specVerify, specSetup = n.CaseAllow, n.VerifyAllow, n.SetupAllow
	}
	resolve := func(what string, cfg, flags, spec []string) (egress.List, error) {
		c, err := egress.ParseList(cfg, egress.SourceConfig, nil)
		if err != nil {
			return nil, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepContract, err, "the config's network %s list is invalid", what)
		}
		f, err := egress.ParseList(flags, egress.SourceFlag, o.AllowNetOrigin)
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
	caseList, err := resolve("case_allow", cfgCase, o.AllowNetCase, specCase)
	if err != nil {
		return egress.Policy{}, err
	}
	verifyList, err := resolve("verify_allow", cfgVerify, o.AllowNetVerify, specVerify)
	if err != nil {
		return egress.Policy{}, err
	}
	setupList, err := resolve("setup_allow", cfgSetup, o.AllowNetSetup, specSetup)
	if err != nil {
		return egress.Policy{}, err
	}
	return egress.Policy{Case: caseList, Verify: verifyList, Setup: setupList}, nil
}

// startEgress sets the run's egress up when an allowlist is in force: the
// network log, the hosts files and the forwarder. Without any list the
// commands keep an empty network namespace, and the forwarder only records
// the socket calls the sandbox refuses: network.jsonl and the report's
// network section appear with the first such record. Unsandboxed runs
// have the host's network anyway, so no forwarder is started for them.
func (r *run) startEgress(ctx context.Context) bool {
	pol, err := r.netPolicy()
	if err != nil {
		r.BlockErr(err, ctoharness.StepContract)
		return false
	}
	if r.o.Unsandboxed {
		return true
	}
	n := &netState{policy: pol, plans: map[egress.Command]egress.Plan{}, hosts: map[egress.Command]string{}}
	newForwarder := func(log *lazyLog) *egress.Forwarder {
		return egress.New(egress.Options{Policy: pol, Log: log, Clock: r.o.Clock,
			Limits:   egress.Limits{MaxConns: r.profile.NetConns, MaxBytes: r.profile.NetBytes},
			Validate: r.o.Schemas.Validator(schemas.NetworkRecord)})
	}
	if pol.Empty() {
		n.log = &lazyLog{open: func() (*os.File, error) { return r.Dir.OpenAppend(evidence.NetworkLog) }}
		n.fwd = newForwarder(n.log)
		r.net = n
		return true
	}
	dir := filepath.Join(r.Report.RuntimeWorkspaceRoot, egress.HostsDir)
	r.Trace.Trace(ctoharness.TraceMkdir, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepContract,
			Message: fmt.Sprintf("network egress cannot be set up: %v", err)})
		return false
	}
	for _, cmd := range egress.Commands() {
		if len(pol.For(cmd)) == 0 {
			continue
		}
		plan := egress.NewPlan(cmd, pol.For(cmd))
		p := filepath.Join(dir, "hosts-"+string(cmd))
		r.Trace.Trace(ctoharness.TraceWrite, p)
		if err := os.WriteFile(p, plan.Hosts(), 0o644); err != nil {
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepContract,
				Message: fmt.Sprintf("network egress cannot be set up: %v", err)})
			return false
		}
		n.plans[cmd], n.hosts[cmd] = plan, p
	}
	f, err := r.Dir.OpenAppend(evidence.NetworkLog)
	if err != nil {
		r.BlockWrite(err, ctoharness.StepContract)
		return false
	}
	n.log = &lazyLog{f: f}
	n.fwd = newForwarder(n.log)
	r.net = n
	for _, kv := range (egress.Plan{}).ProxyEnv() {
		k, _, _ := strings.Cut(kv, "=")
		r.Report.Sandbox.EnvAllowlist = append(r.Report.Sandbox.EnvAllowlist, k)
	}
	sum := n.fwd.Summary()
	r.Report.Network = &sum
	return r.tryEgress(ctx)
}

// tryEgress builds each command's network layout once in a throwaway
// launcher, so a layout that cannot be built blocks before any command
// starts (never a fallback to the host network).
func (r *run) tryEgress(ctx context.Context) bool {
	if err := r.makeScratch(); err != nil {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepContract,
			Message: fmt.Sprintf("network egress cannot be tried: %v", err)})
		return false
	}
	for _, cmd := range egress.Commands() {
		if _, ok := r.net.plans[cmd]; !ok {
			continue
		}
		nw, ctl, connects, err := r.netLayout(cmd)
		if err == nil {
			var watchCtl *os.File
			var w *notify.Watch
			if watchCtl, w, err = notify.Attach(notify.Options{Connect: connects}); err != nil {
				ctl.Close()
			} else {
				// Only the network is tried here: the verification's own
				// directories do not exist yet, so Case's stand in.
				pol := r.policy(false)
				pol.Network = nw
				err = sandbox.TryNetwork(ctx, r.o.SelfExe, pol, ctl, watchCtl)
				if werr := w.Close(); err == nil {
					err = werr
				}
			}
		}
		if err != nil {
			r.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepContract,
				Message: fmt.Sprintf("the network egress of the %s command cannot be set up: %v", cmd, err)})
			return false
		}
	}
	return true
}

// netEnv are the proxy variables of cmd, when it has an allowlist.
func (r *run) netEnv(cmd egress.Command) []string {
	if r.net == nil {
		return nil
	}
	plan, ok := r.net.plans[cmd]
	if !ok {
		return nil
	}
	return plan.ProxyEnv()
}

// netLayout attaches a forwarder session for one launch of cmd and returns
// the layout the launcher must build, the control socket it gets as fd 3,
// and the session's connection watch. All are nil without an allowlist.
func (r *run) netLayout(cmd egress.Command) (*sandbox.Network, *os.File, notify.Handler, error) {
	if r.net == nil {
		return nil, nil, nil, nil
	}
	plan, ok := r.net.plans[cmd]
	if !ok {
		return nil, nil, nil, nil
	}
	child, connects, err := r.net.fwd.Attach(plan)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("network egress for %s cannot be set up: %w", cmd, err)
	}
	addrs := make([]string, len(plan.Addrs))
	for i, a := range plan.Addrs {
		addrs[i] = a.String()
	}
	return &sandbox.Network{Ports: plan.Ports, ProxyPort: plan.ProxyPort, Addrs: addrs, HostsFile: r.net.hosts[cmd]},
		child, connects, nil
}

// stopEgress stops the forwarder, closes network.jsonl and records the
// summary. A record that could not be written, or listeners the harness
// could not take, block the run.
func (r *run) stopEgress() {
	if r.net == nil {
		return
	}
	r.net.fwd.Close()
	r.net.mu.Lock()
	watches := r.net.watches
	r.net.watches = nil
	r.net.mu.Unlock()
	var broken []string
	for _, w := range watches {
		if err := w.Close(); err != nil {
			broken = append(broken, err.Error())
		}
	}
	sum := r.net.fwd.Summary()
	if !r.net.policy.Empty() || sum.Attempts > 0 || len(sum.Errors) > 0 {
		// Without an allowlist the section says what the socket watch
		// recorded, and is left out when it recorded nothing.
		r.Report.Network = &sum
	}
	setup, write := r.net.fwd.Failures()
	setup = append(setup, broken...)
	write = append(write, r.net.log.close()...)
	if len(write) > 0 {
		r.BlockWrite(fmt.Errorf("%w: %s: %s", evidence.ErrWrite, evidence.NetworkLog, strings.Join(write, "; ")), ctoharness.StepReport)
	}
	if len(setup) > 0 {
		r.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepReport,
			Message: "network egress failed: " + strings.Join(setup, "; ")})
	}
}

// wrapFor is the sandbox wrapper of the verification command: its
// launches' seccomp watches are closed, and checked, with the forwarder.
func (r *run) wrapFor(cmd egress.Command) func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
	return r.wrapIn(cmd, nil)
}

// wrapIn is wrapFor in a sandbox of the caller's (an extra test run's,
// whose view shows its own checkout): own, or the verification's when nil.
func (r *run) wrapIn(cmd egress.Command, own *sandbox.Policy) func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
	return func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
		launch, attr, extra, w, err := r.launchFor(cmd, argv, nil, own)
		if w != nil {
			r.net.mu.Lock()
			r.net.watches = append(r.net.watches, w)
			r.net.mu.Unlock()
		}
		return launch, attr, extra, err
	}
}

// launchFor prepares one sandboxed launch of cmd (Case or the verification
// command): its egress session when it has an allowlist, and its seccomp
// watch, which serves the socket watch, the session's connection watch
// and, when execs is set, the exec watch. The launcher gets the egress
// control socket and the watch control socket as extra files
// (sandbox.Policy.WatchFD). The caller closes the watch once the launcher
// has exited; it is nil only unsandboxed. own, when set, is the sandbox to
// launch in instead of cmd's own (see confine).
func (r *run) launchFor(cmd egress.Command, argv []string, execs *execwatch.Watch, own *sandbox.Policy) ([]string, *syscall.SysProcAttr, []*os.File, *notify.Watch, error) {
	if r.o.Unsandboxed {
		// No forwarder and no namespace: only the supervisor, so that
		// nothing the command starts outlives the harness.
		launch, attr, _, err := r.confine(cmd != egress.CommandCase, argv, nil, false, false, nil)
		return launch, attr, nil, nil, err
	}
	if r.net == nil {
		return nil, nil, nil, nil, fmt.Errorf("the %s command cannot be launched before the run's network record is set up", cmd)
	}
	nw, ctl, connects, err := r.netLayout(cmd)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var extra []*os.File
	if ctl != nil {
		extra = append(extra, ctl)
	}
	// Every sandboxed launch has the socket watch: the socket calls the
	// sandbox refuses are recorded in network.jsonl.
	o := notify.Options{Connect: connects, Socket: r.net.fwd.RefuseSockets(cmd)}
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
	launch, attr, pf, err := r.confine(cmd != egress.CommandCase, argv, nw, execs != nil, true, own)
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
