// Package supervise ties every process an unconfined child starts to the
// harness's life. Without the sandbox launcher only the direct child would
// get SIGKILL when the harness dies (Pdeathsig); a subshell or a daemon it
// left behind would keep running in the fixture. So an unsandboxed Case runs
// under a small supervisor, the harness binary re-executed with the hidden
// subcommand Subcommand:
//
//   - ModePIDNS: the supervisor is PID 1 of a new PID namespace and gets
//     SIGKILL when the harness dies. When a namespace's init dies the kernel
//     kills every process in it, so nothing can survive, whatever it does
//     (setsid, double fork).
//   - ModeSubreaper (where a PID namespace cannot be made): the supervisor
//     marks itself a child subreaper, so orphaned descendants are re-parented
//     to it rather than to the system init, and kills its whole descendant
//     tree when the harness dies (it gets SIGTERM then, and also notices that
//     its parent changed).
//
// In both modes the supervisor forwards SIGTERM/SIGINT/SIGHUP to the tree,
// and kills whatever is left when the child exits, then exits with the
// child's status (128+signal when it was killed).
package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cto-harness/cto-harness/harness/proc"
	"golang.org/x/sys/unix"
)

// stopGrace is how long the tree has to stop after a forwarded signal before
// it is killed; shorter than proc's grace between SIGTERM and SIGKILL.
const stopGrace = time.Second

// Subcommand is the hidden harness subcommand: `self __case-supervise MODE PARENT_PID -- ARGV...`.
const Subcommand = "__case-supervise"

// Mode is how the supervisor keeps the tree together.
type Mode string

// Modes, best first.
const (
	ModePIDNS     Mode = "pidns"
	ModeSubreaper Mode = "subreaper"
)

// Mechanism is the name recorded in the report's sandbox mechanisms.
func (m Mode) Mechanism() string { return "supervisor_" + string(m) }

// Exit codes and the stderr marker of the supervisor's own failures.
const (
	ExitSetupFailed = 125 // the supervisor could not establish itself; the command was not run
	ExitStartFailed = 127 // the command could not be executed
	StderrPrefix    = "cto-harness supervisor:"
)

// Command turns argv into the supervisor invocation and the SysProcAttr to
// start it with.
func Command(self string, mode Mode, argv []string) ([]string, *syscall.SysProcAttr, error) {
	if !filepath.IsAbs(self) {
		return nil, nil, fmt.Errorf("supervise: harness path %q is not absolute", self)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, nil, errors.New("supervise: empty command")
	}
	launch := append([]string{self, Subcommand, string(mode), strconv.Itoa(os.Getpid()), "--"}, argv...)
	return launch, sysProcAttr(mode), nil
}

func sysProcAttr(mode Mode) *syscall.SysProcAttr {
	if mode == ModePIDNS {
		// The namespace's init dies with the harness and takes the namespace with it.
		return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID}
	}
	// SIGTERM, not SIGKILL: the supervisor must live long enough to kill the tree.
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// Probe finds the best mode this machine allows by starting the supervisor
// once in a new PID namespace (it exits at once). A PID namespace needs
// CAP_SYS_ADMIN; without it the subreaper mode is used. The reason says why
// the namespace was not used, for the report.
func Probe(self string) (Mode, string) {
	cmd := exec.Command(self, Subcommand, "--noop")
	cmd.SysProcAttr = sysProcAttr(ModePIDNS)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err == nil {
		return ModePIDNS, ""
	}
	return ModeSubreaper, fmt.Sprintf("no PID namespace for the supervisor (%v %s); using a child subreaper that kills its whole tree", err, strings.TrimSpace(string(out)))
}

// IsSetupFailure reports whether a supervised run ended because the
// supervisor itself failed (its exit code and the marker line on stderr).
func IsSetupFailure(exitCode int, stderr string) (string, bool) {
	if exitCode != ExitSetupFailed && exitCode != ExitStartFailed {
		return "", false
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, StderrPrefix) {
			return line, true
		}
	}
	return "", false
}

// Main is the supervisor. args follow the subcommand.
func Main(args []string, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "--noop" {
		return 0
	}
	if len(args) < 4 || args[2] != "--" {
		return fail(stderr, ExitSetupFailed, "usage: %s MODE PARENT_PID -- COMMAND [ARG...]", Subcommand)
	}
	mode := Mode(args[0])
	parent, err := strconv.Atoi(args[1])
	if err != nil || parent <= 1 {
		return fail(stderr, ExitSetupFailed, "bad parent pid %q", args[1])
	}
	// Catch signals first so a stop request during setup is not lost.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	var t tree
	switch mode {
	case ModePIDNS:
		if os.Getpid() != 1 {
			return fail(stderr, ExitSetupFailed, "mode %s but not PID 1 of a new PID namespace", mode)
		}
		t = nsTree{}
	case ModeSubreaper:
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return fail(stderr, ExitSetupFailed, "prctl(PR_SET_CHILD_SUBREAPER): %v", err)
		}
		// The harness may have died before Pdeathsig was armed.
		if os.Getppid() != parent {
			return fail(stderr, ExitSetupFailed, "the harness (pid %d) is gone", parent)
		}
		t = descendants{self: os.Getpid()}
	default:
		return fail(stderr, ExitSetupFailed, "unknown mode %q", mode)
	}
	argv := args[3:]
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fail(stderr, ExitStartFailed, "cannot start %s: %v", argv[0], err)
	}
	if err := proc.CloseInherited(); err != nil {
		return fail(stderr, ExitSetupFailed, "%v", err)
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		return fail(stderr, ExitStartFailed, "cannot start %s: %v", argv[0], err)
	}
	go watch(sigs, t, mode, parent)
	return proc.Reap(pid, func() bool { return t.signal(syscall.SIGKILL) }, ExitStartFailed)
}

func fail(stderr io.Writer, code int, format string, a ...any) int {
	fmt.Fprintf(stderr, "%s %s\n", StderrPrefix, strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", "; "))
	return code
}

// tree is the set of processes the supervisor answers for.
type tree interface {
	signal(sig syscall.Signal) (alive bool)
}

// nsTree is everything in the supervisor's PID namespace: kill(-1) from its
// init reaches exactly those processes.
type nsTree struct{}

func (nsTree) signal(sig syscall.Signal) bool { return syscall.Kill(-1, sig) == nil }

// descendants are the processes below the supervisor, found by walking
// /proc parent links. As a subreaper, every orphan below it is re-parented
// to it, so the walk finds daemons too.
type descendants struct{ self int }

func (d descendants) signal(sig syscall.Signal) bool {
	pids := d.list()
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
	return len(pids) > 0
}

func (d descendants) list() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := ppid(pid); ok {
			parent[pid] = pp
		}
	}
	var out []int
	for pid := range parent {
		for p, hops := parent[pid], 0; p > 1 && hops < 4096; p, hops = parent[p], hops+1 {
			if p == d.self {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// ppid reads the parent pid from /proc/PID/stat (the field after the
// parenthesised command name, which may itself contain spaces or parentheses).
func ppid(pid int) (int, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}

// watch forwards stop signals to the tree, and kills the tree and exits when
// the harness is gone (subreaper mode; in a PID namespace the kernel does it).
func watch(sigs chan os.Signal, t tree, mode Mode, parent int) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			if mode == ModeSubreaper && os.Getppid() != parent {
				killAll(t)
			}
			t.signal(s.(syscall.Signal))
			// The harness follows its SIGTERM with SIGKILL to the process
			// group after a grace period, which would kill the supervisor
			// before it could clean up (in subreaper mode): whatever ignores
			// the stop request is killed here first.
			time.AfterFunc(stopGrace, func() { t.signal(syscall.SIGKILL) })
		case <-tick.C:
			if mode == ModeSubreaper && os.Getppid() != parent {
				killAll(t)
			}
		}
	}
}

// killAll kills the whole tree until nothing is left, then exits: the
// harness is gone, there is nobody to report to.
func killAll(t tree) {
	for i := 0; i < 100 && t.signal(syscall.SIGKILL); i++ {
		for {
			if pid, _ := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	os.Exit(128 + int(syscall.SIGKILL))
}
