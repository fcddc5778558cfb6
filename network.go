package ctoharness

import "time"

// NetworkRecord is one line of network.jsonl: one connection attempt of Case
// or the verification command through the harness's egress forwarder.
type NetworkRecord struct {
	Seq     int       `json:"seq"`
	Time    time.Time `json:"time"`    // when the connection was accepted
	Command string    `json:"command"` // case | verification
	// Via is how the command asked: "direct" (connected to an allowed name's
	// in-namespace address or an allowed IP), "connect" (HTTP CONNECT through
	// the proxy), "http_proxy" (an absolute-form HTTP request to the proxy)
	// "syscall" (refused at connect, sendto, sendmsg or sendmmsg, before
	// any packet: a connection or a datagram to an address outside the
	// namespace, or to an allowed host's port no listener serves) or
	// "socket" (a socket(2) or socketpair(2) of a kind the sandbox refuses;
	// see Family).
	Via string `json:"via"`
	// Protocol is tcp, udp, icmp or other; records written before it
	// existed leave it out.
	Protocol   string `json:"protocol,omitempty"`
	Listener   string `json:"listener"`    // in-namespace address the command connected to
	Host       string `json:"host"`        // requested host (name or IP); "" when the request was unreadable
	Port       int    `json:"port"`        // requested port
	Resolved   string `json:"resolved"`    // the address the harness dialed; "" when it dialed nothing
	Decision   string `json:"decision"`    // allowed | denied | failed (allowed, but the endpoint could not be reached)
	Rule       string `json:"rule"`        // the allowlist entry that allowed it; "" when none did
	RuleSource string `json:"rule_source"` // where that entry came from (config, task, flag, ...)
	Reason     string `json:"reason"`      // why it was denied or failed; "" when allowed
	TLS        bool   `json:"tls"`
	SNI        string `json:"sni"` // server name of the TLS ClientHello; "" without TLS or SNI
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
	DurationMs int64  `json:"duration_ms"`
	Limit      string `json:"limit"` // "connections" or "bytes" when a limit ended it; "" otherwise
	// Family, SocketType and SocketProtocol are the arguments of a
	// socket(2) or socketpair(2) the sandbox's family allowlist refused
	// (via "socket"): "AF_VSOCK", "SOCK_DGRAM|SOCK_CLOEXEC", and the
	// protocol number (0, the family's default, is left out). Pid (in the
	// harness's pid namespace) and Comm name the caller. Other records
	// leave them out.
	Family         string `json:"family,omitempty"`
	SocketType     string `json:"socket_type,omitempty"`
	SocketProtocol int    `json:"socket_protocol,omitempty"`
	Pid            int    `json:"pid,omitempty"`
	Comm           string `json:"comm,omitempty"`
}

// NetworkRule is one allowlist entry as recorded.
type NetworkRule struct {
	Endpoint string `json:"endpoint"`
	Source   string `json:"source"`
}

// NetworkPolicy is the allowlist in force for each command.
type NetworkPolicy struct {
	Case         []NetworkRule `json:"case"`
	Verification []NetworkRule `json:"verification"`
	// Setup is the task's setup command's list (run in the verification
	// checkout before the verification).
	Setup []NetworkRule `json:"setup"`
	// Adversary is the adversary agent's list (its model meter), when the
	// task's adversary is an agent.
	Adversary []NetworkRule `json:"adversary,omitempty"`
}

// NetworkLimits are the egress limits of the run and which were reached.
type NetworkLimits struct {
	MaxConcurrent int      `json:"max_concurrent_connections"`
	MaxBytes      int64    `json:"max_total_bytes"`
	Exceeded      []string `json:"exceeded"`
}

// NetworkDenied is one denied attempt, as summarised in the report.
type NetworkDenied struct {
	Seq     int    `json:"seq"`
	Command string `json:"command"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Reason  string `json:"reason"`
}

// NetworkSummary is report.json's network section: the policy in force and
// what network.jsonl holds. It is present whenever an allowlist was given.
type NetworkSummary struct {
	Policy    NetworkPolicy   `json:"policy"`
	LogPath   string          `json:"log_path"`
	Attempts  int             `json:"attempts"`
	Allowed   int             `json:"allowed"`
	Denied    int             `json:"denied"`
	Failed    int             `json:"failed"`
	BytesUp   int64           `json:"bytes_up"`
	BytesDown int64           `json:"bytes_down"`
	DeniedLog []NetworkDenied `json:"denied_attempts"` // the first MaxDeniedInReport
	Limits    NetworkLimits   `json:"limits"`
	Errors    []string        `json:"errors"` // forwarder problems (a record that could not be written, a setup that failed)
}

// MaxDeniedInReport bounds NetworkSummary.DeniedLog; network.jsonl has all.
const MaxDeniedInReport = 20
