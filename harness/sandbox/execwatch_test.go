package sandbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// An exec watch without the harness's watch control socket stops the
// launcher before the command runs: nothing runs uncounted.
func TestExecWatchWithoutControlSocketFailsClosed(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	marker := filepath.Join(b.fixture, "ran")
	p := b.policy()
	p.ExecWatch = true
	// /dev/null where the socket belongs keeps the policy at its place.
	o := launchWith(t, p, b.fixture, opts{extra: devNulls(t, 1)}, "/bin/sh", "-c", "touch "+marker)
	checkSetupFailure(t, o.code, o.stderr, "watch control socket")
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although the exec watch could not be set up")
	}
}

// A watch that refuses the launcher's listener stops the command too.
func TestExecWatchRefusedFailsClosed(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	marker := filepath.Join(b.fixture, "ran")
	p := b.policy()
	p.ExecWatch = true
	child, w, err := notify.Attach(notify.Options{Exec: func(c *notify.Call) { c.Answer(0) }})
	if err != nil {
		t.Fatal(err)
	}
	w.Close() // the watch is gone before the launcher sends: no acknowledgement
	o := launchWith(t, p, b.fixture, opts{extra: []*os.File{child}}, "/bin/sh", "-c", "touch "+marker)
	child.Close()
	checkSetupFailure(t, o.code, o.stderr, "exec watch")
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although nobody watched its execs")
	}
}

// The watch sees every exec of the command's processes: the root is the
// agent, a child of the root is a command (a shell's -c string is its
// line), a command's own children are inside it, and a command Decide
// refuses fails with EACCES while the rest carries on.
func TestExecWatchCountsAndRefuses(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	p := b.policy()
	p.ExecWatch = true
	var mu sync.Mutex
	var seen []execwatch.Command
	ew, err := execwatch.New(execwatch.Options{Decide: func(c execwatch.Command) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, c)
		if len(seen) > 4 {
			return errors.New("over budget")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	child, w, err := notify.Attach(notify.Options{Exec: ew.Handle, Started: ew.Start})
	if err != nil {
		t.Fatal(err)
	}
	script := `/bin/sh -c 'echo inner; /bin/true; /bin/true; /bin/true; echo end'
for i in 1 2 3 4 5; do /bin/true || echo refused $i; done
echo done`
	start := time.Now()
	o := launchWith(t, p, b.fixture, opts{extra: []*os.File{child}}, "/bin/sh", "-c", script)
	child.Close()
	if err := w.Close(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	stats := ew.Stats()
	t.Logf("%d execs in %v", stats.Execs, time.Since(start))
	if o.code != 0 {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	if !strings.Contains(o.stdout, "inner") || !strings.Contains(o.stdout, "done") {
		t.Errorf("stdout %q", o.stdout)
	}
	// Commands 1-4: the inner shell and three of the loop's /bin/true;
	// the loop's last two are refused.
	if got := strings.Count(o.stdout, "refused"); got != 2 || !strings.Contains(o.stdout, "refused 4") || !strings.Contains(o.stdout, "refused 5") {
		t.Errorf("refusals seen by the command: %q", o.stdout)
	}
	if len(seen) != 6 {
		t.Fatalf("%d commands decided, want 6: %+v", len(seen), seen)
	}
	if !seen[0].Shell || !strings.HasPrefix(seen[0].Line, "echo inner; /bin/true") {
		t.Errorf("first command %+v: want the inner shell's -c string", seen[0])
	}
	if seen[1].Line != "/bin/true" || seen[1].Shell {
		t.Errorf("second command %+v", seen[1])
	}
	// root (1, agent) + inner shell (command) + its three /bin/true
	// (inside) + five loop execs (three commands, two refused).
	want := execwatch.Stats{Execs: 10, Commands: 4, Refused: 2, Inside: 3, Agent: 1}
	if stats != want {
		t.Errorf("stats %+v, want %+v", stats, want)
	}
}

// With a network layout, the exec watch and the connection watch share the
// launcher's one seccomp listener: one command both connects where no
// listener is (refused at the call and recorded by the forwarder) and runs
// past the budget (the exec is refused and counted).
func TestExecWatchWithNetworkSharesTheListener(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	l, err := egress.ParseList([]string{"127.0.0.1:8080"}, egress.SourceFlag, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := egress.NewPlan(egress.CommandCase, l)
	hosts := filepath.Join(b.root, "hosts")
	if err := os.WriteFile(hosts, plan.Hosts(), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	var logMu sync.Mutex
	f := egress.New(egress.Options{Policy: egress.Policy{Case: l}, Log: lockedWriter{&logMu, &log}})
	defer f.Close()
	ctl, connects, err := f.Attach(plan)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	ew, err := execwatch.New(execwatch.Options{Decide: func(c execwatch.Command) error {
		seen = append(seen, c.Line)
		if len(seen) > 2 {
			return errors.New("over budget")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	watchCtl, w, err := notify.Attach(notify.Options{Exec: ew.Handle, Started: ew.Start, Connect: connects})
	if err != nil {
		t.Fatal(err)
	}
	p := b.policy()
	p.ExecWatch = true
	p.Network = &sandbox.Network{Ports: plan.Ports, ProxyPort: plan.ProxyPort, HostsFile: hosts}
	script := self(t) + " " + helperCmd + ` connect 192.0.2.1:9999
/bin/true || echo refused 2
/bin/true || echo refused 3`
	o := launchWith(t, p, b.fixture, opts{extra: []*os.File{ctl, watchCtl}}, "/bin/sh", "-c", script)
	if err := w.Close(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	f.Close()
	if o.code != 0 {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	if r := o.result(t); r.OK || r.Errno != "ENETUNREACH" {
		t.Errorf("connect to an address outside the namespace: %+v", r)
	}
	if strings.Contains(o.stdout, "refused 2") || !strings.Contains(o.stdout, "refused 3") {
		t.Errorf("stdout %q: want only the third command refused", o.stdout)
	}
	want := execwatch.Stats{Execs: 4, Commands: 2, Refused: 1, Agent: 1}
	if got := ew.Stats(); got != want {
		t.Errorf("exec stats %+v, want %+v", got, want)
	}
	logMu.Lock()
	text := log.String()
	logMu.Unlock()
	var rec struct {
		Decision, Via, Host string
		Port                int
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &rec); err != nil {
		t.Fatalf("network log %q: %v", text, err)
	}
	if rec.Decision != egress.Denied || rec.Via != egress.ViaSyscall || rec.Port != 9999 {
		t.Errorf("network record %+v", rec)
	}
	if setup, write := f.Failures(); len(setup)+len(write) != 0 {
		t.Errorf("forwarder failures %v %v", setup, write)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A launcher around a long shell script (codex runs every command as its
// own binary around a 38 KiB script that ends with the command) is read
// whole: the command at the end is what the profile classifies.
func TestExecWatchReadsALongLauncherCall(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	p := b.policy()
	p.ExecWatch = true
	var mu sync.Mutex
	var seen []execwatch.Command
	ew, err := execwatch.New(execwatch.Options{Decide: func(c execwatch.Command) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, c)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	child, w, err := notify.Attach(notify.Options{Exec: ew.Handle, Started: ew.Start})
	if err != nil {
		t.Fatal(err)
	}
	script := `pad=$(head -c 60000 /dev/zero | tr '\0' x)
/usr/bin/env /bin/sh -c ": $pad
go test ./... 2>/dev/null; echo launched"`
	o := launchWith(t, p, b.fixture, opts{extra: []*os.File{child}}, "/bin/sh", "-c", script)
	child.Close()
	if err := w.Close(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	if o.code != 0 || !strings.Contains(o.stdout, "launched") {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	var launched *execwatch.Command
	for i, c := range seen {
		if c.Path == "/usr/bin/env" {
			launched = &seen[i]
		}
	}
	if launched == nil {
		t.Fatalf("the launcher was not decided: %d commands", len(seen))
	}
	if launched.Truncated || !launched.Shell || !strings.HasPrefix(launched.Line, "/usr/bin/env\n: xxx") ||
		!strings.HasSuffix(launched.Line, "echo launched") || len(launched.Line) < 60000 {
		t.Errorf("launcher seen as shell=%v truncated=%v, %d bytes, ending %q", launched.Shell, launched.Truncated, len(launched.Line),
			launched.Line[max(0, len(launched.Line)-40):])
	}
	if cl := profile.Classify(launched.Line); !cl.Test || cl.Unknown {
		t.Errorf("the go test at the end of the launcher's script: class %+v", cl)
	}
}
