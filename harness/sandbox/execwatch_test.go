package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/execwatch"
)

// An exec watch without the harness's exec control socket stops the
// launcher before the command runs: nothing runs uncounted.
func TestExecWatchWithoutControlSocketFailsClosed(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	marker := filepath.Join(b.fixture, "ran")
	p := b.policy()
	p.ExecWatch = true
	o := launch(t, p, b.fixture, "/bin/sh", "-c", "touch "+marker)
	checkSetupFailure(t, o.code, o.stderr, "exec control socket")
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
	// A socket whose other end answers 'N' to anything.
	child, w, err := execwatch.Attach(execwatch.Options{Decide: func(execwatch.Command) error { return nil }})
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
	child, w, err := execwatch.Attach(execwatch.Options{Decide: func(c execwatch.Command) error {
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
	script := `/bin/sh -c 'echo inner; /bin/true; /bin/true; /bin/true; echo end'
for i in 1 2 3 4 5; do /bin/true || echo refused $i; done
echo done`
	start := time.Now()
	o := launchWith(t, p, b.fixture, opts{extra: []*os.File{child}}, "/bin/sh", "-c", script)
	child.Close()
	stats, err := w.Close()
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
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
