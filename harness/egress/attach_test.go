package egress

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeLauncher plays the launcher's side of the control socket: it sends
// the listeners for ports (the last one is the proxy's) and returns the
// harness's answer.
func fakeLauncher(t *testing.T, ctl *os.File, ls []net.Listener, h Handoff) byte {
	t.Helper()
	conn, err := net.FileConn(ctl)
	ctl.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var fds []int
	for _, l := range ls {
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fds = append(fds, int(f.Fd()))
	}
	msg, _ := json.Marshal(h)
	if _, _, err := conn.(*net.UnixConn).WriteMsgUnix(msg, unix.UnixRights(fds...), nil); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 1)
	if _, err := conn.Read(ack); err != nil {
		return 0
	}
	return ack[0]
}

func TestAttachTakesTheLaunchersListeners(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	l, _ := ParseList([]string{"127.0.0.1:" + port}, SourceFlag, nil)
	plan := NewPlan(CommandCase, l)
	log := &syncBuffer{}
	f := New(Options{Policy: Policy{Case: l}, Log: log})
	defer f.Close()

	// The listeners stand in for the namespace's: one on the allowed port
	// (here another loopback address, since the server holds 127.0.0.1) and
	// the proxy on any port.
	direct, err := net.Listen("tcp", "127.0.0.9:"+port)
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.9:%s: %v", port, err)
	}
	proxy, _ := net.Listen("tcp", "127.0.0.1:0")
	plan.ProxyPort = uint16(proxy.Addr().(*net.TCPAddr).Port)
	ctl, _, err := f.Attach(plan)
	if err != nil {
		t.Fatal(err)
	}
	if ack := fakeLauncher(t, ctl, []net.Listener{direct, proxy}, Handoff{Ports: []uint16{uint16(p)}, ProxyPort: plan.ProxyPort}); ack != AckOK {
		t.Fatalf("ack %q", ack)
	}
	direct.Close()
	proxy.Close()
	// 127.0.0.9 is not the listed address: denied and logged.
	resp, err := http.Get("http://127.0.0.9:" + port + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("a connection to an unlisted address got an answer")
	}
	f.Close()
	recs := log.records(t)
	if len(recs) != 1 || recs[0].Decision != Denied || recs[0].Host != "127.0.0.9" {
		t.Fatalf("records %+v", recs)
	}
	if setup, _ := f.Failures(); len(setup) != 0 {
		t.Fatalf("setup failures %v", setup)
	}
}

func TestAttachRefusesWrongListeners(t *testing.T) {
	l, _ := ParseList([]string{"a.test:443"}, SourceFlag, nil)
	plan := NewPlan(CommandCase, l)
	f := New(Options{Policy: Policy{Case: l}})
	ctl, _, err := f.Attach(plan)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := net.Listen("tcp", "127.0.0.1:0")
	defer other.Close()
	if ack := fakeLauncher(t, ctl, []net.Listener{other, other}, Handoff{Ports: []uint16{443}, ProxyPort: plan.ProxyPort}); ack != AckRefuse {
		t.Fatalf("ack %q for listeners on the wrong ports", ack)
	}
	f.Close()
	setup, _ := f.Failures()
	if len(setup) != 1 || !strings.Contains(setup[0], "listens on port") {
		t.Fatalf("setup failures %v", setup)
	}
}
