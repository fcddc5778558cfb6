package proc

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reap is the wait loop of a process that children and orphans come back to
// (PID 1 of a namespace, or a child subreaper). It waits for every child;
// once target exits, it calls killRest so that nothing outlives it (daemons
// that detached with setsid or a double fork included), and it returns
// target's status (128+signal when killed) only when no child is left.
// killRest reports whether anything was still there to signal. noTarget is
// returned when target was never reaped.
func Reap(target int, killRest func() bool, noTarget int) int {
	code := -1
	for rounds := 0; ; {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			if code < 0 {
				return noTarget
			}
			if rounds++; rounds < 100 && killRest() {
				time.Sleep(time.Millisecond)
				continue // something was still alive (not yet our child): reap it too
			}
			return code
		case err != nil:
			killRest()
			if code < 0 {
				code = noTarget
			}
			return code
		}
		if pid == target {
			code = WaitCode(ws)
			killRest()
		}
	}
}

// WaitCode is a wait status as a shell reports it: the exit status, or
// 128+signal for a killed process.
func WaitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// CloseInherited marks every descriptor from 3 up close-on-exec, so that a
// command started next gets only what is handed to it: a descriptor the
// harness itself inherited (a file the user's shell opened on fd 9, say) must
// never reach Case or the verification. The caller keeps using its own
// descriptors; they only close at exec.
func CloseInherited() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	return nil
}
