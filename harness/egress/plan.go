package egress

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
)

// nameBase is the first in-namespace address handed to an allowed name;
// later names get the following addresses. It lies in 127.0.0.0/8, which is
// local as soon as the loopback interface is up, and away from 127.0.0.1.
var nameBase = netip.MustParseAddr("127.77.0.2")

// defaultProxyPort is where the CONNECT proxy listens inside the namespace
// (the next free port when an allowed endpoint uses it).
const defaultProxyPort = 3128

// ProxyHost is the address of the in-namespace CONNECT proxy.
const ProxyHost = "127.0.0.1"

// Plan is how one command's allowlist is laid out inside its network
// namespace: every exact name gets a local address of its own (written to
// the namespace's /etc/hosts), every allowed port gets one listener on all
// local addresses, and one more port holds the CONNECT proxy.
type Plan struct {
	Command   Command
	List      List
	Names     map[string]netip.Addr // exact allowed name -> in-namespace address
	Addrs     []netip.Addr          // allowed IP literals that are not local by default, added to lo
	Ports     []uint16              // one direct listener per port, sorted
	ProxyPort uint16
}

// NewPlan lays out l for cmd.
func NewPlan(cmd Command, l List) Plan {
	p := Plan{Command: cmd, List: l, Names: map[string]netip.Addr{}, Ports: l.ports()}
	taken := map[netip.Addr]bool{}
	for _, r := range l {
		if a := r.Endpoint.Addr; a.IsValid() {
			taken[a] = true
			if !a.IsLoopback() && !slices.Contains(p.Addrs, a) {
				p.Addrs = append(p.Addrs, a)
			}
		}
	}
	next := nameBase
	for _, r := range l {
		e := r.Endpoint
		if e.IsIP() || e.Wildcard {
			continue
		}
		if _, ok := p.Names[e.Host]; ok {
			continue
		}
		for taken[next] {
			next = next.Next()
		}
		p.Names[e.Host] = next
		taken[next] = true
		next = next.Next()
	}
	p.ProxyPort = defaultProxyPort
	for slices.Contains(p.Ports, p.ProxyPort) {
		p.ProxyPort++
	}
	return p
}

// ConnectPorts are the TCP ports the command may connect to (Landlock rules):
// the direct listeners' and the proxy's.
func (p Plan) ConnectPorts() []uint16 {
	out := append([]uint16(nil), p.Ports...)
	return append(out, p.ProxyPort)
}

// standsForOutside reports whether the in-namespace address a is an
// allowed name's address or an allowed IP added to lo: it stands for a host
// outside, not for the namespace's own loopback. An allowed loopback IP
// (127.0.0.1:8080) is the host's only on its listed ports; on every other
// port it is the namespace's own.
func (p Plan) standsForOutside(a netip.Addr) bool {
	a = a.Unmap()
	if slices.Contains(p.Addrs, a) {
		return true
	}
	for _, n := range p.Names {
		if n == a {
			return true
		}
	}
	return false
}

// ProxyURL is the value of the proxy variables.
func (p Plan) ProxyURL() string { return fmt.Sprintf("http://%s:%d", ProxyHost, p.ProxyPort) }

// ProxyEnv are the variables that point proxy-aware programs at the CONNECT
// proxy. NO_PROXY is set empty so nothing bypasses it.
func (p Plan) ProxyEnv() []string {
	u := p.ProxyURL()
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+u)
	}
	for _, k := range []string{"http_proxy", "https_proxy", "all_proxy"} {
		env = append(env, k+"="+u)
	}
	return append(env, "NO_PROXY=", "no_proxy=")
}

// HostsDir is the directory of a run's workspace (runtime_workspace_root)
// where the harness writes each command's hosts file (hosts-<command>),
// which the sandbox binds read-only at /etc/hosts.
const HostsDir = "egress"

// Hosts is the /etc/hosts the command sees: localhost, then each allowed
// name at its in-namespace address.
func (p Plan) Hosts() []byte {
	var b bytes.Buffer
	b.WriteString("# written by cto-harness: allowed names and their in-namespace addresses\n")
	if _, ok := p.Names["localhost"]; !ok {
		b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	} else {
		b.WriteString("::1\tip6-localhost ip6-loopback\n")
	}
	for _, r := range p.List {
		if a, ok := p.Names[r.Endpoint.Host]; ok && !r.Endpoint.IsIP() && !r.Endpoint.Wildcard {
			line := fmt.Sprintf("%s\t%s\n", a, r.Endpoint.Host)
			if !bytes.Contains(b.Bytes(), []byte(line)) {
				b.WriteString(line)
			}
		}
	}
	return b.Bytes()
}

// target names what a direct connection to the in-namespace address dst
// asked for: an allowed name (by its address) or the address itself.
func (p Plan) target(dst netip.Addr) string {
	dst = dst.Unmap()
	for name, a := range p.Names {
		if a == dst {
			return name
		}
	}
	return dst.String()
}
