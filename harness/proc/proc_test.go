package proc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunExitCode(t *testing.T) {
	var out strings.Builder
	res, err := Run(context.Background(), Spec{Argv: []string{"/bin/sh", "-c", "echo hi; exit 3"}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 3 || res.TimedOut {
		t.Fatalf("got %+v", res)
	}
	if out.String() != "hi\n" {
		t.Fatalf("output %q", out.String())
	}
}

func TestRunEnvIsExplicit(t *testing.T) {
	t.Setenv("CTO_HARNESS_SECRET_FOR_TEST", "leak")
	var out strings.Builder
	_, err := Run(context.Background(), Spec{Argv: []string{"/bin/sh", "-c", "echo \"[$CTO_HARNESS_SECRET_FOR_TEST][$ONLY]\""},
		Env: []string{"ONLY=x"}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "[][x]\n" {
		t.Fatalf("environment leaked or missing: %q", out.String())
	}
}

// A child that ignores SIGTERM and leaves a grandchild behind: after the
// timeout neither may survive.
func TestRunTimeoutKillsTree(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	script := "trap '' TERM; (trap '' TERM; sleep 60 & echo $! > " + pidFile + "; wait) & sleep 60"
	start := time.Now()
	res, err := Run(context.Background(), Spec{Argv: []string{"/bin/sh", "-c", script}, Timeout: 300 * time.Millisecond,
		Grace: 200 * time.Millisecond, Stdout: os.Stderr, Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("expected a timeout, got %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("grandchild never started: %v", err)
	}
	var pid int
	for _, c := range strings.TrimSpace(string(data)) {
		pid = pid*10 + int(c-'0')
	}
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid is a process that still runs: a killed
// grandchild is reparented to pid 1, and until pid 1 reaps it (which a busy
// machine's init may take its time over) it is a zombie, dead but present.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may hold
	// spaces: find the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

func TestCappedFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	c := NewCappedFile(f, 10)
	c.Write([]byte("0123456789abcdef"))
	c.Write([]byte("more"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if !strings.HasPrefix(string(got), "0123456789\n[cto-harness: output truncated at 10 bytes]") {
		t.Fatalf("log %q", got)
	}
	inline, trunc := c.Inline()
	if inline != "0123456789abcdefmore" || trunc {
		t.Fatalf("inline %q %v", inline, trunc)
	}
	if !c.Truncated() {
		t.Fatal("not marked truncated")
	}
}
