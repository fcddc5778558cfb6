// Package sandbox confines a child process with kernel features: the harness
// re-executes itself as a small launcher (the hidden subcommand
// "__sandbox-exec") that starts in fresh PID, mount, IPC and network
// namespaces, restricts itself (no_new_privs, no capabilities, a seccomp
// filter, Landlock filesystem, network and IPC-scope rules, rlimits and a
// per-namespace process limit) and then starts the real command as its child.
// It stays behind as the namespace's init: it reaps orphans, forwards SIGTERM
// to every process of the namespace, and when the command exits it kills
// whatever is left (daemons included) before exiting with the command's
// status.
//
// The launcher fails closed: when any restriction cannot be established it
// writes one line starting with StderrPrefix on stderr and exits with
// ExitSetupFailed without running the command.
//
// See docs/sandbox.md for what is and is not enforced.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Subcommand is the hidden harness subcommand that runs the launcher:
// `self __sandbox-exec --policy-fd=N -- ARGV...`. The policy itself is read
// from descriptor N (see Command), never from argv or the environment:
// /proc/1/cmdline and /proc/1/environ are readable inside the sandbox, and
// the policy names the source, the config and the runs directory that the
// view hides.
const Subcommand = "__sandbox-exec"

// Launcher exit codes and the stderr marker of its own failures.
const (
	// ExitSetupFailed: a restriction could not be established; the command
	// was not run. Map to SANDBOX_UNAVAILABLE.
	ExitSetupFailed = 125
	// ExitStartFailed: the sandbox was in place but the command could not be
	// executed (not found, not executable).
	ExitStartFailed = 127
	// StderrPrefix starts the single stderr line the launcher writes for
	// either failure.
	StderrPrefix = "cto-harness sandbox:"
)

// MinLandlockABI is the oldest Landlock ABI the launcher accepts: ABI 3 is the
// first that also controls truncate(2), without which a read-only file
// could still be emptied.
const MinLandlockABI = 3

// Unlimited in an Rlimits field means "no limit" (RLIM_INFINITY).
const Unlimited = ^uint64(0)

// Policy is what the launcher enforces.
type Policy struct {
	// Writable are absolute directories the command may write (fixture,
	// scratch). Everything else is read-only at most.
	Writable []string `json:"writable"`
	// ReadOnly are the roots the command may read and execute. Empty means
	// the whole filesystem ("/"). When set, it must include what the command
	// needs to run (/usr, /lib*, /etc, ...); Writable dirs are readable anyway.
	ReadOnly []string `json:"read_only,omitempty"`
	// Rlimits; a zero field takes its DefaultRlimits value.
	Rlimits Rlimits `json:"rlimits"`
	// DenyNetwork runs the command in a network namespace of its own that
	// holds only its loopback (up); with an egress layout and Landlock
	// ABI 4+ TCP bind on the listeners' ports is denied. Always true for
	// Case and the verification command.
	DenyNetwork bool `json:"deny_network"`
	// Network, with DenyNetwork, gives the command a way out through the
	// harness's egress forwarder (see net.go); nil keeps the namespace empty.
	// The harness must pass the control socket as the first extra file, and
	// the watch control socket (the connection watch, see watch.go) as the
	// extra file WatchFD names.
	Network *Network `json:"network,omitempty"`
	// ExecWatch hands every execve/execveat of the command's processes to
	// the harness (see watch.go); the harness must pass the watch control
	// socket as the extra file WatchFD names.
	ExecWatch bool `json:"exec_watch,omitempty"`
	// SocketWatch hands every socket(2) and socketpair(2) outside the
	// family allowlist (see installSeccomp) to the harness, which records
	// and refuses it; without it the kernel refuses them unrecorded. The
	// harness must pass the watch control socket as the extra file WatchFD
	// names.
	SocketWatch bool `json:"socket_watch,omitempty"`
	// View, when set, replaces the host filesystem with a constructed view
	// (see View and docs/sandbox.md).
	View *View `json:"view,omitempty"`
}

// Rlimits are per-process resource limits (soft = hard). Processes also sets
// the namespace's pid_max to Processes+301 (see docs/sandbox.md).
type Rlimits struct {
	CPUSeconds        uint64 `json:"cpu_seconds"`
	FileSizeBytes     uint64 `json:"file_size_bytes"`
	OpenFiles         uint64 `json:"open_files"`
	Processes         uint64 `json:"processes"`
	AddressSpaceBytes uint64 `json:"address_space_bytes"`
}

// DefaultRlimits are generous enough for a compiler or a test suite and small
// enough that a runaway process hits them long before the machine suffers.
func DefaultRlimits() Rlimits {
	return Rlimits{
		CPUSeconds:        3600,
		FileSizeBytes:     4 << 30,
		OpenFiles:         4096,
		Processes:         2048,
		AddressSpaceBytes: 1 << 40, // V8 reserves ~10 GiB per WebAssembly memory

	}
}

// Effective fills zero fields with the defaults.
func (r Rlimits) Effective() Rlimits {
	d := DefaultRlimits()
	for _, f := range []struct{ v, def *uint64 }{
		{&r.CPUSeconds, &d.CPUSeconds}, {&r.FileSizeBytes, &d.FileSizeBytes}, {&r.OpenFiles, &d.OpenFiles},
		{&r.Processes, &d.Processes}, {&r.AddressSpaceBytes, &d.AddressSpaceBytes},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return r
}

// launch is what Command hands the launcher: the policy plus the namespaces
// the harness itself is in, so the launcher can prove it is in new ones
// before it touches any mount.
type launch struct {
	Policy  Policy            `json:"policy"`
	HostNS  map[string]string `json:"host_ns"`
	HostUID int               `json:"host_uid"`
}

// namespaces the launcher must not share with the harness.
var nsNames = []string{"pid", "mnt", "ipc"}

// Command turns argv into the launcher invocation
// [self, "__sandbox-exec", "--policy-fd=N", "--", argv...] and the
// SysProcAttr the harness must start it with: new PID, mount and IPC
// namespaces (and network namespace with DenyNetwork), a user namespace only
// when the harness is not root, its own process group, and SIGKILL if the
// harness dies. The returned file holds the encoded policy (a sealed memfd):
// the caller must pass it as the launcher's descriptor p.PolicyFD(), that is
// as the last extra file, after the egress and watch control sockets, and
// close its own copy once the launcher has started.
func Command(self string, p Policy, argv []string) ([]string, *syscall.SysProcAttr, *os.File, error) {
	if !filepath.IsAbs(self) {
		return nil, nil, nil, fmt.Errorf("sandbox: launcher path %q is not absolute", self)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, nil, nil, errors.New("sandbox: empty command")
	}
	f, err := policyFile(p)
	if err != nil {
		return nil, nil, nil, err
	}
	launchArgv := append([]string{self, Subcommand, policyFDFlag + strconv.Itoa(p.PolicyFD()), "--"}, argv...)
	return launchArgv, sysProcAttr(p.DenyNetwork), f, nil
}

// policyFDFlag is the launcher's argument that names the policy descriptor.
const policyFDFlag = "--policy-fd="

// maxPolicyBytes bounds what the launcher reads from the policy descriptor.
const maxPolicyBytes = 16 << 20

// PolicyFD is the launcher's descriptor of the policy file Command returns:
// the extra file after the egress control socket (Network) and the watch
// control socket (WatchFD), or the first extra file when there is neither.
func (p Policy) PolicyFD() int {
	if p.watches().any() {
		return p.WatchFD() + 1
	}
	return ControlFD
}

// policyFile encodes p into a sealed memfd: nothing is left on disk, and
// the launcher reads exactly what the harness wrote.
func policyFile(p Policy) (*os.File, error) {
	b, err := encode(p)
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("cto-harness-policy", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cannot create the policy memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sandbox-policy")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: cannot write the policy memfd: %w", err)
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: cannot seal the policy memfd: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: cannot rewind the policy memfd: %w", err)
	}
	return f, nil
}

func encode(p Policy) ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	l := launch{Policy: p, HostNS: map[string]string{}, HostUID: os.Geteuid()}
	names := nsNames
	if p.DenyNetwork {
		names = append(names[:len(names):len(names)], "net")
	}
	for _, ns := range names {
		id, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return nil, fmt.Errorf("sandbox: cannot read the harness's %s namespace: %w", ns, err)
		}
		l.HostNS[ns] = id
	}
	return json.Marshal(l)
}

// readPolicy is the launcher's side of policyFile: arg is its
// --policy-fd=N argument. The descriptor is closed once read, so the
// command never inherits it.
func readPolicy(arg string) (launch, error) {
	var l launch
	n, ok := strings.CutPrefix(arg, policyFDFlag)
	fd, err := strconv.Atoi(n)
	if !ok || err != nil || fd < 3 {
		return l, fmt.Errorf("%q is not %sN (N >= 3)", arg, policyFDFlag)
	}
	f := os.NewFile(uintptr(fd), "sandbox-policy")
	defer f.Close()
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_WRITE == 0 {
		return l, fmt.Errorf("fd %d is not the harness's sealed policy memfd (seals %#x, %v)", fd, seals, err)
	}
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxPolicyBytes))
	if err != nil {
		return l, fmt.Errorf("cannot read the policy from fd %d: %w", fd, err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("policy is not valid JSON: %w", err)
	}
	return l, l.Policy.validate()
}

func (p Policy) validate() error {
	if err := p.Network.validate(p.DenyNetwork); err != nil {
		return err
	}
	for _, set := range []struct {
		name  string
		paths []string
	}{{"writable", p.Writable}, {"read-only", p.ReadOnly}} {
		for _, d := range set.paths {
			if !filepath.IsAbs(d) || filepath.Clean(d) != d {
				return fmt.Errorf("sandbox: %s path %q must be absolute and clean", set.name, d)
			}
		}
	}
	return nil
}

func sysProcAttr(denyNetwork bool) *syscall.SysProcAttr {
	flags := uintptr(syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC)
	if denyNetwork {
		flags |= syscall.CLONE_NEWNET
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: flags}
	if os.Geteuid() != 0 {
		// Without root, new namespaces need a user namespace. The launcher is
		// root inside it (mapped to the harness's own uid and gid) so it can
		// mount /proc and set pid_max; it drops every capability before the
		// command runs.
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return attr
}

// IsSetupFailure reports whether a launcher run ended because the sandbox
// could not be established (exit ExitSetupFailed and the marker line in its
// stderr), so the harness can block with SANDBOX_UNAVAILABLE. The returned
// message is the marker line.
func IsSetupFailure(exitCode int, stderr string) (string, bool) {
	if exitCode != ExitSetupFailed {
		return "", false
	}
	return markerLine(stderr)
}

// IsStartFailure reports whether the launcher was in place but could not
// execute the command (exit ExitStartFailed and the marker line).
func IsStartFailure(exitCode int, stderr string) (string, bool) {
	if exitCode != ExitStartFailed {
		return "", false
	}
	return markerLine(stderr)
}

func markerLine(stderr string) (string, bool) {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, StderrPrefix) {
			return line, true
		}
	}
	return "", false
}
