package validators

import (
	"bufio"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// netServers are the endpoints of the egress rows: a plain and a TLS HTTP
// server on the host's loopback, which also answer a Go module proxy's
// version list.
type netServers struct {
	plain, tls *httptest.Server
}

func usesNet(row fixtures.Row) bool {
	all := row.Setup.Scenario + row.Setup.Verification + row.Setup.SetupCommand + strings.Join(row.Setup.AllowNet, " ") +
		strings.Join(row.Setup.VerifyAllowNet, " ") + strings.Join(row.Setup.SetupAllowNet, " ")
	return strings.Contains(all, "{http_port}") || strings.Contains(all, "{https_port}")
}

func newNetServers(row fixtures.Row) *netServers {
	if !usesNet(row) {
		return nil
	}
	// Enough of the Go module proxy protocol for `go list -m -versions`
	// of example.com/m, which has one version.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case strings.HasSuffix(p, "/@v/list"):
			io.WriteString(w, "v1.0.0\n")
		case strings.HasSuffix(p, "/@latest"), strings.HasSuffix(p, "/@v/v1.0.0.info"):
			io.WriteString(w, `{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}`)
		case strings.HasSuffix(p, "/@v/v1.0.0.mod"):
			io.WriteString(w, "module example.com/m\n")
		case strings.Contains(p, "/@"):
			http.NotFound(w, r)
		default:
			io.WriteString(w, "hello from the host\n")
		}
	})
	// The TLS server's handshake errors (the SNI row's refused ClientHello)
	// are expected; they must not reach the validator's stderr.
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	return &netServers{plain: httptest.NewServer(h), tls: tlsSrv}
}

func (n *netServers) close() {
	if n != nil {
		n.plain.Close()
		n.tls.Close()
	}
}

// replacer fills the {http_port} and {https_port} placeholders.
func (n *netServers) replacer() *strings.Replacer {
	if n == nil {
		return strings.NewReplacer()
	}
	port := func(s *httptest.Server) string { return strconv.Itoa(s.Listener.Addr().(*net.TCPAddr).Port) }
	return strings.NewReplacer("{http_port}", port(n.plain), "{https_port}", port(n.tls))
}

func (n *netServers) fill(list []string) []string {
	var out []string
	r := n.replacer()
	for _, s := range list {
		out = append(out, r.Replace(s))
	}
	return out
}

// check holds the run to the row's network expectations.
func (n *netServers) check(runDir string, row fixtures.Row, res *RowResult) {
	if len(row.ExpectNet) == 0 {
		return
	}
	r := n.replacer()
	attempts := map[string]bool{}
	if f, err := os.Open(filepath.Join(runDir, evidence.CaseEvents)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e struct {
				Attempt string `json:"attempt"`
				Target  string `json:"target"`
				Denied  bool   `json:"denied"`
			}
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Attempt != "" {
				attempts[e.Attempt+" "+e.Target] = e.Denied
			}
		}
		f.Close()
	}
	var recs []ctoharness.NetworkRecord
	if lines, errText := readLines(filepath.Join(runDir, evidence.NetworkLog)); errText == "" {
		for _, l := range lines {
			var rec ctoharness.NetworkRecord
			if json.Unmarshal(l, &rec) == nil {
				recs = append(recs, rec)
			}
		}
	}
	for _, x := range row.ExpectNet {
		if x.Probe != "" {
			probe := r.Replace(x.Probe)
			denied, ok := attempts[probe]
			switch {
			case !ok:
				res.fail("Case recorded no attempt %q", probe)
			case denied != x.Denied:
				res.fail("attempt %q: denied=%v, expected %v", probe, denied, x.Denied)
			}
		}
		if x.Logged == "" {
			continue
		}
		cmd := x.Command
		if cmd == "" {
			cmd = "case"
		}
		ep := r.Replace(x.Endpoint)
		found := false
		for _, rec := range recs {
			if rec.Command == cmd && rec.Decision == x.Logged && net.JoinHostPort(rec.Host, strconv.Itoa(rec.Port)) == ep && rec.Limit == x.Limit &&
				(x.Via == "" || rec.Via == x.Via) {
				found = true
			}
		}
		if !found {
			res.fail("%s has no %s record of %s to %s (limit %q, via %q)", evidence.NetworkLog, x.Logged, cmd, ep, x.Limit, x.Via)
		}
	}
}
