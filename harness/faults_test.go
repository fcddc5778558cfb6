package harness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/validators"
)

// cancelWhen cancels ctx (with cause) once the run's event log contains
// marker, as a signal arriving mid-run would.
func cancelWhen(t *testing.T, runs, marker string, cancel context.CancelCauseFunc) {
	t.Helper()
	old := map[string]bool{}
	if before, _ := filepath.Glob(filepath.Join(runs, "*", evidence.EventsFile)); before != nil {
		for _, l := range before {
			old[l] = true
		}
	}
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			logs, _ := filepath.Glob(filepath.Join(runs, "*", evidence.EventsFile))
			for _, l := range logs {
				if old[l] {
					continue
				}
				if data, _ := os.ReadFile(l); strings.Contains(string(data), marker) {
					cancel(errors.New("terminated signal received"))
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// TestInterruptIsHonest: an interrupt while Case runs stops Case, still takes
// the after-proof and the comparison, blocks with INTERRUPTED, and does not
// claim the (unchanged) source was mutated.
func TestInterruptIsHonest(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	for _, unsandboxed := range []bool{false, true} {
		name := map[bool]string{false: "sandboxed", true: "unsandboxed"}[unsandboxed]
		t.Run(name, func(t *testing.T) {
			o := base
			o.Scenario = "hang"
			o.Unsandboxed = unsandboxed
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			cancelWhen(t, o.RunsDir, `"case.started"`, cancel)
			start := time.Now()
			rep, err := harness.Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("the interrupt did not stop Case promptly (%s)", time.Since(start))
			}
			if !hasCode(rep, ctoharness.BlockInterrupted) || rep.Status != ctoharness.StatusBlocked {
				t.Fatalf("want INTERRUPTED, got status %s blockers %v", rep.Status, rep.Blockers)
			}
			if rep.SourceRepositoryMutated || hasCode(rep, ctoharness.BlockSourceMutated) || !rep.SourceNonMutation.Checked {
				t.Fatalf("an interrupt must not be reported as a mutation: mutated=%v checked=%v blockers %v",
					rep.SourceRepositoryMutated, rep.SourceNonMutation.Checked, rep.Blockers)
			}
			for _, b := range rep.Blockers {
				if b.Code == ctoharness.BlockInterrupted && (b.Step != ctoharness.StepCase || !strings.Contains(b.Message, "terminated")) {
					t.Fatalf("INTERRUPTED should name the Case step and the signal: %+v", b)
				}
			}
			for _, a := range []string{evidence.SourceAfter, evidence.NonMutation, evidence.CleanEnd} {
				if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, a)); err != nil {
					t.Fatalf("%s was not written after the interrupt: %v", a, err)
				}
			}
			if unsandboxed && !slices.Contains(rep.Sandbox.Mechanisms, "supervisor_pidns") && !slices.Contains(rep.Sandbox.Mechanisms, "supervisor_subreaper") {
				t.Fatalf("an unsandboxed run must record its supervisor: %v", rep.Sandbox.Mechanisms)
			}
			mustValidate(t, set, rep, false)
		})
	}
}

// TestInterruptBeforeTheRun: a run whose context is already cancelled is
// blocked with INTERRUPTED, not with whatever step happened to notice.
func TestInterruptBeforeTheRun(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	rep, err := harness.Run(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if !hasCode(rep, ctoharness.BlockInterrupted) || rep.Status == ctoharness.StatusPass || rep.SourceRepositoryMutated {
		t.Fatalf("status %s mutated %v blockers %v", rep.Status, rep.SourceRepositoryMutated, rep.Blockers)
	}
	mustValidate(t, set, rep, false)
}

// TestEventFloodIsCapped: a Case that writes valid events without end is
// stopped at the profile's cap with CASE_EVENT_LIMIT; the event logs stay
// within the cap and the run still validates.
func TestEventFloodIsCapped(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	o := base
	o.Profile = "smoke" // 5000 events, 8 MiB
	o.Scenario = "flood-events=64M"
	start := time.Now()
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !hasCode(rep, ctoharness.BlockCaseEventLimit) || rep.Status != ctoharness.StatusBlocked {
		t.Fatalf("want CASE_EVENT_LIMIT, got %s %v", rep.Status, rep.Blockers)
	}
	lim := rep.Case.EventLimits
	if lim.MaxEvents != 5000 || lim.MaxBytes != 8<<20 || rep.Case.Events > 5000 || lim.Bytes > lim.MaxBytes {
		t.Fatalf("limits not recorded or not held: events %d, %+v", rep.Case.Events, lim)
	}
	for _, name := range []string{evidence.EventsFile, evidence.CaseEvents} {
		fi, err := os.Stat(filepath.Join(rep.RunArtifactDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 16<<20 {
			t.Fatalf("%s is %d bytes: the cap did not bound it", name, fi.Size())
		}
	}
	t.Logf("stopped after %s: %d events, %d bytes accepted, %d dropped", time.Since(start), rep.Case.Events, lim.Bytes, lim.Dropped)
	mustValidate(t, set, rep, false)
}

// smallDisk mounts a tmpfs of size bytes at a new directory: a disk that
// really fills up. It needs root (CAP_SYS_ADMIN).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root / CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// TestFullDiskRemovesThePartialFixture: Case fills the disk the runs
// directory is on. The run is blocked with ARTIFACT_WRITE_FAILED (never a
// pass), the partial fixture and scratch are removed so the disk is usable
// again, the report says so, and it is still written.
func TestFullDiskRemovesThePartialFixture(t *testing.T) {
	set := compile(t)
	runs := smallDisk(t, "32m")
	// Stage 2 is validated on the small disk itself: a stage record is bound
	// to its runs directory.
	exe, _ := os.Executable()
	base, _ := stage3(t, set)
	if res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: base.Signing}); !res.OK {
		t.Fatalf("stage 2 validation on the small disk: %v", res.Errors)
	}
	o := base
	o.RunsDir = runs
	o.Scenario = "fill-disk=1G"
	rep, err := harness.Run(context.Background(), o)
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	if !hasCode(rep, ctoharness.BlockArtifactWriteFailed) || rep.Status == ctoharness.StatusPass || rep.Qualifies {
		t.Fatalf("want ARTIFACT_WRITE_FAILED and no pass, got %s %v", rep.Status, rep.Blockers)
	}
	if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, evidence.FixtureDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the partial fixture is still there: %v", err)
	}
	var said bool
	for _, b := range rep.Blockers {
		said = said || b.Code == ctoharness.BlockArtifactWriteFailed && strings.Contains(b.Message, "removed the partial fixture")
	}
	if !said {
		t.Fatalf("the report does not say the fixture was removed: %v", rep.Blockers)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(runs, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * st.Bsize; free < 8<<20 {
		t.Fatalf("only %d bytes free after the run: the space was not given back", free)
	}
	if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, evidence.ReportJSON)); err != nil {
		t.Fatalf("the report was not written: %v", err)
	}
}

// TestLongRefusedCommandsStayBounded: Case runs a command with a 200 KiB
// argument 300 times, past the fast profile's budget. Every refusal
// is counted and recorded, and the evidence stays small: a refused
// command's text is cut in report.json and in its command_refused event,
// whatever its length. The run still validates.
func TestLongRefusedCommandsStayBounded(t *testing.T) {
	set := compile(t)
	base, _ := stage3(t, set)
	o := base
	o.Scenario = "long-execs=300"
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	cmds := rep.Case.Commands
	// A command too long to read whole counts as a heavy run: past the
	// profile's two, every one is refused.
	if cmds == nil || cmds.Refused < 275 || cmds.RefusalEvents != cmds.Refused || len(cmds.RefusedCommands) == 0 {
		t.Fatalf("refusals not counted or not recorded: %d refused, %d events", cmds.Refused, cmds.RefusalEvents)
	}
	for _, rc := range cmds.RefusedCommands {
		if len(rc.Command) > 8<<10 {
			t.Fatalf("a refused command is listed with %d bytes", len(rc.Command))
		}
	}
	for name, limit := range map[string]int64{evidence.ReportJSON: 2 << 20, evidence.EventsFile: 8 << 20} {
		fi, err := os.Stat(filepath.Join(rep.RunArtifactDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > limit {
			t.Errorf("%s is %d bytes after 275 refusals of a 200 KiB command", name, fi.Size())
		}
	}
	mustValidate(t, set, rep, false)
}
