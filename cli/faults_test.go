package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// harnessChild prepares a real cto-harness binary (this test binary, as
// registered in TestMain) with a fresh runs directory whose stage-1 record
// exists, so stage 2 runs can start.
type harnessChild struct {
	t    testing.TB
	exe  string
	runs string
	env  []string
}

func newHarnessChild(t testing.TB) *harnessChild {
	t.Helper()
	return newHarnessChildIn(t, t.TempDir())
}

func newHarnessChildIn(t testing.TB, runs string) *harnessChild {
	t.Helper()
	exe, err := exec.LookPath("cto-harness")
	if err != nil {
		t.Fatalf("the cto-harness test command is not in PATH: %v", err)
	}
	h := &harnessChild{t: t, exe: exe, runs: runs, env: []string{
		"PATH=" + os.Getenv("PATH"), "CTO_HARNESS_RUNS_DIR=" + runs, "XDG_CONFIG_HOME=" + t.TempDir(),
		"CTO_HARNESS_ALLOW_CASE=1", "CTO_HARNESS_CASE_STAGE=2",
	}}
	// A failing test must not leave its own survivors behind.
	t.Cleanup(func() {
		for _, pid := range processesUnder(runs) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if out, err := h.cmd("validate-stage", "1").CombinedOutput(); err != nil {
		t.Fatalf("validate-stage 1: %v\n%s", err, out)
	}
	return h
}

func (h *harnessChild) cmd(args ...string) *exec.Cmd {
	c := exec.Command(h.exe, args...)
	c.Env = h.env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// startRun starts `cto-harness run --stage 2 --lane real` with the fake Case
// scenario as the real Case command, and waits until Case has started.
func (h *harnessChild) startRun(scenario string, extra ...string) (*exec.Cmd, *bytes.Buffer) {
	h.t.Helper()
	caseCmd, _ := json.Marshal([]string{h.exe, "__case-fake", scenario})
	args := append([]string{"run", "--stage", "2", "--lane", "real", "--case-cmd", string(caseCmd), "--json"}, extra...)
	c := h.cmd(args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = c.Process.Kill() })
	waitUntil(h.t, 30*time.Second, "Case to start", func() bool {
		logs, _ := filepath.Glob(filepath.Join(h.runs, "*", evidence.EventsFile))
		for _, l := range logs {
			if data, _ := os.ReadFile(l); bytes.Contains(data, []byte(`"case.started"`)) {
				return true
			}
		}
		return false
	})
	return c, &out
}

// TestSIGTERMStopsARunHonestly sends SIGTERM to a real `cto-harness run`
// while Case runs: the run ends blocked with INTERRUPTED, the source is
// proven unchanged (not claimed mutated), and the evidence validates.
func TestSIGTERMStopsARunHonestly(t *testing.T) {
	h := newHarnessChild(t)
	c, out := h.startRun("hang")
	start := time.Now()
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := c.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("want exit 1 (blocked), got %v\n%s", err, out)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("took %s to stop after SIGTERM", d)
	}
	var line struct {
		RunDir  string               `json:"run_dir"`
		Status  string               `json:"status"`
		Mutated bool                 `json:"source_repository_mutated"`
		Blocks  []ctoharness.Blocker `json:"blockers"`
	}
	if err := json.Unmarshal(bytes.SplitN(out.Bytes(), []byte("\n"), 2)[0], &line); err != nil {
		t.Fatalf("run --json output: %v\n%s", err, out)
	}
	var rep ctoharness.Report
	data, err := os.ReadFile(filepath.Join(line.RunDir, evidence.ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	codes := map[ctoharness.BlockerCode]bool{}
	for _, b := range rep.Blockers {
		codes[b.Code] = true
	}
	if !codes[ctoharness.BlockInterrupted] || codes[ctoharness.BlockSourceMutated] || rep.SourceRepositoryMutated || line.Mutated {
		t.Fatalf("want INTERRUPTED and an unchanged source, got mutated=%v blockers %v", rep.SourceRepositoryMutated, rep.Blockers)
	}
	for _, b := range rep.Blockers {
		if b.Code == ctoharness.BlockInterrupted && !strings.Contains(b.Message, "terminated") {
			t.Fatalf("INTERRUPTED does not name the signal: %s", b.Message)
		}
	}
	if !rep.SourceNonMutation.Checked {
		t.Fatal("the non-mutation comparison did not run after the interrupt")
	}
	if vout, err := h.cmd("validate", line.RunDir).CombinedOutput(); err != nil {
		t.Fatalf("the interrupted run does not validate: %v\n%s", err, vout)
	}
}

// TestSIGKILLLeavesNoSurvivors SIGKILLs a real `cto-harness run
// --unsandboxed` while Case has a subshell, sleepers and a setsid'd daemon
// running in the fixture: afterwards no process is left there and the
// heartbeat they wrote stops.
func TestSIGKILLLeavesNoSurvivors(t *testing.T) {
	h := newHarnessChild(t)
	hb := filepath.Join(t.TempDir(), "heartbeat")
	c, out := h.startRun("spawn-hang="+hb, "--unsandboxed")
	waitUntil(t, 20*time.Second, "the background processes", func() bool {
		s := readString(hb)
		return strings.Count(s, "daemon") >= 2 && strings.Count(s, "sub") >= 2
	})
	if n := len(processesUnder(h.runs)); n < 4 {
		t.Fatalf("expected Case's tree in the fixture, found %d processes\n%s", n, out)
	}
	if err := c.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	waitUntil(t, 10*time.Second, "every process in the fixture to die", func() bool { return len(processesUnder(h.runs)) == 0 })
	size := len(readString(hb))
	time.Sleep(500 * time.Millisecond)
	if after := len(readString(hb)); after != size {
		t.Fatalf("the heartbeat is still growing after the harness was killed (%d -> %d bytes)", size, after)
	}
}

func readString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processesUnder lists the processes whose working directory is under root.
func processesUnder(root string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err == nil && (cwd == root || strings.HasPrefix(cwd, root+"/")) {
			out = append(out, pid)
		}
	}
	return out
}

// TestFullDiskIsReported: with the runs directory on a small disk that Case
// fills, a real `cto-harness run` is blocked with ARTIFACT_WRITE_FAILED,
// removes the partial fixture and says so on stderr.
func TestFullDiskIsReported(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	// Stage validation's health check wants 100 MiB free; Case fills the rest.
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=128m"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root / CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(disk, syscall.MNT_DETACH) })
	h := newHarnessChildIn(t, disk)
	caseCmd, _ := json.Marshal([]string{h.exe, "__case-fake", "fill-disk=1G"})
	c := h.cmd("run", "--stage", "2", "--lane", "real", "--case-cmd", string(caseCmd), "--json")
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("a full disk must not pass: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "ARTIFACT_WRITE_FAILED") || !strings.Contains(stderr.String(), "removed the partial fixture") {
		t.Fatalf("stderr does not report the full disk and the removal:\n%s", stderr.String())
	}
	fixtures, _ := filepath.Glob(filepath.Join(disk, "*-s2-*", "fixture"))
	if len(fixtures) > 0 {
		t.Fatalf("the partial fixture is still there: %v", fixtures)
	}
}
