package sandbox_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// An egress layout without the harness's control socket (nothing on fd 3)
// stops the launcher before the command runs: the command never gets a
// network that nobody decides on.
func TestEgressWithoutControlSocketFailsClosed(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	hosts := filepath.Join(b.root, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(b.fixture, "ran")
	p := b.policy()
	p.Network = &sandbox.Network{Ports: []uint16{8080}, ProxyPort: 3128, HostsFile: hosts}
	// /dev/null where the sockets belong keeps the policy at its place.
	o := launchWith(t, p, b.fixture, opts{extra: devNulls(t, 2)}, "/bin/sh", "-c", "touch "+marker)
	checkSetupFailure(t, o.code, o.stderr, "is not the harness's control socket")
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although the egress could not be set up")
	}
}

func TestEgressLayoutNeedsTheEmptyNamespace(t *testing.T) {
	p := sandbox.Policy{Network: &sandbox.Network{Ports: []uint16{443}, ProxyPort: 3128, HostsFile: "/tmp/hosts"}}
	if _, _, _, err := sandbox.Command("/bin/true", p, []string{"/bin/true"}); err == nil {
		t.Error("an egress layout without deny_network was accepted")
	}
	p.DenyNetwork = true
	p.Network.HostsFile = "hosts"
	if _, _, _, err := sandbox.Command("/bin/true", p, []string{"/bin/true"}); err == nil {
		t.Error("a relative hosts file was accepted")
	}
}

// The trial launch builds the layout and hands the listeners to a real
// forwarder; a forwarder that expects other ports refuses them, and the
// trial fails with the launcher's own message.
func TestTryNetwork(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	l, err := egress.ParseList([]string{"api.example.com:443", "127.0.0.1:8080"}, egress.SourceFlag, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := egress.NewPlan(egress.CommandCase, l)
	hosts := filepath.Join(b.root, "hosts")
	if err := os.WriteFile(hosts, plan.Hosts(), 0o644); err != nil {
		t.Fatal(err)
	}
	f := egress.New(egress.Options{Policy: egress.Policy{Case: l}})
	defer f.Close()
	p := b.policy()
	p.Network = &sandbox.Network{Ports: plan.Ports, ProxyPort: plan.ProxyPort, HostsFile: hosts}
	ctl, connects, err := f.Attach(plan)
	if err != nil {
		t.Fatal(err)
	}
	watchCtl, w, err := notify.Attach(notify.Options{Connect: connects})
	if err != nil {
		t.Fatal(err)
	}
	if err := sandbox.TryNetwork(context.Background(), self(t), p, ctl, watchCtl); err != nil {
		t.Fatalf("trial: %v", err)
	}
	if err := w.Close(); err != nil || !w.Started() {
		t.Fatalf("the trial's watch: started %t, %v", w.Started(), err)
	}
	// The launcher builds a proxy on another port than the forwarder expects.
	p.Network = &sandbox.Network{Ports: plan.Ports, ProxyPort: plan.ProxyPort + 1, HostsFile: hosts}
	ctl, connects, err = f.Attach(plan)
	if err != nil {
		t.Fatal(err)
	}
	watchCtl, w, err = notify.Attach(notify.Options{Connect: connects})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	err = sandbox.TryNetwork(context.Background(), self(t), p, ctl, watchCtl)
	if err == nil || !strings.Contains(err.Error(), "did not take the network listeners") {
		t.Fatalf("trial with mismatched ports: %v", err)
	}
	f.Close()
	if setup, _ := f.Failures(); len(setup) != 1 {
		t.Errorf("forwarder setup failures %v", setup)
	}
}

// The command's own loopback works without any egress: lo is up, a server
// binds 127.0.0.1 and ::1 on an ephemeral or a fixed port and answers its
// own client (what httptest, express or a test database need). Nothing
// outside the namespace is reachable all the same (TestNetworkIsDenied).
func TestLoopbackWithoutEgress(t *testing.T) {
	f := requireSandbox(t)
	b := newBox(t)
	if r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "httptest").result(t); !r.OK {
		t.Errorf("a loopback HTTP server and client: %+v", r)
	}
	if r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "bind", "18080").result(t); !r.OK {
		t.Errorf("bind 0.0.0.0:18080 (Landlock ABI %d): %+v", f.LandlockABI, r)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python bind check is skipped")
	}
	script := `import socket
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam); s.bind((addr, 0)); s.listen(); c = socket.socket(fam); c.connect(s.getsockname()[:2]); print("ok", s.getsockname()[1])
`
	o := launch(t, b.policy(), b.fixture, py, "-c", script)
	if o.code != 0 || strings.Count(o.stdout, "ok ") != 2 {
		t.Errorf("python3 bind((\"127.0.0.1\", 0)): exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}

// With an egress layout the loopback still works and is not recorded:
// network.jsonl holds only what goes out. The listeners' ports cannot be
// bound (Landlock), a connection to a listener's port that no allowed
// endpoint serves is refused by the forwarder and recorded, and an
// address outside the namespace is refused at the system call and
// recorded.
func TestLoopbackWithEgress(t *testing.T) {
	f := requireSandbox(t)
	if f.LandlockABI < 4 {
		t.Skipf("Landlock ABI %d has no TCP rules: the listeners' ports are not protected from bind", f.LandlockABI)
	}
	b := newBox(t)
	l, err := egress.ParseList([]string{"api.example.com:443"}, egress.SourceFlag, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := egress.NewPlan(egress.CommandCase, l)
	hosts := filepath.Join(b.root, "hosts")
	if err := os.WriteFile(hosts, plan.Hosts(), 0o644); err != nil {
		t.Fatal(err)
	}
	var log syncLog
	fw := egress.New(egress.Options{Policy: egress.Policy{Case: l}, Log: &log,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("the test has no outside network")
		}})
	defer fw.Close()
	p := b.policy()
	p.Network = &sandbox.Network{Ports: plan.Ports, ProxyPort: plan.ProxyPort, HostsFile: hosts}
	run := func(argv ...string) result {
		t.Helper()
		ctl, connects, err := fw.Attach(plan)
		if err != nil {
			t.Fatal(err)
		}
		watchCtl, w, err := notify.Attach(notify.Options{Connect: connects})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		return launchWith(t, p, b.fixture, opts{extra: []*os.File{ctl, watchCtl}}, argv...).result(t)
	}
	if r := run(self(t), helperCmd, "httptest"); !r.OK {
		t.Errorf("a loopback HTTP server and client next to the egress listeners: %+v", r)
	}
	if r := run(self(t), helperCmd, "bind", "18080"); !r.OK {
		t.Errorf("bind 0.0.0.0:18080: %+v", r)
	}
	for _, port := range p.Network.ConnectPorts() {
		if r := run(self(t), helperCmd, "bind", strconv.Itoa(int(port))); r.OK || r.Errno != "EACCES" {
			t.Errorf("bind on the egress listener port %d: %+v, want EACCES from Landlock", port, r)
		}
	}
	if r := run(self(t), helperCmd, "connect", "192.0.2.1:18080"); r.OK || r.Errno != "ENETUNREACH" {
		t.Errorf("connect to an outside address: %+v, want ENETUNREACH", r)
	}
	// An allowed name's address stands for the outside host: its other
	// ports are refused, even where the command's own server listens.
	named := net.JoinHostPort(plan.Names["api.example.com"].String(), "18081")
	if r := run(self(t), helperCmd, "connect", named); r.OK || r.Errno != "EACCES" {
		t.Errorf("connect to %s (api.example.com on a port not allowed): %+v, want EACCES", named, r)
	}
	// 127.0.0.1 is no allowed endpoint: the listener on 443 takes the
	// connection and the forwarder closes it without going anywhere.
	_ = run(self(t), helperCmd, "connect-read", "127.0.0.1:443")
	for deadline := time.Now().Add(5 * time.Second); len(log.lines()) < 3 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	fw.Close()
	recs := log.lines()
	var outside, listener, name int
	for _, rec := range recs {
		switch {
		case strings.Contains(rec, `"port":18081`) && strings.Contains(rec, "api.example.com"):
			name++
		case strings.Contains(rec, `"port":18080`) && strings.Contains(rec, "192.0.2.1"):
			outside++
		case strings.Contains(rec, `"port":443`) && strings.Contains(rec, `"127.0.0.1"`):
			listener++
		}
		if strings.Contains(rec, `"decision":"allowed"`) {
			t.Errorf("an allowed connection although nothing may go out: %s", rec)
		}
	}
	if outside != 1 || listener != 1 || name != 1 || len(recs) != 3 {
		t.Errorf("network.jsonl should hold the outside attempt and the listener's refusal, nothing from the loopback:\n%s", strings.Join(recs, "\n"))
	}
}

// syncLog collects network.jsonl lines written from the forwarder's
// goroutines.
type syncLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncLog) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.buf.String(), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
