package caserun

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/runsink/runsinktest"
	"github.com/cto-harness/cto-harness/harness/task"
)

// caseRun is one change step with a real /bin/sh as Case, launched as is
// (the launcher's part is the hook; the sandbox has tests of its own).
type caseRun struct {
	s        *runsink.Sink
	in       Input
	launched int
	started  int
}

func newCaseRun(t *testing.T, script string) *caseRun {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	rep := &ctoharness.Report{Blockers: []ctoharness.Blocker{}, Case: ctoharness.CaseRecord{Argv: []string{}, EnvKeys: []string{}}}
	s := runsinktest.New(t, rep)
	base := t.TempDir()
	prof, err := profile.Lookup("fast")
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(base, "fixture")
	if err := os.Mkdir(fixture, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &caseRun{s: s}
	c.in = Input{Fixture: fixture, Contract: &task.Contract{CaseTimeoutSeconds: 30}, Lane: ctoharness.LaneReal,
		Argv: []string{sh, "-c", script}, Profile: prof,
		Leaks:       func(string) string { return "" },
		MakeScratch: func() error { return nil },
		Env:         func() []string { return []string{"PATH=/usr/bin:/bin", "HOME=" + base} },
		Started:     func() { c.started++ },
		Launch: func(argv []string, _ *execwatch.Watch) ([]string, *syscall.SysProcAttr, []*os.File, *notify.Watch, error) {
			c.launched++
			return argv, nil, nil, nil, nil
		}}
	return c
}

func (c *caseRun) codes() []string {
	var out []string
	for _, b := range c.s.Report.Blockers {
		out = append(out, string(b.Code))
	}
	return out
}

// Start, watch and end on a Case that keeps the adapter contract: its
// events are read, the run learns it started, and nothing blocks.
func TestChangeRunsAndJudgesACase(t *testing.T) {
	c := newCaseRun(t, `printf '{"type":"case.started"}\n{"type":"case.finished"}\n'; echo log >&2`)
	Change(context.Background(), c.s, c.in)
	rep := c.s.Report
	if len(rep.Blockers) != 0 {
		t.Fatalf("blockers %v: %+v", c.codes(), rep.Blockers)
	}
	if !rep.CaseProcessStarted || rep.Case.ExitCode == nil || *rep.Case.ExitCode != 0 || rep.Case.Events != 2 {
		t.Errorf("case record: started %v exit %v events %d", rep.CaseProcessStarted, rep.Case.ExitCode, rep.Case.Events)
	}
	if c.launched != 1 || c.started != 1 {
		t.Errorf("launched %d times, started hook %d times; want 1 and 1", c.launched, c.started)
	}
	if strings.Join(rep.Case.EnvKeys, ",") != "PATH,HOME" || rep.Case.TimeoutSeconds != 30 {
		t.Errorf("env keys %v timeout %d", rep.Case.EnvKeys, rep.Case.TimeoutSeconds)
	}
	stderr, err := os.ReadFile(c.s.Dir.Path(evidence.CaseStderr))
	if err != nil || string(stderr) != "log\n" {
		t.Errorf("%s: %q, %v", evidence.CaseStderr, stderr, err)
	}
}

// The end's judgement of a real process: no events, or a failing exit.
func TestChangeJudgesHowCaseEnded(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		{"exit 0", string(ctoharness.BlockMissingRequiredEvent)},
		{`printf '{"type":"case.started"}\n{"type":"case.finished"}\n'; exit 3`, string(ctoharness.BlockCaseExitNonZero)},
		{`printf 'not an event\n{"type":"case.started"}\n{"type":"case.finished"}\n'`, string(ctoharness.BlockCaseEventMalformed)},
	} {
		c := newCaseRun(t, tc.script)
		Change(context.Background(), c.s, c.in)
		if got := strings.Join(c.codes(), ","); got != tc.want {
			t.Errorf("%q: blockers %s, want %s", tc.script, got, tc.want)
		}
	}
}

// Start refuses before anything runs: a command naming the source, and a
// launch the sandbox cannot make.
func TestStartRefusals(t *testing.T) {
	c := newCaseRun(t, "exit 0")
	c.in.Leaks = func(s string) string {
		if strings.Contains(s, "exit") {
			return "/src"
		}
		return ""
	}
	Change(context.Background(), c.s, c.in)
	if got := strings.Join(c.codes(), ","); got != string(ctoharness.BlockCaseStartFailed) || c.launched != 0 || c.s.Report.CaseProcessStarted {
		t.Errorf("naming the source: blockers %s, launched %d, started %v", got, c.launched, c.s.Report.CaseProcessStarted)
	}

	c = newCaseRun(t, "exit 0")
	c.in.Launch = func([]string, *execwatch.Watch) ([]string, *syscall.SysProcAttr, []*os.File, *notify.Watch, error) {
		return nil, nil, nil, nil, errors.New("no user namespace")
	}
	Change(context.Background(), c.s, c.in)
	if got := strings.Join(c.codes(), ","); got != string(ctoharness.BlockSandboxUnavailable) || c.s.Report.CaseProcessStarted {
		t.Errorf("launch failure: blockers %s, started %v", got, c.s.Report.CaseProcessStarted)
	}

	c = newCaseRun(t, "exit 0")
	c.in.MakeScratch = func() error { return errors.New("read-only file system") }
	Change(context.Background(), c.s, c.in)
	if got := strings.Join(c.codes(), ","); got != string(ctoharness.BlockCaseStartFailed) || c.launched != 0 {
		t.Errorf("scratch failure: blockers %s, launched %d", got, c.launched)
	}
}
