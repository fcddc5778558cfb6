package notify

import (
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// send plays the launcher: it writes msg on the watch control socket and
// returns the harness's answer.
func send(t *testing.T, ctl *os.File, msg any) byte {
	t.Helper()
	conn, err := net.FileConn(ctl)
	ctl.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b, _ := json.Marshal(msg)
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 1)
	if _, err := conn.Read(ack); err != nil {
		t.Fatal(err)
	}
	return ack[0]
}

func answerAll(c *Call) { c.Answer(0) }

// A launcher that names something other than a seccomp listener is
// refused, and the watch says why: the launcher stops instead of starting
// a command nobody watches.
func TestAttachRefusesADescriptorThatIsNotSeccomp(t *testing.T) {
	ctl, w, err := Attach(Options{Connect: answerAll})
	if err != nil {
		t.Fatal(err)
	}
	r, pw, _ := os.Pipe()
	defer r.Close()
	defer pw.Close()
	if ack := send(t, ctl, Msg{Watch: true, FD: int(r.Fd()), Connect: true}); ack != ackRefuse {
		t.Fatalf("a pipe as the listener: ack %q", ack)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "not a seccomp listener") {
		t.Fatalf("watch error %v", err)
	}
	if w.Started() {
		t.Error("a refused listener counts as started")
	}
}

// A filter that serves other watches than the harness has handlers for is
// refused before its descriptor is even looked at: an exec watch the
// launcher left out would count nothing.
func TestAttachRefusesAnotherSetOfWatches(t *testing.T) {
	for _, c := range []struct {
		o   Options
		msg Msg
	}{
		{Options{Exec: answerAll, Connect: answerAll}, Msg{Watch: true, FD: 0, Connect: true}},
		{Options{Connect: answerAll}, Msg{Watch: true, FD: 0, Exec: true, Connect: true}},
		{Options{Exec: answerAll}, Msg{Watch: true, FD: 0, Connect: true}},
	} {
		ctl, w, err := Attach(c.o)
		if err != nil {
			t.Fatal(err)
		}
		if ack := send(t, ctl, c.msg); ack != ackRefuse {
			t.Errorf("%+v: ack %q", c.msg, ack)
		}
		if err := w.Close(); err == nil || !strings.Contains(err.Error(), "its filter serves") {
			t.Errorf("%+v: watch error %v", c.msg, err)
		}
	}
}

// A watch that breaks down while the command runs is a failure, not a
// quiet end: the record would have gaps from then on.
func TestBrokenWatchIsAFailure(t *testing.T) {
	w := &Watch{o: Options{Connect: answerAll}}
	// A readable pipe stands in for the listener: receiving from it fails.
	r, pw, _ := os.Pipe()
	defer r.Close()
	defer pw.Close()
	pw.Write([]byte("x"))
	stopR, stopW, _ := os.Pipe()
	defer stopR.Close()
	defer stopW.Close()
	w.loop(int(r.Fd()), int(stopR.Fd()))
	if w.failure == nil || !strings.Contains(w.failure.Error(), "SECCOMP_IOCTL_NOTIF_RECV") {
		t.Fatalf("failure %v", w.failure)
	}
}

// Each call goes to the watch of its system call; a call of a kind no
// watch serves, of a foreign ABI, or left unanswered by its handler is
// answered (refused) by the dispatcher, and the watch is marked failed.
func TestDispatch(t *testing.T) {
	arch, err := AuditArch()
	if err != nil {
		t.Skip(err)
	}
	var got []string
	o := Options{
		Exec:    func(c *Call) { got = append(got, "exec"); c.Answer(0) },
		Connect: func(c *Call) { got = append(got, "connect"); c.Answer(unix.EACCES) },
	}
	// The pipe stands in for the listener: answers fail, but are given.
	r, pw, _ := os.Pipe()
	defer r.Close()
	defer pw.Close()
	call := func(w *Watch, nr int32, a uint32) *Call {
		c := &Call{Notif: Notif{Nr: nr, Arch: a}, fd: int(r.Fd())}
		w.dispatch(c)
		return c
	}
	w := &Watch{o: o, arch: arch}
	for _, nr := range []int32{unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_CONNECT, unix.SYS_SENDTO, unix.SYS_SENDMSG, unix.SYS_SENDMMSG} {
		if c := call(w, nr, arch); !c.answered {
			t.Errorf("syscall %d left unanswered", nr)
		}
	}
	if want := "exec exec connect connect connect connect"; strings.Join(got, " ") != want {
		t.Errorf("handled %q, want %q", got, want)
	}
	if w.failure != nil {
		t.Fatalf("failure %v", w.failure)
	}
	for name, c := range map[string]struct {
		o    Options
		nr   int32
		arch uint32
	}{
		"unknown call":   {o, unix.SYS_OPENAT, arch},
		"foreign ABI":    {o, unix.SYS_EXECVE, arch ^ 1},
		"no exec watch":  {Options{Connect: o.Connect}, unix.SYS_EXECVE, arch},
		"unanswered":     {Options{Exec: func(*Call) {}}, unix.SYS_EXECVE, arch},
		"answered twice": {Options{Exec: func(c *Call) { c.Answer(0); c.Answer(0) }}, unix.SYS_EXECVE, arch},
	} {
		w := &Watch{o: c.o, arch: arch}
		got = nil
		if cl := call(w, c.nr, c.arch); !cl.answered {
			t.Errorf("%s: left unanswered", name)
		}
		if name == "answered twice" {
			if w.failure != nil {
				t.Errorf("%s: failure %v", name, w.failure)
			}
			continue
		}
		if w.failure == nil {
			t.Errorf("%s: no failure", name)
		}
		if len(got) != 0 {
			t.Errorf("%s: reached a handler: %v", name, got)
		}
	}
}

func TestThreadGroup(t *testing.T) {
	if got := threadGroup(unix.Gettid()); got != os.Getpid() {
		t.Errorf("thread group of this thread: %d, want %d", got, os.Getpid())
	}
	if got := threadGroup(-1); got != -1 {
		t.Errorf("unknown thread: %d", got)
	}
}
