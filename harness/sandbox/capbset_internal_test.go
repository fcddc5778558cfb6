package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBoundingCapSeesWhatTheThreadHolds checks the launcher's last check
// before it forks the command: a thread with a bounding set is caught, and
// a thread that emptied its own is not, whatever the other threads hold.
func TestBoundingCapSeesWhatTheThreadHolds(t *testing.T) {
	bnd, err := statusField("CapBnd")
	if err != nil {
		t.Fatal(err)
	}
	if _, held := boundingCap(); held != (strings.Trim(bnd, "0") != "") {
		t.Fatalf("boundingCap reports held=%v for a thread with CapBnd %s", held, bnd)
	}
	if strings.Trim(bnd, "0") == "" || os.Geteuid() != 0 {
		t.Skip("dropping the bounding set needs CAP_SETPCAP (run as root)")
	}
	done := make(chan string)
	go func() {
		// The thread is not unlocked: it ends with this goroutine, so the
		// test process never runs anything else on it.
		runtime.LockOSThread()
		for c := 0; c < 64; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
				break
			}
		}
		if c, held := boundingCap(); held {
			done <- fmt.Sprintf("capability %d still reported after the drop", c)
			return
		}
		done <- ""
	}()
	if msg := <-done; msg != "" {
		t.Error(msg)
	}
	if _, held := boundingCap(); !held {
		t.Error("the test's own thread lost its bounding set: the drop was not confined to one thread")
	}
}
