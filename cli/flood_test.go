package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// memBound is the peak resident memory allowed to the harness and to
// validate, whatever Case writes.
const memBound = 256 << 20

// peakRSS is the peak resident set of an exited child (and of the children
// it waited for), from its rusage.
func peakRSS(c *exec.Cmd) int64 {
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return -1
	}
	return ru.Maxrss << 10 // kilobytes on Linux
}

type floodResult struct {
	rep                   ctoharness.Report
	runDir                string
	harnessRSS, checkRSS  int64
	eventsBytes, rawBytes int64
}

// flood runs a real `cto-harness run` whose Case writes size of valid
// case.log events, then a real `cto-harness validate` on its run directory,
// and measures both.
func flood(tb testing.TB, h *harnessChild, size, profile string, caseTimeout int) floodResult {
	tb.Helper()
	caseCmd, _ := json.Marshal([]string{h.exe, "__case-fake", "flood-events=" + size})
	// The embedded artificial task, with room for a long flood.
	spec, err := fixtures.TaskSpec(fixtures.Artificial)
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(spec, &m); err != nil {
		tb.Fatal(err)
	}
	m["case_timeout_seconds"] = caseTimeout
	taskFile := filepath.Join(h.runs, "flood-task.json")
	spec, _ = json.Marshal(m)
	if err := os.WriteFile(taskFile, spec, 0o644); err != nil {
		tb.Fatal(err)
	}
	c := h.cmd("run", "--stage", "2", "--lane", "real", "--case-cmd", string(caseCmd), "--profile", profile, "--task", taskFile, "--json")
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	_ = c.Run() // blocked or passed: the report says which
	var line struct {
		RunDir string `json:"run_dir"`
	}
	if err := json.Unmarshal(bytes.SplitN(out.Bytes(), []byte("\n"), 2)[0], &line); err != nil || line.RunDir == "" {
		tb.Fatalf("run --json: %v\n%s", err, out.String())
	}
	res := floodResult{runDir: line.RunDir, harnessRSS: peakRSS(c)}
	data, err := os.ReadFile(filepath.Join(line.RunDir, evidence.ReportJSON))
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(data, &res.rep); err != nil {
		tb.Fatal(err)
	}
	for name, p := range map[string]*int64{evidence.EventsFile: &res.eventsBytes, evidence.CaseEvents: &res.rawBytes} {
		if fi, err := os.Stat(filepath.Join(line.RunDir, name)); err == nil {
			*p = fi.Size()
		}
	}
	v := h.cmd("validate", line.RunDir)
	vout, err := v.CombinedOutput()
	if err != nil {
		tb.Fatalf("validate %s: %v\n%s", line.RunDir, err, vout)
	}
	res.checkRSS = peakRSS(v)
	return res
}

func hasBlocker(rep ctoharness.Report, code ctoharness.BlockerCode) bool {
	for _, b := range rep.Blockers {
		if b.Code == code {
			return true
		}
	}
	return false
}

// TestEventFloodStopsAtTheCap: a Case flooding valid events is stopped at the
// profile's cap (smoke: 5000 events), the run is blocked with
// CASE_EVENT_LIMIT, and neither the harness nor validate grows large.
func TestEventFloodStopsAtTheCap(t *testing.T) {
	h := newHarnessChild(t)
	res := flood(t, h, "256M", "smoke", 60)
	if !hasBlocker(res.rep, ctoharness.BlockCaseEventLimit) || res.rep.Case.Events > 5000 {
		t.Fatalf("want CASE_EVENT_LIMIT within 5000 events, got %d events, blockers %v", res.rep.Case.Events, res.rep.Blockers)
	}
	if res.harnessRSS > memBound || res.checkRSS > memBound {
		t.Fatalf("peak memory: harness %d MiB, validate %d MiB (bound %d MiB)", res.harnessRSS>>20, res.checkRSS>>20, memBound>>20)
	}
	t.Logf("harness peak %d MiB, validate peak %d MiB, event log %d bytes", res.harnessRSS>>20, res.checkRSS>>20, res.eventsBytes)
}

// BenchmarkEventFlood1GiB lets a Case write 1 GiB of valid events under the
// yolo profile (caps 4M events, 2 GiB), so nothing stops it early: the
// harness streams every event to disk and validate streams the resulting log,
// each within memBound. Metrics: peak RSS of each, in MiB.
func BenchmarkEventFlood1GiB(b *testing.B) {
	h := newHarnessChild(b)
	for b.Loop() {
		res := flood(b, h, "1G", "yolo", 3600)
		if res.rep.Case.EventLimits.Bytes < 1<<30 || hasBlocker(res.rep, ctoharness.BlockCaseEventLimit) {
			b.Fatalf("the flood did not go through: %+v, blockers %v", res.rep.Case.EventLimits, res.rep.Blockers)
		}
		if res.harnessRSS > memBound || res.checkRSS > memBound {
			b.Fatalf("peak memory: harness %d MiB, validate %d MiB (bound %d MiB)", res.harnessRSS>>20, res.checkRSS>>20, memBound>>20)
		}
		b.ReportMetric(float64(res.harnessRSS>>20), "harness-peak-MiB")
		b.ReportMetric(float64(res.checkRSS>>20), "validate-peak-MiB")
		b.ReportMetric(float64(res.eventsBytes>>20), "event-log-MiB")
		_ = os.RemoveAll(res.runDir)
	}
}

// TestValidateStopsOnSIGTERM: `cto-harness validate` on a long event log
// stops soon after SIGTERM, and does not call the run valid. The log is a
// stage 1 run's, lengthened with copies of its last line (schema-valid, so
// validation reads them all).
func TestValidateStopsOnSIGTERM(t *testing.T) {
	h := newHarnessChild(t)
	logs, _ := filepath.Glob(filepath.Join(h.runs, "*", evidence.EventsFile))
	if len(logs) == 0 {
		t.Fatal("no stage 1 run to start from")
	}
	runDir := filepath.Dir(logs[0])
	data, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	last := append(lines[len(lines)-1], '\n')
	f, err := os.OpenFile(logs[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat(last, 400000)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	v := h.cmd("validate", runDir)
	var out bytes.Buffer
	v.Stdout, v.Stderr = &out, &out
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	if err := v.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = v.Wait()
	took := time.Since(sent)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(out.String(), "interrupted") {
		t.Fatalf("want exit 1 saying the validation was interrupted, got %v:\n%s", err, out.String())
	}
	if took > 5*time.Second {
		t.Fatalf("validate took %s to stop after SIGTERM", took)
	}
}
