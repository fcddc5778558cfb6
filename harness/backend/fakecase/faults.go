package fakecase

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Fault scenarios make Case behave like a machine under stress rather than an
// adversary: they leave processes running, or produce more (valid) output than
// a run should ever hold. They are run as NAME=PARAM.

// spawnScript leaves a background subshell, a sleeper and a setsid'd
// double-forked daemon behind, all appending to the heartbeat file $1 (the
// sleeper only exists).
const spawnScript = `
( while :; do echo sub >> "$1"; sleep 0.1; done ) &
( setsid sh -c 'while :; do echo daemon >> "$1"; sleep 0.1; done' sh "$1" </dev/null >/dev/null 2>&1 & ) &
sleep 600 &
`

// eventPad makes each flood event about 1 KiB.
var eventPad = strings.Repeat("x", 960)

var faultParam = map[string]struct {
	param, description string
	run                func(param string) (func(*caseRun) error, error)
}{
	"spawn-hang": {"PATH", "make the change, leave a subshell, a sleeper and a daemon appending to PATH, then never exit", func(p string) (func(*caseRun) error, error) {
		return func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			if err := exec.Command("/bin/sh", "-c", spawnScript, "sh", p).Run(); err != nil {
				return err
			}
			c.emit(ctoharness.EvCaseLog, map[string]any{"message": "spawned background processes", "heartbeat": p})
			for {
				time.Sleep(time.Hour)
			}
		}, nil
	}},
	"fill-disk": {"BYTES", "make the change, then write fill.bin in the fixture until the disk is full or BYTES (suffix K, M or G) are written, and finish", func(p string) (func(*caseRun) error, error) {
		n, err := parseBytes(p)
		if err != nil {
			return nil, err
		}
		return func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			written, werr := fill(filepath.Join(c.root, "fill.bin"), n)
			c.attempt("fill-disk", "fill.bin", werr, map[string]any{"bytes": written})
			return nil
		}, nil
	}},
	"long-execs": {"N", "make the change, then run /bin/true with one 200 KiB argument N times without case.command events (past the profile's budget each is refused), and finish", func(p string) (func(*caseRun) error, error) {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("long-execs wants a count of runs, got %q", p)
		}
		return func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			c.runAll(n, false, "/bin/true", strings.Repeat("a", 200<<10))
			return nil
		}, nil
	}},
	"flood-events": {"BYTES", "make the change, then write BYTES (suffix K, M or G) of valid case.log events of about 1 KiB each, and finish", func(p string) (func(*caseRun) error, error) {
		n, err := parseBytes(p)
		if err != nil {
			return nil, err
		}
		return func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			w := bufio.NewWriterSize(c.stdout, 64*1024)
			for i, written := 0, int64(0); written < n; i++ {
				m, err := fmt.Fprintf(w, `{"type":"case.log","message":"flood %d","pad":"%s"}`+"\n", i, eventPad)
				if err != nil {
					return nil // the harness stopped reading: it has seen enough
				}
				written += int64(m)
			}
			_ = w.Flush()
			return nil
		}, nil
	}},
}

// lookupFault finds a fault scenario given as NAME=PARAM.
func lookupFault(name string) (Scenario, bool, error) {
	n, param, ok := strings.Cut(name, "=")
	p, known := faultParam[n]
	if !ok || !known {
		return Scenario{}, false, nil
	}
	if param == "" {
		return Scenario{}, true, fmt.Errorf("scenario %s needs a parameter: %s=%s", n, n, p.param)
	}
	run, err := p.run(param)
	if err != nil {
		return Scenario{}, true, fmt.Errorf("scenario %s: %w", n, err)
	}
	return Scenario{Name: n, Description: p.description, run: run}, true, nil
}

// FaultScenarios lists the fault scenarios (each is run as NAME=PARAM).
func FaultScenarios() []Scenario {
	var out []Scenario
	for _, n := range []string{"fill-disk", "flood-events", "long-execs", "spawn-hang"} {
		p := faultParam[n]
		out = append(out, Scenario{Name: n + "=", Description: p.description + " (" + p.param + ")"})
	}
	return out
}

// fill writes zeros to path until a write fails or limit bytes are written.
func fill(path string, limit int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	var written int64
	for written < limit {
		n, err := f.Write(chunk[:min(int64(len(chunk)), limit-written)])
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

func parseBytes(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive byte count (suffix K, M or G)", s)
	}
	return n * mult, nil
}
