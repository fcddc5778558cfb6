package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/cto-harness/cto-harness/harness/proc"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// pidReserve: after pid numbers wrap, the kernel hands out pids from 300 up
// again, so pid_max is set to Processes+pidReserve to leave Processes usable
// numbers at any time (and pid_max's floor is 301).
const pidReserve = 301

// shmSize bounds the namespace's private /dev/shm.
const shmSize = "64m"

// devFiles are the device files the command may open for writing.
var devFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// setupError is a launcher failure before the command ran.
type setupError struct{ msg string }

func (e setupError) Error() string { return e.msg }

func failf(format string, a ...any) error { return setupError{fmt.Sprintf(format, a...)} }

// enforced is what one launcher run established.
type enforced struct {
	LandlockABI int      `json:"landlock_abi"`
	PidLimit    bool     `json:"pid_limit"`
	PrivateShm  bool     `json:"private_shm"`
	Writable    []string `json:"writable"`
	Mechanisms  []string `json:"mechanisms"`
	// View is the filesystem view that was built, and how long it took.
	View        []Mount       `json:"view,omitempty"`
	ViewBuildNs int64         `json:"view_build_ns,omitempty"`
	control     *net.UnixConn // the egress control socket, held until exit
}

// Main is the launcher, the hidden subcommand Subcommand. args are what
// follows the subcommand: --policy-fd=N -- ARGV... It must run as PID 1 of the new
// PID namespace that Command's SysProcAttr creates. It returns the command's
// exit status (128+signal when it was killed), ExitSetupFailed when the
// sandbox could not be established, or ExitStartFailed when the command
// could not be executed.
//
// Two forms are for Probe only: "--noop" exits 0 at once; "--probe --policy-fd=N"
// establishes the sandbox, prints what was enforced as JSON on stdout and
// exits without running anything.
func Main(args []string, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "--noop" {
		return 0
	}
	// Everything from here to the command's fork runs on one OS thread: the
	// bounding set is emptied on this thread only (one prctl per
	// capability, where an all-threads call stops the runtime each time),
	// and the command, forked from this thread, inherits its credentials.
	runtime.LockOSThread()
	probe := len(args) > 0 && args[0] == "--probe"
	if probe {
		args = args[1:]
	}
	if len(args) < 1 || (!probe && (len(args) < 3 || args[1] != "--")) {
		return report(stderr, ExitSetupFailed, "usage: %s %sN -- COMMAND [ARG...]", Subcommand, policyFDFlag)
	}
	l, err := readPolicy(args[0])
	if err != nil {
		return report(stderr, ExitSetupFailed, "%v", err)
	}
	// Signals are caught before anything else so a SIGTERM that arrives
	// while the sandbox is being set up is not lost (PID 1 of a namespace
	// only receives the signals it has a handler for).
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)

	got, err := establish(l)
	if err != nil {
		return report(stderr, ExitSetupFailed, "cannot establish the sandbox, the command was not run: %v", err)
	}
	defer closeControl(got.control)
	if probe {
		b, _ := json.Marshal(got)
		fmt.Fprintln(os.Stdout, string(b))
		return 0
	}
	return runInit(args[2:], sigs, stderr)
}

func report(stderr io.Writer, code int, format string, a ...any) int {
	msg := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", "; ")
	fmt.Fprintf(stderr, "%s %s\n", StderrPrefix, msg)
	return code
}

// establish applies every restriction, in an order where each step still has
// the privileges it needs: namespace checks, mounts and pid_max first (they
// need CAP_SYS_ADMIN), then no_new_privs, then the capability drop, seccomp,
// Landlock, and the rlimits last (they also bind the launcher itself).
func establish(l launch) (enforced, error) {
	p := l.Policy
	var got enforced
	if err := checkNamespaces(l); err != nil {
		return got, err
	}
	err := privateProc()
	if err != nil {
		return got, err
	}
	got.Mechanisms = append(got.Mechanisms, "pidns", "mountns", "ipcns")
	if got.control, err = setupNetwork(p); err != nil {
		return got, err
	}
	if p.DenyNetwork {
		got.Mechanisms = append(got.Mechanisms, "netns")
	}
	if l.HostUID != 0 {
		got.Mechanisms = append(got.Mechanisms, "userns")
	}
	got.Writable = append([]string{}, p.Writable...)
	for _, d := range p.Writable {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			return got, failf("writable directory %s does not exist", d)
		}
	}
	viewed, err := applyView(p, &got) // a view brings its own /dev/shm and /tmp
	if err != nil {
		return got, err
	}
	if !viewed {
		ok, err := privateShm(p.Writable)
		if err != nil {
			return got, err
		}
		if ok {
			got.PrivateShm = true
			got.Writable = append(got.Writable, "/dev/shm")
		}
	}
	rl := p.Rlimits.Effective()
	ok, err := limitPids(rl.Processes, hostRoot())
	if err != nil {
		return got, err
	}
	got.PidLimit = ok
	if err := ll.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return got, failf("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	got.Mechanisms = append(got.Mechanisms, "no_new_privs")
	if err := dropCapabilities(); err != nil {
		return got, err
	}
	got.Mechanisms = append(got.Mechanisms, "capabilities_dropped")
	w := p.watches()
	if err := installSeccomp(w.Socket); err != nil {
		return got, err
	}
	got.Mechanisms = append(got.Mechanisms, "seccomp")
	if w.any() {
		// One filter and one listener serve every watch (the kernel
		// allows one listener per process). The watch control socket is
		// taken only now, so a watch that cannot be established fails
		// the launch before any command.
		uc, err := openWatchControl(p)
		if err != nil {
			return got, err
		}
		err = watchCalls(uc, w)
		uc.Close()
		if err != nil {
			return got, err
		}
		if w.Connect {
			got.Mechanisms = append(got.Mechanisms, "connect_watch")
		}
		if w.Exec {
			got.Mechanisms = append(got.Mechanisms, "exec_watch")
		}
		if w.Socket {
			got.Mechanisms = append(got.Mechanisms, "socket_watch")
		}
	}
	abi, mech, err := applyLandlock(p, got.Writable)
	if err != nil {
		return got, err
	}
	got.LandlockABI = abi
	got.Mechanisms = append(got.Mechanisms, mech...)
	if err := applyRlimits(rl); err != nil {
		return got, err
	}
	got.Mechanisms = append(got.Mechanisms, "rlimits")
	if got.PidLimit {
		got.Mechanisms = append(got.Mechanisms, "pid_limit")
	}
	return got, nil
}

// checkNamespaces proves the launcher is PID 1 of its own PID namespace and
// in mount, IPC (and network) namespaces other than the harness's, before any
// mount is made: a mount in the harness's namespace would change the host.
func checkNamespaces(l launch) error {
	if os.Getpid() != 1 {
		return failf("the launcher is not PID 1 of a new PID namespace (start it with sandbox.Command's SysProcAttr)")
	}
	names := make([]string, 0, len(l.HostNS))
	for ns := range l.HostNS {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		host := l.HostNS[ns]
		id, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return failf("cannot read the launcher's %s namespace: %v", ns, err)
		}
		if id == host {
			return failf("the launcher shares the harness's %s namespace", ns)
		}
	}
	if !l.Policy.DenyNetwork {
		return nil
	}
	ifs, err := interfaces()
	if err != nil {
		return failf("cannot list network interfaces: %v", err)
	}
	if len(ifs) != 1 || ifs[0] != "lo" {
		return failf("the network namespace is not empty (interfaces %v)", ifs)
	}
	return nil
}

func interfaces() ([]string, error) {
	data, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(string(data), "\n") {
		name, _, ok := strings.Cut(line, ":")
		if ok && !strings.Contains(name, "|") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names, nil
}

// privateProc makes every mount private to the new mount namespace (nothing
// propagates back to the host) and mounts a procfs of the new PID namespace
// over /proc, so the command sees only its own processes.
func privateProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return failf("cannot make the mounts private: %v", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return failf("cannot mount /proc for the new PID namespace: %v", err)
	}
	if self, err := os.Readlink("/proc/self"); err != nil || self != "1" {
		return failf("/proc does not show the new PID namespace (self=%q, %v)", self, err)
	}
	return nil
}

// privateShm gives the namespace its own small /dev/shm (POSIX shared memory
// and semaphores) so it can be writable without touching the host's.
func privateShm(writable []string) (bool, error) {
	fi, err := os.Stat("/dev/shm")
	if err != nil || !fi.IsDir() {
		return false, nil
	}
	for _, w := range writable {
		if Within(w, "/dev/shm") {
			return false, nil // a writable dir lives there: keep it visible
		}
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size="+shmSize); err != nil {
		return false, failf("cannot mount a private /dev/shm: %v", err)
	}
	return true, nil
}

// hostRoot reports whether uid 0 inside the namespace is root on the host
// (no user namespace, or one that maps 0 to 0).
func hostRoot() bool {
	data, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, _ := strconv.ParseUint(f[0], 10, 64)
		out, _ := strconv.ParseUint(f[1], 10, 64)
		n, _ := strconv.ParseUint(f[2], 10, 64)
		if in <= 0 && 0 < in+n {
			return out == 0
		}
	}
	return false
}

// limitPids caps the number of pids (processes and threads) the namespace can
// hold by setting its own pid_max (Linux 6.14+). RLIMIT_NPROC does the same
// for a non-root uid, but the kernel never applies it to host root, so for
// root the namespace limit is required.
func limitPids(processes uint64, root bool) (bool, error) {
	if processes == Unlimited {
		return false, nil
	}
	err := os.WriteFile("/proc/sys/kernel/pid_max", []byte(strconv.FormatUint(processes+pidReserve, 10)), 0)
	if err == nil {
		return true, nil
	}
	if root {
		return false, failf("cannot limit the number of processes: RLIMIT_NPROC does not bind root and the namespace's pid_max could not be set (needs Linux 6.14+): %v", err)
	}
	return false, nil
}

// Linux securebits.
const (
	secbitNoroot                 = 1 << 0
	secbitNorootLocked           = 1 << 1
	secbitNoSetuidFixup          = 1 << 2
	secbitNoSetuidFixupLocked    = 1 << 3
	secbitKeepCapsLocked         = 1 << 5
	secbitNoCapAmbientRaise      = 1 << 6
	secbitNoCapAmbientRaiseLocke = 1 << 7
)

// dropCapabilities makes sure the command runs with no capability at all,
// even as uid 0: every capability leaves the bounding set of the thread
// that forks the command, the inheritable
// and ambient sets are emptied, and the securebits stop exec from granting
// root its usual full set. The launcher keeps its own effective set (it
// needs nothing else than to signal and reap its children).
func dropCapabilities() error {
	bits := uintptr(secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocke)
	if err := ll.AllThreadsPrctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
		return failf("prctl(PR_SET_SECUREBITS): %v", err)
	}
	if err := ll.AllThreadsPrctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return failf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %v", err)
	}
	// The bounding set is a per-thread attribute, dropped here on the
	// launcher's locked thread, the one that forks the command (Main): the
	// other launcher threads never exec, and the securebits, no_new_privs
	// and empty inheritable and ambient sets they share already keep any
	// exec from gaining a capability.
	last := lastCap()
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return failf("prctl(PR_CAPBSET_DROP, %d): %v", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return failf("capget: %v", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if _, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return failf("capset: %v", e)
	}
	bnd, err := statusField("CapBnd")
	if err != nil || strings.Trim(bnd, "0") != "" {
		return failf("the capability bounding set is not empty (CapBnd %q, %v)", bnd, err)
	}
	return nil
}

// boundingCap returns a capability still in the calling thread's bounding
// set, if any. It asks prctl(PR_CAPBSET_READ) for every number up to the
// first the kernel does not know (EINVAL): Landlock, applied by now, may
// keep /proc out of reach.
func boundingCap() (int, bool) {
	for c := 0; c < 64; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			return 0, false // past the kernel's last capability
		}
		if err != nil || in != 0 {
			return c, true
		}
	}
	return 0, false
}

func lastCap() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return unix.CAP_LAST_CAP
}

func statusField(name string) (string, error) {
	data, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in /proc/thread-self/status", name)
}

// landlockConfigs are go-landlock's presets, index = ABI version.
var landlockConfigs = []landlock.Config{{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5,
	landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}

// LandlockABI is the kernel's Landlock ABI version, 0 when Landlock is absent
// or disabled.
func LandlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// applyLandlock restricts every thread of the launcher, and so the command,
// with the strict preset of the kernel's own ABI (never BestEffort): read and
// execute under the read-only roots, full access (except creating device
// nodes) under the writable dirs, read-write on a few harmless device files,
// and, with egress listeners and ABI 4+, TCP bind on every port but theirs.
func applyLandlock(p Policy, writable []string) (int, []string, error) {
	abi := LandlockABI()
	if abi < MinLandlockABI {
		return abi, nil, failf("Landlock ABI %d is below the required %d (kernel too old, or landlock missing from the lsm= boot parameter)", abi, MinLandlockABI)
	}
	cfg := landlockConfigs[min(abi, len(landlockConfigs)-1)]
	mech := []string{"landlock_fs"}
	if !p.DenyNetwork || p.Network == nil {
		// Without egress listeners there is no port to keep: the
		// namespace holds only the command's own loopback (netRules).
		cfg.HandledAccessNet = 0
	} else if cfg.HandledAccessNet != 0 {
		// Bind only: connect stays inside the namespace anyway (netRules).
		cfg.HandledAccessNet = landlock.AccessNetSet(ll.AccessNetBindTCP)
		mech = append(mech, "landlock_net")
	}
	// No IPC scoping: before ABI 8, go-landlock enforces the ruleset thread
	// by thread, so each launcher thread gets a sibling domain of its own,
	// and a signal scope would stop the launcher's other threads from
	// signalling the command. The PID and network namespaces already keep
	// signals and abstract UNIX sockets inside.
	cfg.Scoped = 0
	ro := p.ReadOnly
	if len(ro) == 0 {
		ro = []string{"/"}
	}
	rw := cfg.HandledAccessFS &^ landlock.AccessFSSet(ll.AccessFSMakeChar|ll.AccessFSMakeBlock|ll.AccessFSIoctlDev)
	rules := []landlock.Rule{landlock.RODirs(ro...), landlock.RWFiles(devFiles...).IgnoreIfMissing()}
	if cfg.HandledAccessNet != 0 {
		rules = append(rules, netRules(p)...)
	}
	if len(writable) > 0 {
		rules = append(rules, landlock.PathAccess(rw, writable...))
	}
	if err := cfg.Restrict(rules...); err != nil {
		return abi, nil, failf("Landlock (ABI %d) could not be enforced: %v", abi, err)
	}
	return abi, mech, nil
}

// applyRlimits sets soft = hard for each limit. A value above the current
// hard limit that may not be raised is clamped to it: the command gets at
// most what was asked.
func applyRlimits(r Rlimits) error {
	for _, l := range []struct {
		name string
		res  int
		v    uint64
	}{
		{"RLIMIT_CPU", unix.RLIMIT_CPU, r.CPUSeconds},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, r.FileSizeBytes},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, r.OpenFiles},
		{"RLIMIT_NPROC", unix.RLIMIT_NPROC, r.Processes},
		{"RLIMIT_AS", unix.RLIMIT_AS, r.AddressSpaceBytes},
	} {
		want := syscall.Rlimit{Cur: l.v, Max: l.v}
		if l.v == Unlimited {
			want = syscall.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
		}
		if l.res == unix.RLIMIT_AS && l.v != Unlimited {
			// The limit binds the launcher too; it must keep room to run.
			if vm := vmSize(); vm > 0 && l.v < vm+launcherHeadroom {
				return failf("the address-space limit %d is too small: the launcher alone maps %d bytes", l.v, vm)
			}
		}
		err := syscall.Setrlimit(l.res, &want)
		if errors.Is(err, syscall.EPERM) {
			var cur syscall.Rlimit
			if gerr := syscall.Getrlimit(l.res, &cur); gerr == nil && want.Max > cur.Max {
				want = syscall.Rlimit{Cur: cur.Max, Max: cur.Max}
				err = syscall.Setrlimit(l.res, &want)
			}
		}
		if err != nil {
			return failf("setrlimit(%s, %d): %v", l.name, l.v, err)
		}
	}
	return nil
}

// launcherHeadroom is the address space the launcher keeps free for itself
// above what it maps when the limits are applied.
const launcherHeadroom = 256 << 20

// vmSize is the launcher's current virtual size in bytes (0 if unknown).
func vmSize() uint64 {
	v, err := statusField("VmSize")
	if err != nil {
		return 0
	}
	kb, err := strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}

// runInit starts the command as the child of PID 1 in a session of its own
// and acts as the namespace's init until it exits.
func runInit(argv []string, sigs chan os.Signal, stderr io.Writer) int {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return report(stderr, ExitStartFailed, "cannot start %s: %v", argv[0], err)
	}
	if err := proc.CloseInherited(); err != nil {
		return report(stderr, ExitSetupFailed, "%v", err)
	}
	// The command inherits this thread's credentials: refuse to start it
	// from a thread that still has a capability in its bounding set (Main
	// locked the thread that dropped them).
	if c, ok := boundingCap(); ok {
		return report(stderr, ExitSetupFailed, "the thread that would start the command still has capability %d in its bounding set; the command was not run", c)
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return report(stderr, ExitStartFailed, "cannot start %s: %v", argv[0], err)
	}
	go forward(sigs)
	return proc.Reap(pid, func() bool { return syscall.Kill(-1, syscall.SIGKILL) == nil }, ExitStartFailed)
}

// forward passes termination signals on to every other process of the
// namespace; kill(-1) from PID 1 reaches exactly those.
func forward(sigs chan os.Signal) {
	for s := range sigs {
		switch s {
		case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
			_ = syscall.Kill(-1, s.(syscall.Signal))
		}
	}
}
