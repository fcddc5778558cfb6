package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
