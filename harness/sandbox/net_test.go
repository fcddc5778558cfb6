package sandbox_test

import (
	"os"
	"path/filepath"
	"testing"

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
	o := launch(t, p, b.fixture, "/bin/sh", "-c", "touch "+marker)
	checkSetupFailure(t, o.code, o.stderr, "control socket")
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although the egress could not be set up")
	}
}

func TestEgressLayoutNeedsTheEmptyNamespace(t *testing.T) {
	p := sandbox.Policy{Network: &sandbox.Network{Ports: []uint16{443}, ProxyPort: 3128, HostsFile: "/tmp/hosts"}}
	if _, _, err := sandbox.Command("/bin/true", p, []string{"/bin/true"}); err == nil {
		t.Error("an egress layout without deny_network was accepted")
	}
	p.DenyNetwork = true
	p.Network.HostsFile = "hosts"
	if _, _, err := sandbox.Command("/bin/true", p, []string{"/bin/true"}); err == nil {
		t.Error("a relative hosts file was accepted")
	}
}
