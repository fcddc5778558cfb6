package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Facts is what this machine can enforce, as found by Probe.
type Facts struct {
	LandlockABI int  `json:"landlock_abi"` // 0 when Landlock is absent or disabled
	NetNS       bool `json:"netns"`        // a network namespace can be created
	PIDNS       bool `json:"pidns"`
	MountNS     bool `json:"mountns"`
	IPCNS       bool `json:"ipcns"`
	UserNS      bool `json:"userns"` // a user namespace is needed (the harness is not root) and works
	NoNewPrivs  bool `json:"no_new_privs"`
	CapDrop     bool `json:"capabilities_dropped"`
	Seccomp     bool `json:"seccomp"`
	PidLimit    bool `json:"pid_limit"` // the namespace's pid_max can be set
	// Launcher: the launcher established the whole sandbox in a trial run.
	// Only then can Case and the verification command be confined.
	Launcher bool   `json:"launcher"`
	Reason   string `json:"reason,omitempty"` // the first thing missing, when !Available()
}

// Available reports whether the launcher can confine a command here.
func (f Facts) Available() bool { return f.Launcher }

// Probe reports what this machine can enforce. It starts the current
// executable (which must dispatch Subcommand to Main, as the harness binary
// does) a few times in new namespaces; nothing outside those namespaces is
// changed.
func Probe() Facts {
	self, err := os.Executable()
	if err != nil {
		return Facts{LandlockABI: LandlockABI(), Reason: "cannot locate the harness executable: " + err.Error()}
	}
	return ProbeWith(self)
}

// Reuse returns a probe for many runs in one process (a batch): it probes
// with ProbeWith(self) until the sandbox is found available and from then on
// gives that answer, so the runs do not each start the six namespaced
// processes a probe costs. A failed probe is never reused: a transient
// failure does not block the runs after it. What the kernel allowed once it
// allows later; should it not, the launcher fails and the run blocks.
func Reuse(self string) func() Facts {
	return reuse(func() Facts { return ProbeWith(self) })
}

func reuse(probe func() Facts) func() Facts {
	var mu sync.Mutex
	var found *Facts
	return func() Facts {
		mu.Lock()
		defer mu.Unlock()
		if found != nil {
			return *found
		}
		f := probe()
		if f.Available() {
			found = &f
		}
		return f
	}
}

// ProbeWith is Probe with an explicit launcher executable.
func ProbeWith(self string) Facts {
	f := Facts{LandlockABI: LandlockABI()}
	var reasons []string
	base := uintptr(0)
	var userAttr syscall.SysProcAttr
	if os.Geteuid() != 0 {
		ua := sysProcAttr(false)
		userAttr = syscall.SysProcAttr{UidMappings: ua.UidMappings, GidMappings: ua.GidMappings}
		base = syscall.CLONE_NEWUSER
		if err := tryClone(self, base, userAttr); err != nil {
			reasons = append(reasons, "cannot create a user namespace (needed without root): "+err.Error())
		} else {
			f.UserNS = true
		}
	}
	for _, ns := range []struct {
		flag uintptr
		name string
		ok   *bool
	}{{syscall.CLONE_NEWNET, "network", &f.NetNS}, {syscall.CLONE_NEWPID, "PID", &f.PIDNS},
		{syscall.CLONE_NEWNS, "mount", &f.MountNS}, {syscall.CLONE_NEWIPC, "IPC", &f.IPCNS}} {
		if err := tryClone(self, base|ns.flag, userAttr); err != nil {
			reasons = append(reasons, fmt.Sprintf("cannot create a %s namespace: %v", ns.name, err))
		} else {
			*ns.ok = true
		}
	}
	if f.LandlockABI < MinLandlockABI {
		reasons = append(reasons, fmt.Sprintf("Landlock ABI %d is below the required %d", f.LandlockABI, MinLandlockABI))
	}
	got, err := tryLauncher(self)
	if err != nil {
		reasons = append(reasons, err.Error())
	} else {
		f.Launcher = true
		f.NoNewPrivs = slices.Contains(got.Mechanisms, "no_new_privs")
		f.CapDrop = slices.Contains(got.Mechanisms, "capabilities_dropped")
		f.Seccomp = slices.Contains(got.Mechanisms, "seccomp")
		f.PidLimit = got.PidLimit
	}
	if !f.Launcher && len(reasons) > 0 {
		f.Reason = reasons[0]
	}
	return f
}

func tryClone(self string, flags uintptr, base syscall.SysProcAttr) error {
	attr := base
	attr.Cloneflags = flags
	attr.Pdeathsig = syscall.SIGKILL
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, Subcommand, "--noop")
	cmd.SysProcAttr = &attr
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 0 {
			return fmt.Errorf("%v: %s", err, firstLine(string(out)))
		}
		return err
	}
	return nil
}

func tryLauncher(self string) (enforced, error) {
	// The trial builds a default filesystem view too, so a kernel without
	// the mount API the view needs is found at the gate.
	return tryPolicy(context.Background(), self, Policy{DenyNetwork: true, View: &View{System: DefaultSystem(), Hide: DefaultHide()}}, "/")
}

// tryPolicy establishes p once in a throwaway launcher started in dir and
// returns what it enforced.
func tryPolicy(ctx context.Context, self string, p Policy, dir string) (enforced, error) {
	var got enforced
	pf, err := policyFile(p)
	if err != nil {
		return got, err
	}
	defer pf.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, Subcommand, "--probe", policyFDFlag+strconv.Itoa(p.PolicyFD()))
	cmd.SysProcAttr = sysProcAttr(p.DenyNetwork)
	cmd.ExtraFiles = []*os.File{pf}
	cmd.Env = []string{}
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if line, ok := markerLine(stderr.String()); ok {
			return got, fmt.Errorf("%s", strings.TrimSpace(strings.TrimPrefix(line, StderrPrefix)))
		}
		return got, fmt.Errorf("the launcher trial run failed: %v: %s", err, firstLine(stderr.String()))
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &got); err != nil {
		return got, fmt.Errorf("the launcher trial run printed %q, not its report (does the executable dispatch %s?)", firstLine(stdout.String()), Subcommand)
	}
	return got, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Mechanisms lists what the launcher enforces for p on a machine with facts
// f, with the names report.json's sandbox section uses. It is empty when the
// sandbox is unavailable. The list holds only if the launcher actually ran:
// a run that ended with ExitSetupFailed enforced nothing.
func (p Policy) Mechanisms(f Facts) []string {
	if !f.Available() {
		return nil
	}
	m := []string{"landlock_fs"}
	if p.DenyNetwork && p.Network != nil && f.LandlockABI >= 4 {
		m = append(m, "landlock_net")
	}
	if p.DenyNetwork {
		m = append(m, "netns")
	}
	m = append(m, "pidns", "mountns", "ipcns")
	if f.UserNS {
		m = append(m, "userns")
	}
	if p.View != nil {
		m = append(m, "fs_view")
	}
	m = append(m, "no_new_privs", "capabilities_dropped", "seccomp", "rlimits")
	if p.ExecWatch {
		m = append(m, "exec_watch")
	}
	if p.SocketWatch {
		m = append(m, "socket_watch")
	}
	if f.PidLimit && p.Rlimits.Effective().Processes != Unlimited {
		m = append(m, "pid_limit")
	}
	return append(m, "process_group", "init_reaper")
}
