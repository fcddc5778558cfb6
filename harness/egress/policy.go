// Package egress is the network egress path of Case and the verification
// command: a deny-by-default allowlist of HOST:PORT endpoints, and a
// forwarder that the harness runs outside the sandbox. The sandboxed command
// connects to listeners inside its own (otherwise empty) network namespace;
// the harness accepts those connections, decides each one against the
// allowlist, dials the real endpoint from the host network itself, relays the
// bytes, and records every attempt in network.jsonl.
//
// See docs/sandbox.md for the path a byte takes and what is inspected.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Command names which sandboxed command a list or a connection belongs to.
type Command string

// Commands with a network allowlist of their own.
const (
	CommandCase   Command = "case"
	CommandVerify Command = "verification"
	// CommandSetup is the task's setup command, run in the verification
	// checkout before the verification (installing dependencies, say).
	CommandSetup Command = "setup"
	// CommandAdversary is a task's adversary when it is a coding agent:
	// its list is its model meter's endpoint alone.
	CommandAdversary Command = "adversary"
)

// Rule sources: where an allowlist entry came from.
const (
	SourceConfig = "config" // the harness configuration
	SourceTask   = "task"   // the task spec, narrowed by the config and the flags
	SourceFlag   = "flag"   // run --allow-net / --verify-allow-net
)

// ErrInvalid marks an endpoint or list that cannot be used.
var ErrInvalid = errors.New("invalid network endpoint")

// Endpoint is one allowed HOST:PORT. Host is a lower-case DNS name, a
// "*.suffix" wildcard, or an IP literal (then Addr is set).
type Endpoint struct {
	Host     string
	Port     uint16
	Wildcard bool
	Addr     netip.Addr
}

// IsIP reports whether the endpoint names an address rather than a name.
func (e Endpoint) IsIP() bool { return e.Addr.IsValid() }

// String is the canonical HOST:PORT form ([v6]:port for IPv6).
func (e Endpoint) String() string { return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))) }

// ParseEndpoint parses HOST:PORT. A name may start with "*." (any name below
// the suffix, which must have at least two labels); a bare "*", a missing or
// zero port and anything that is not a name or an IP are refused.
func ParseEndpoint(s string) (Endpoint, error) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(s))
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w %q: want HOST:PORT (for example api.example.com:443 or 127.0.0.1:8080): %v", ErrInvalid, s, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return Endpoint{}, fmt.Errorf("%w %q: port %q must be a number from 1 to 65535", ErrInvalid, s, port)
	}
	e := Endpoint{Port: uint16(p)}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Endpoint{}, fmt.Errorf("%w %q: an IPv6 zone is not allowed", ErrInvalid, s)
		}
		if a.IsUnspecified() || a.IsMulticast() {
			return Endpoint{}, fmt.Errorf("%w %q: %s is not a unicast address", ErrInvalid, s, a)
		}
		e.Addr = a.Unmap()
		e.Host = e.Addr.String()
		return e, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name := host
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if strings.Count(rest, ".") < 1 {
			return Endpoint{}, fmt.Errorf("%w %q: a wildcard must keep at least two labels (*.example.com), not %q", ErrInvalid, s, host)
		}
		e.Wildcard = true
		name = rest
	}
	if host == "*" || host == "" {
		return Endpoint{}, fmt.Errorf("%w %q: allowing every host is not possible; name the hosts", ErrInvalid, s)
	}
	if err := checkName(name); err != nil {
		return Endpoint{}, fmt.Errorf("%w %q: %v", ErrInvalid, s, err)
	}
	e.Host = host
	return e, nil
}

func checkName(name string) error {
	if len(name) > 253 {
		return errors.New("the name is longer than 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q is empty or longer than 63 characters", label)
		}
		for i, c := range label {
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(label)-1 || c == '_'
			if !ok {
				return fmt.Errorf("%q is not a host name (character %q)", name, c)
			}
		}
	}
	return nil
}

// Matches reports whether a connection to host:port is covered. host is
// compared case-insensitively; a wildcard covers names strictly below its
// suffix, never the suffix itself; an IP endpoint covers only that address.
func (e Endpoint) Matches(host string, port uint16) bool {
	if port != e.Port {
		return false
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return e.IsIP() && a.Unmap() == e.Addr
	}
	if e.IsIP() {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if e.Wildcard {
		suffix := strings.TrimPrefix(e.Host, "*")
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return host == e.Host
}

// covers reports whether e allows everything o allows.
func (e Endpoint) covers(o Endpoint) bool {
	if o.Wildcard {
		return e.Wildcard && e.Port == o.Port && (e.Host == o.Host || e.Matches(strings.TrimPrefix(o.Host, "*."), o.Port))
	}
	return e.Matches(o.Host, o.Port)
}

// Rule is one allowlist entry and where it came from.
type Rule struct {
	Endpoint Endpoint
	Source   string
}

// List is one command's allowlist. The zero List allows nothing.
type List []Rule

// ParseList parses entries that all come from source. origin, when it names
// an entry (as written), overrides source for that entry.
func ParseList(entries []string, source string, origin map[string]string) (List, error) {
	var l List
	for _, s := range entries {
		e, err := ParseEndpoint(s)
		if err != nil {
			return nil, err
		}
		src := source
		if o := origin[s]; o != "" {
			src = o
		}
		l = l.add(Rule{Endpoint: e, Source: src})
	}
	return l, nil
}

// add appends r unless the same endpoint is already listed.
func (l List) add(r Rule) List {
	for _, have := range l {
		if have.Endpoint.String() == r.Endpoint.String() {
			return l
		}
	}
	return append(l, r)
}

// Merge is l followed by the rules of o that l does not have.
func (l List) Merge(o List) List {
	out := append(List(nil), l...)
	for _, r := range o {
		out = out.add(r)
	}
	return out
}

// Narrow keeps the task's entries that ceiling covers; the others are
// returned as refused, so the caller can say which ones.
func Narrow(task, ceiling List) (kept List, refused []string) {
	for _, r := range task {
		ok := false
		for _, c := range ceiling {
			if c.Endpoint.covers(r.Endpoint) {
				ok = true
				break
			}
		}
		if ok {
			kept = kept.add(r)
		} else {
			refused = append(refused, r.Endpoint.String())
		}
	}
	return kept, refused
}

// Match returns the first rule that covers host:port.
func (l List) Match(host string, port uint16) (Rule, bool) {
	for _, r := range l {
		if r.Endpoint.Matches(host, port) {
			return r, true
		}
	}
	return Rule{}, false
}

// HasHost reports whether some entry allows host, on whatever port: what a
// check that sees only a host name (a URL without a port, say) can know.
func (l List) HasHost(host string) bool {
	for _, r := range l {
		if r.Endpoint.Matches(host, r.Endpoint.Port) {
			return true
		}
	}
	return false
}

// exact returns the rule for exactly this non-wildcard endpoint: the rules
// that give an endpoint its own in-namespace address and listener.
func (l List) exact(host string, port uint16) (Rule, bool) {
	for _, r := range l {
		if !r.Endpoint.Wildcard && r.Endpoint.Matches(host, port) {
			return r, true
		}
	}
	return Rule{}, false
}

// Strings lists the endpoints in order.
func (l List) Strings() []string {
	out := make([]string, len(l))
	for i, r := range l {
		out[i] = r.Endpoint.String()
	}
	return out
}

// Policy is the allowlist of each command. A command with an empty list gets
// no network at all (the namespace stays empty).
type Policy struct {
	Case   List
	Verify List
	Setup  List
	// Adversary is the adversary agent's list: the harness's meter.
	Adversary List
}

// For returns cmd's list.
func (p Policy) For(cmd Command) List {
	switch cmd {
	case CommandVerify:
		return p.Verify
	case CommandSetup:
		return p.Setup
	case CommandAdversary:
		return p.Adversary
	}
	return p.Case
}

// Empty reports whether no command may reach anything.
func (p Policy) Empty() bool {
	return len(p.Case) == 0 && len(p.Verify) == 0 && len(p.Setup) == 0 && len(p.Adversary) == 0
}

// Commands lists every command that may have an allowlist.
func Commands() []Command {
	return []Command{CommandCase, CommandVerify, CommandSetup, CommandAdversary}
}

// ports lists the distinct ports of l's exact endpoints, sorted.
func (l List) ports() []uint16 {
	seen := map[uint16]bool{}
	var out []uint16
	for _, r := range l {
		if !r.Endpoint.Wildcard && !seen[r.Endpoint.Port] {
			seen[r.Endpoint.Port] = true
			out = append(out, r.Endpoint.Port)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
