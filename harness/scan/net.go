package scan

import (
	"fmt"
	"net"
	"strings"
)

// netTools reach other hosts.
var netTools = map[string]bool{
	"curl": true, "wget": true, "nc": true, "ncat": true, "netcat": true, "telnet": true, "ssh": true, "scp": true,
	"sftp": true, "rsync": true, "socat": true, "ftp": true, "lftp": true, "aria2c": true, "http": true, "https": true,
	"xh": true, "fetch": true,
}

var netSpecs = map[string]optSpec{
	"curl": {short: "AbcCdDeEFHKmoPQrTuUwxXyYz", long: []string{
		"--data", "--data-raw", "--data-binary", "--data-urlencode", "--data-ascii", "--header", "--output", "--request",
		"--user", "--user-agent", "--referer", "--cookie", "--cookie-jar", "--form", "--form-string", "--max-time",
		"--connect-timeout", "--retry", "--retry-delay", "--retry-max-time", "--proxy", "--cacert", "--capath", "--cert",
		"--key", "--config", "--upload-file", "--write-out", "--range", "--resolve", "--connect-to", "--url", "--output-dir",
		"--limit-rate", "--dump-header", "--trace", "--trace-ascii", "--interface", "--json", "--oauth2-bearer", "--proxy-user",
		"--max-filesize", "--continue-at", "--expect100-timeout", "--unix-socket", "--abstract-unix-socket",
		"--noproxy", "--preproxy", "--proxy-header", "--proxy1.0", "--socks4", "--socks4a", "--socks5", "--socks5-hostname",
		"--cert-type", "--key-type", "--pass", "--ciphers", "--tls13-ciphers", "--curves", "--pinnedpubkey", "--crlfile",
		"--dns-servers", "--dns-interface", "--dns-ipv4-addr", "--dns-ipv6-addr", "--local-port", "--max-redirs",
		"--netrc-file", "--variable", "--url-query", "--proto", "--proto-redir", "--proto-default", "--request-target",
		"--stderr", "--tls-max", "--mail-from", "--mail-rcpt", "--mail-auth", "--aws-sigv4", "--hsts", "--alt-svc",
		"--etag-save", "--etag-compare", "--speed-limit", "--speed-time", "--time-cond", "--keepalive-time",
		"--parallel-max", "--rate", "--quote", "--ftp-port", "--telnet-option", "--create-file-mode", "--ip-tos",
		"--proxy-cacert", "--proxy-capath", "--proxy-cert", "--proxy-cert-type", "--proxy-key", "--proxy-key-type",
		"--proxy-pass", "--proxy-ciphers", "--proxy-pinnedpubkey", "--proxy-tlsuser", "--proxy-tlspassword",
		"--tlsuser", "--tlspassword", "--tlsauthtype", "--haproxy-clientip", "--service-name", "--sasl-authzid"}},
	"wget": {short: "OoaPeUtTwiBQlDAR", long: []string{
		"--output-document", "--output-file", "--append-output", "--directory-prefix", "--execute", "--user-agent", "--tries",
		"--timeout", "--wait", "--input-file", "--base", "--quota", "--level", "--domains", "--accept", "--reject", "--header",
		"--post-data", "--post-file", "--user", "--password", "--http-user", "--http-password", "--load-cookies", "--save-cookies"}},
	"nc":     {short: "pswiqxXIOTVeGgMmW"},
	"ncat":   {short: "pswiqxXIOTVeGgMmcd", long: []string{"--source-port", "--source", "--wait", "--idle-timeout", "--proxy", "--proxy-type", "--exec", "--sh-exec", "--lua-exec", "--output", "--hex-dump", "--delay"}},
	"netcat": {short: "pswiqxXIOTVeGgMmW"},
	"telnet": {short: "beEklLnX"},
	"ftp":    {short: "Pso"},
	"ssh":    {short: "BbcDEeFIiJLlmOopQRSWw"},
	"scp":    {short: "cFiJloPSX"},
	"sftp":   {short: "BbcDFiJloPRSs"},
	"rsync":  {short: "eBfMT", long: []string{"--rsh", "--rsync-path", "--exclude", "--include", "--filter", "--files-from", "--temp-dir", "--partial-dir", "--log-file", "--password-file", "--port", "--timeout", "--contimeout", "--chmod", "--backup-dir", "--suffix", "--compare-dest", "--copy-dest", "--link-dest"}},
}

func isListener(name string, ops []arg) bool {
	switch name {
	case "nc", "ncat", "netcat":
		_, vals := parseOpts(ops, netSpecs[name])
		return len(vals["-l"]) > 0 || len(vals["--listen"]) > 0
	}
	return false
}

// hostRef is a host a command reaches; known is false when it is computed at run time.
type hostRef struct {
	host  string
	known bool
}

func hostOf(s string) hostRef {
	h := s
	if i := strings.Index(h, "://"); i >= 0 {
		if strings.EqualFold(h[:i], "file") {
			return hostRef{host: "localhost", known: true}
		}
		h = h[i+3:]
	}
	if i := strings.IndexAny(h, "/?#"); i >= 0 {
		h = h[:i]
	}
	if i := strings.LastIndex(h, "@"); i >= 0 {
		h = h[i+1:]
	}
	if strings.HasPrefix(h, "[") {
		if i := strings.Index(h, "]"); i >= 0 {
			h = h[1:i]
		}
	} else if i := strings.LastIndex(h, ":"); i >= 0 && strings.Count(h, ":") == 1 {
		h = h[:i]
	}
	if h == "" || strings.Contains(h, unknownMark) || strings.ContainsAny(h, "\x02*") {
		return hostRef{host: h, known: false}
	}
	return hostRef{host: h, known: true}
}

func isLoopback(host string) bool {
	h := strings.ToLower(strings.Trim(host, "[]"))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// devNetHost recognises bash's /dev/tcp/HOST/PORT and /dev/udp/HOST/PORT.
func devNetHost(s string) (hostRef, bool) {
	for _, p := range []string{"/dev/tcp/", "/dev/udp/"} {
		if i := strings.Index(s, p); i >= 0 {
			rest := s[i+len(p):]
			h, _, _ := strings.Cut(rest, "/")
			return hostRef{host: h, known: h != "" && !strings.Contains(h, unknownMark)}, true
		}
	}
	return hostRef{}, false
}

func (s *scanner) checkHost(u *unit, line int, cmd, what string, h hostRef) {
	switch {
	case !h.known:
		s.add(u, line, PatNetwork, cmd, fmt.Sprintf("%s reaches a host that is only known at run time", what))
	case s.allowed != nil && s.allowed(h.host):
		// The enforced egress decides on the port and records the attempt.
	case !isLoopback(h.host):
		s.add(u, line, PatNetwork, cmd, fmt.Sprintf("%s reaches %s, which is not a loopback address", what, h.host))
	}
}

// looksLikeURL is for tools whose operands mix URLs and other words (httpie).
func looksLikeURL(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	h := hostOf(s)
	return h.known && (strings.Contains(h.host, ".") || h.host == "localhost" || strings.Contains(h.host, ":"))
}

// remoteSpec recognises scp/rsync/git remote operands: scheme://, user@host:path, host.name:path.
func remoteSpec(s string) (hostRef, bool) {
	if i := strings.Index(s, "://"); i >= 0 {
		if strings.EqualFold(s[:i], "file") {
			return hostRef{}, false
		}
		return hostOf(s), true
	}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") {
		return hostRef{}, false
	}
	i := strings.Index(s, ":")
	if i <= 0 {
		return hostRef{}, false
	}
	hostPart := s[:i]
	if strings.Contains(hostPart, "/") {
		return hostRef{}, false
	}
	if strings.Contains(hostPart, "@") || strings.Contains(hostPart, ".") || strings.HasPrefix(s[i:], "::") ||
		strings.Contains(hostPart, unknownMark) {
		return hostOf(hostPart), true
	}
	return hostRef{}, false
}

func (s *scanner) network(u *unit, line int, cmd, name string, ops []arg) {
	spec := netSpecs[name]
	pos, vals := parseOpts(ops, spec)
	var hosts []hostRef
	switch name {
	case "curl":
		for _, p := range append(pos, vals["--url"]...) {
			hosts = append(hosts, hostOf(p.s))
		}
	case "wget":
		for _, p := range pos {
			hosts = append(hosts, hostOf(p.s))
		}
	case "nc", "ncat", "netcat", "telnet", "ftp", "ssh":
		if isListener(name, ops) {
			return
		}
		if len(pos) > 0 {
			hosts = append(hosts, hostOf(pos[0].s))
		}
		for _, j := range vals["-J"] {
			hosts = append(hosts, hostOf(j.s))
		}
	case "scp", "rsync", "sftp":
		for _, p := range pos {
			if h, ok := remoteSpec(p.s); ok {
				hosts = append(hosts, h)
			} else if name == "sftp" {
				hosts = append(hosts, hostOf(p.s))
			}
		}
	case "socat":
		for _, p := range pos {
			typ, rest, ok := strings.Cut(p.s, ":")
			if !ok {
				continue
			}
			switch strings.ToUpper(typ) {
			case "TCP", "TCP4", "TCP6", "UDP", "UDP4", "UDP6", "OPENSSL", "SSL", "TCP-CONNECT", "SCTP", "SOCKS4", "SOCKS4A", "SOCKS5", "PROXY":
				h, _, _ := strings.Cut(rest, ":")
				h, _, _ = strings.Cut(h, ",")
				hosts = append(hosts, hostRef{host: h, known: h != "" && !strings.Contains(h, unknownMark)})
			}
		}
	default: // aria2c, httpie, xh, lftp, fetch
		for _, p := range pos {
			if looksLikeURL(p.s) || strings.Contains(p.s, unknownMark) {
				hosts = append(hosts, hostOf(p.s))
			}
		}
	}
	for _, h := range hosts {
		s.checkHost(u, line, cmd, name, h)
	}
}

// gitSub skips git's global options and returns the subcommand and its operands.
func gitSub(ops []arg) (string, []arg) {
	for i := 0; i < len(ops); i++ {
		a := ops[i].s
		switch {
		case a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" || a == "--exec-path":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a, ops[i+1:]
		}
	}
	return "", nil
}

func (s *scanner) git(u *unit, line int, cmd string, ops []arg, e *env) {
	sub, rest := gitSub(ops)
	switch sub {
	case "remote":
		if len(rest) > 0 && (rest[0].s == "add" || rest[0].s == "set-url") {
			pos, _ := parseOpts(rest[1:], optSpec{short: "tm"})
			if len(pos) >= 2 {
				e.remotes[pos[0].s] = pos[1].s
			}
		}
	case "push", "fetch", "pull", "clone", "ls-remote", "archive", "submodule", "request-pull":
		pos, vals := parseOpts(rest, optSpec{short: "obj", long: []string{"--upload-pack", "--receive-pack", "--exec", "--repo", "--origin", "--branch", "--depth", "--reference", "--separate-git-dir", "--template", "--jobs", "--filter", "--push-option", "--shallow-since", "--shallow-exclude"}})
		pos = append(pos, vals["--remote"]...)
		pos = append(pos, vals["--repo"]...)
		for _, p := range pos {
			if url, ok := e.remotes[p.s]; ok {
				if h, ok := remoteSpec(url); ok {
					s.checkHost(u, line, cmd, "git "+sub, h)
				}
				continue
			}
			if h, ok := remoteSpec(p.s); ok {
				s.checkHost(u, line, cmd, "git "+sub, h)
			}
		}
	}
}
