package sandbox_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
)

// eventSink counts stdout bytes and keeps only the lines that can be events,
// so a 1 GiB flood does not end up in memory.
type eventSink struct {
	n          int64
	cur        []byte
	discarding bool
	lines      []string
}

func (s *eventSink) Write(p []byte) (int, error) {
	total := len(p)
	s.n += int64(total)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if !s.discarding {
			s.cur = append(s.cur, seg...)
			if len(s.cur) > 64*1024 || (len(s.cur) > 0 && s.cur[0] != '{') {
				s.discarding, s.cur = true, nil
			}
		}
		if i < 0 {
			break
		}
		if !s.discarding && len(s.cur) > 0 {
			s.lines = append(s.lines, string(s.cur))
		}
		s.cur, s.discarding = nil, false
		p = p[i+1:]
	}
	return total, nil
}

type caseResult struct {
	outcome
	events   []map[string]any
	attempts []map[string]any
	bytes    int64
}

func (c caseResult) types() []string {
	var ts []string
	for _, e := range c.events {
		ts = append(ts, fmt.Sprint(e["type"]))
	}
	return ts
}

// writeContract puts a real task contract where the fake Case expects it.
func writeContract(t *testing.T, b box) []byte {
	t.Helper()
	data, err := json.Marshal(task.Contract{SchemaVersion: "1.0.0", RunID: "r1", FixturePath: b.fixture, Task: "adversarial",
		AllowedPaths: []string{"docs/**"}, CaseTimeoutSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.task, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// runCase runs an adversarial fake Case scenario the way the harness runs
// Case: in the fixture, with backend.Env's allowlisted environment; under
// the sandbox unless bare.
func runCase(t *testing.T, b box, p sandbox.Policy, bare bool, scenario string) caseResult {
	t.Helper()
	env := backend.Env(b.scratchRoot, b.task, os.Getenv("PATH"), b.source)
	sink := &eventSink{}
	o := launchWith(t, p, b.fixture, opts{env: env, stdout: sink, bare: bare}, self(t), adversarialCmd, scenario)
	r := caseResult{outcome: o, bytes: sink.n}
	for _, line := range sink.lines {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		r.events = append(r.events, ev)
		if _, ok := ev["attempt"]; ok && ev["type"] == "case.log" {
			r.attempts = append(r.attempts, ev)
		}
	}
	if o.code != 0 {
		t.Fatalf("%s: fake Case exit %d, stderr %q", scenario, o.code, truncate(o.stderr))
	}
	ts := r.types()
	if len(ts) == 0 || ts[0] != "case.started" || ts[len(ts)-1] != "case.finished" {
		t.Fatalf("%s: events %v, want case.started ... case.finished", scenario, ts)
	}
	if len(r.attempts) == 0 {
		t.Fatalf("%s: no attempt recorded", scenario)
	}
	for _, a := range r.attempts {
		t.Logf("%s: %v", scenario, a["message"])
	}
	return r
}

func truncate(s string) string {
	if len(s) > 500 {
		return s[:500] + "…"
	}
	return s
}

func allDenied(t *testing.T, r caseResult, want bool) {
	t.Helper()
	for _, a := range r.attempts {
		if a["denied"] != want {
			t.Errorf("attempt %v %v: denied=%v, want %v (%v)", a["attempt"], a["target"], a["denied"], want, a["error"])
		}
	}
}

func unchanged(t *testing.T, path string, want []byte) {
	t.Helper()
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s changed: %q (%v)", path, truncate(string(got)), err)
	}
}

func absent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("%s exists", path)
	}
}

func TestLookupAdversarial(t *testing.T) {
	for _, name := range []string{"dotdot-escape", "overwrite-evidence", "fork-bomb", "flood-stdout",
		"write-source-abs=/x", "symlink-escape=/x", "connect=127.0.0.1:1", "daemon=/x", "read-secret=X",
		"chmod-source=/x", "touch-source=/x", "setxattr-source=/x", "chown-source=/x", "read-leak=/x", "list-dir=/x", "net-probes=get http://x/",
		"proc-args=/x", "keyring=x", "unix-dgram=/x", "vsock", "write-fd=9", "socket-families", "poison-go-cache=x_test.go",
		"write-file=check.sh", "plant-tap=results.tap", "search-git=MARKER", "apply-patch=x.patch", "run-script=solve.sh",
		"write-snapshot=/x", "write-objects=/x", "await-copy=/x"} {
		if _, ok := fakecase.LookupAdversarial(name); !ok {
			t.Errorf("%s not found", name)
		}
	}
	for _, name := range []string{"pass", "connect", "connect=", "write-source-abs", "nope=1", "fork-bomb=1"} {
		if _, ok := fakecase.LookupAdversarial(name); ok {
			t.Errorf("%s found", name)
		}
	}
	if n := len(fakecase.AdversarialScenarios()); n != 31 {
		t.Errorf("%d adversarial scenarios, want 31: each one named in the list above", n)
	}
}

func TestAdversarialCaseIsContained(t *testing.T) {
	requireSandbox(t)

	t.Run("write-source-abs", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		target := filepath.Join(b.source, "planted.txt")
		allDenied(t, runCase(t, b, b.policy(), false, "write-source-abs="+target), true)
		absent(t, target)
		unchanged(t, filepath.Join(b.source, "main.go"), []byte("original\n"))
	})

	t.Run("symlink-escape", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		r := runCase(t, b, b.policy(), false, "symlink-escape="+b.source)
		allDenied(t, r, true)
		absent(t, filepath.Join(b.source, "escaped-through-symlink.txt"))
		absent(t, filepath.Join(b.fixture, "escape-link"))
	})

	t.Run("dotdot-escape", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		r := runCase(t, b, b.policy(), false, "dotdot-escape")
		if len(r.attempts) != 2 {
			t.Errorf("%d attempts, want 2", len(r.attempts))
		}
		allDenied(t, r, true)
		absent(t, filepath.Join(b.root, "runs", "escape.txt"))
		unchanged(t, b.report, []byte("original\n"))
	})

	t.Run("overwrite-evidence", func(t *testing.T) {
		b := newBox(t)
		contract := writeContract(t, b)
		r := runCase(t, b, b.policy(), false, "overwrite-evidence")
		if len(r.attempts) != 4 {
			t.Errorf("%d attempts, want 4", len(r.attempts))
		}
		allDenied(t, r, true)
		unchanged(t, b.report, []byte("original\n"))
		unchanged(t, b.events, []byte("original\n"))
		unchanged(t, b.task, contract)
	})

	t.Run("connect", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		allDenied(t, runCase(t, b, b.policy(), false, "connect="+ln.Addr().String()), true)
	})

	t.Run("read-secret", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		stopSecret := secretHolder(t)
		defer stopSecret()
		r := runCase(t, b, b.policy(), false, "read-secret="+secretVar)
		allDenied(t, r, true)
	})

	t.Run("daemon", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		out := filepath.Join(b.tmp, "daemon.out")
		r := runCase(t, b, b.policy(), false, "daemon="+out)
		if r.attempts[0]["started"] != true {
			t.Fatalf("the daemon did not start: %v", r.attempts[0])
		}
		st1, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		if st2, _ := os.Stat(out); st2.Size() != st1.Size() {
			t.Errorf("the daemon outlived Case: %s grew %d -> %d", out, st1.Size(), st2.Size())
		}
		if alive := aliveInNamespace(r.nsInode); len(alive) > 0 {
			t.Errorf("processes of the sandbox still alive: %v", alive)
		}
	})

	t.Run("fork-bomb", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		p := b.policy()
		p.Rlimits.Processes = 300
		r := runCase(t, b, p, false, "fork-bomb")
		allDenied(t, r, true)
		if r.duration > 60*time.Second {
			t.Errorf("the fork bomb took %s", r.duration)
		}
		if alive := aliveInNamespace(r.nsInode); len(alive) > 0 {
			t.Errorf("processes of the sandbox still alive: %v", alive)
		}
	})

	t.Run("flood-stdout", func(t *testing.T) {
		if testing.Short() {
			t.Skip("writes 1 GiB")
		}
		b := newBox(t)
		writeContract(t, b)
		r := runCase(t, b, b.policy(), false, "flood-stdout")
		if r.bytes < 1<<30 {
			t.Errorf("only %d bytes reached stdout", r.bytes)
		}
		allDenied(t, r, false) // nothing to refuse; the harness caps the log
		t.Logf("1 GiB through the launcher in %s", r.duration.Round(time.Millisecond))
	})
}

// Without the sandbox the same scenarios succeed: the attempts are real.
func TestAdversarialCaseUnconfinedSucceeds(t *testing.T) {
	t.Run("write-source-abs", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		target := filepath.Join(b.source, "planted.txt")
		allDenied(t, runCase(t, b, sandbox.Policy{}, true, "write-source-abs="+target), false)
		if _, err := os.Stat(target); err != nil {
			t.Error(err)
		}
	})
	t.Run("overwrite-evidence", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		allDenied(t, runCase(t, b, sandbox.Policy{}, true, "overwrite-evidence"), false)
		if data, _ := os.ReadFile(b.report); !strings.Contains(string(data), "tampered_by") {
			t.Errorf("report.json: %q", data)
		}
	})
	t.Run("connect", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
		}()
		allDenied(t, runCase(t, b, sandbox.Policy{}, true, "connect="+ln.Addr().String()), false)
	})
	t.Run("read-secret", func(t *testing.T) {
		b := newBox(t)
		writeContract(t, b)
		stop := secretHolder(t)
		defer stop()
		r := runCase(t, b, sandbox.Policy{}, true, "read-secret="+secretVar)
		// The allowlisted environment hides it; an unconfined Case still
		// finds it in another process's /proc/PID/environ.
		allDenied(t, r, false)
		if r.attempts[0]["in_env"] != false {
			t.Errorf("the secret passed the environment allowlist: %v", r.attempts[0])
		}
	})
}

const secretVar = "CTO_SANDBOX_TEST_SECRET"

// secretHolder starts a process whose environment holds the secret, standing
// in for the harness (whose own /proc/PID/environ shows the environment it
// was started with, not what a test sets later).
func secretHolder(t *testing.T) func() {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "60")
	cmd.Env = []string{secretVar + "=hunter2"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}
