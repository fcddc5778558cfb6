package cli_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// runOnTerminal runs this test binary as cto-harness with its stderr on a
// pseudo-terminal and returns what the terminal received.
func runOnTerminal(t *testing.T, args ...string) string {
	t.Helper()
	term, _ := runOnTerminalOut(t, args...)
	return term
}

// runOnTerminalOut is runOnTerminal that also returns what went to stdout
// (a pipe).
func runOnTerminalOut(t *testing.T, args ...string) (term, stdout string) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals on this machine (/dev/ptmx): %v", err)
	}
	defer ptmx.Close()
	var unlock int32
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, ptmx.Fd(), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("unlock the pseudo-terminal: %v", e)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("pseudo-terminal number: %v", err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// This test binary, linked as cto-harness: testscript.Main then runs the
	// registered command, and the harness re-executes it by that name too.
	bin := filepath.Join(t.TempDir(), "cto-harness")
	if err := os.Link(self, bin); err != nil {
		if err := copyFile(self, bin); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, args...)
	// The machine signing key goes to a config directory of the test's own.
	cmd.Env = append(os.Environ(), "CTO_HARNESS_CONFIG=", "XDG_CONFIG_HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var tty bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&tty, ptmx); close(done) }() // ends with EIO once the child is gone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out.String())
	}
	<-done
	return tty.String(), out.String()
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

// On a terminal, run draws its progress line on stderr; --json turns it off.
func TestProgressOnTerminal(t *testing.T) {
	runs := t.TempDir()
	out := runOnTerminal(t, "--runs-dir", runs, "run", "--stage", "1")
	for _, want := range []string{"cto-harness: copy", " files, ", "cto-harness: baseline commit", "cto-harness: verification", "\x1b[K"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal did not get %q: %q", want, out)
		}
	}
	if out := runOnTerminal(t, "--runs-dir", runs, "run", "--stage", "1", "--json"); strings.Contains(out, "cto-harness: copy") {
		t.Errorf("progress drawn with --json: %q", out)
	}
}

// On a terminal, a stage validation shows on stderr which part of it runs;
// its --json stdout stays one line.
func TestStageProgressOnTerminal(t *testing.T) {
	runs := t.TempDir()
	tty, out := runOnTerminalOut(t, "--runs-dir", runs, "validate-stage", "2", "--json")
	for _, want := range []string{"cto-harness: stage 1: pass route", "cto-harness: stage 2: gate refusals", "cto-harness: stage 2: pass route",
		"cto-harness: stage 2: health check", "\r\x1b[K"} {
		if !strings.Contains(tty, want) {
			t.Errorf("the terminal did not get %q: %q", want, tty)
		}
	}
	if !strings.HasSuffix(tty, "\r\x1b[K") {
		t.Errorf("the progress line is not cleared at the end: %q", tty)
	}
	if !strings.HasPrefix(out, `{"ok":true,`) || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "}\n") {
		t.Errorf("stdout is not one JSON line: %q", out)
	}
}
