package supervise_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/proc"
	"github.com/cto-harness/cto-harness/harness/supervise"
)

// parentCmd makes this test binary stand in for the harness: it starts the
// supervisor over a command and waits, so a test can SIGKILL it.
const parentCmd = "__supervise-parent"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case supervise.Subcommand:
			os.Exit(supervise.Main(os.Args[2:], os.Stderr))
		case parentCmd:
			os.Exit(parent(supervise.Mode(os.Args[2]), os.Args[3:]))
		}
	}
	os.Exit(m.Run())
}

func parent(mode supervise.Mode, argv []string) int {
	self, _ := os.Executable()
	launch, attr, err := supervise.Command(self, mode, argv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd := exec.Command(launch[0], launch[1:]...)
	cmd.SysProcAttr = attr
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return 2
	}
	return 0
}

// survivorScript leaves a background subshell, a setsid'd double-forked
// daemon and plain sleeps behind, all appending to the heartbeat file $1,
// while the foreground keeps running.
const survivorScript = `
( while :; do echo sub >> "$1"; sleep 0.05; done ) &
( setsid sh -c 'while :; do echo daemon >> "$1"; sleep 0.05; done' sh "$1" </dev/null >/dev/null 2>&1 & ) &
sleep 300 &
while :; do echo fg >> "$1"; sleep 0.05; done
`

func modes(t *testing.T) []supervise.Mode {
	self, _ := os.Executable()
	m, why := supervise.Probe(self)
	if m != supervise.ModePIDNS {
		t.Logf("PID namespace mode not available here (%s); testing the subreaper mode only", why)
		return []supervise.Mode{supervise.ModeSubreaper}
	}
	return []supervise.Mode{supervise.ModePIDNS, supervise.ModeSubreaper}
}

// TestNothingOutlivesAKilledParent SIGKILLs the stand-in harness while the
// supervised command has a subshell, a daemon and sleepers running, and
// proves the heartbeat stops and no process of the tree is left.
func TestNothingOutlivesAKilledParent(t *testing.T) {
	for _, mode := range modes(t) {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			killLeftovers(t, dir)
			hb := filepath.Join(dir, "heartbeat")
			self, _ := os.Executable()
			cmd := exec.Command(self, parentCmd, string(mode), "/bin/sh", "-c", survivorScript, "sh", hb)
			cmd.Dir = dir
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool {
				return strings.Count(readFile(hb), "daemon") >= 3 && strings.Count(readFile(hb), "sub") >= 3
			})
			if n := len(inDir(dir)); n < 4 {
				t.Fatalf("expected the tree to be running in %s, found %d processes", dir, n)
			}
			_ = cmd.Process.Kill() // SIGKILL: no cleanup code of the parent runs
			_ = cmd.Wait()
			waitFor(t, func() bool { return len(inDir(dir)) == 0 })
			size := len(readFile(hb))
			time.Sleep(400 * time.Millisecond)
			if after := len(readFile(hb)); after != size {
				t.Fatalf("heartbeat still growing after the parent was killed (%d -> %d bytes)", size, after)
			}
		})
	}
}

// TestChildExitKillsTheRest: when the command exits normally, what it left
// behind is killed and its status is passed on.
func TestChildExitKillsTheRest(t *testing.T) {
	for _, mode := range modes(t) {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			killLeftovers(t, dir)
			hb := filepath.Join(dir, "heartbeat")
			script := `( setsid sh -c 'while :; do echo d >> "$1"; sleep 0.05; done' sh "$1" </dev/null >/dev/null 2>&1 & ) ; sleep 0.3; exit 7`
			self, _ := os.Executable()
			cmd := exec.Command(self, parentCmd, string(mode), "/bin/sh", "-c", script, "sh", hb)
			cmd.Dir = dir
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 7 {
				t.Fatalf("want exit 7 passed through, got %v", err)
			}
			if len(inDir(dir)) != 0 {
				t.Fatalf("processes left in %s after the command exited", dir)
			}
			size := len(readFile(hb))
			time.Sleep(300 * time.Millisecond)
			if len(readFile(hb)) != size {
				t.Fatal("the daemon outlived the command")
			}
		})
	}
}

func TestStartFailureIsMarked(t *testing.T) {
	self, _ := os.Executable()
	out, err := exec.Command(self, parentCmd, string(supervise.ModeSubreaper), "/nonexistent/case").CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("want a failure, got %v", err)
	}
	if msg, ok := supervise.IsSetupFailure(ee.ExitCode(), string(out)); !ok || !strings.Contains(msg, "/nonexistent/case") {
		t.Fatalf("exit %d, output %q: not recognised as a supervisor failure", ee.ExitCode(), out)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inDir lists the processes whose working directory is dir.
func inDir(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == dir {
			out = append(out, pid)
		}
	}
	return out
}

// TestStopRequestKillsStubbornTree: the harness stops a supervised command
// the way it stops every child (SIGTERM to the group, SIGKILL two seconds
// later). A command and a daemon that both ignore SIGTERM still leave
// nothing behind, in either mode.
func TestStopRequestKillsStubbornTree(t *testing.T) {
	for _, mode := range modes(t) {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			killLeftovers(t, dir)
			hb := filepath.Join(dir, "heartbeat")
			script := `trap '' TERM
( setsid sh -c 'trap "" TERM; while :; do echo d >> "$1"; sleep 0.05; done' sh "$1" </dev/null >/dev/null 2>&1 & )
while :; do sleep 0.05; done`
			self, _ := os.Executable()
			launch, attr, err := supervise.Command(self, mode, []string{"/bin/sh", "-c", script, "sh", hb})
			if err != nil {
				t.Fatal(err)
			}
			res, err := proc.Run(context.Background(), proc.Spec{Argv: launch, Dir: dir, SysProcAttr: attr,
				Timeout: 500 * time.Millisecond, Stdout: io.Discard, Stderr: io.Discard})
			if err != nil || !res.TimedOut {
				t.Fatalf("want a timed-out run, got %+v, %v", res, err)
			}
			waitFor(t, func() bool { return len(inDir(dir)) == 0 })
			size := len(readFile(hb))
			time.Sleep(300 * time.Millisecond)
			if size == 0 || len(readFile(hb)) != size {
				t.Fatalf("the daemon never ran or outlived the stop (heartbeat %d bytes)", size)
			}
		})
	}
}

// killLeftovers makes sure a failing test does not leave its own survivors.
func killLeftovers(t *testing.T, dir string) {
	t.Cleanup(func() {
		for _, pid := range inDir(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}
