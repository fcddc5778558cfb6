package harness_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
)

func requireEgress(t *testing.T) {
	t.Helper()
	exe, _ := os.Executable()
	if f := sandbox.ProbeWith(exe); !f.Available() {
		t.Skipf("the sandbox is unavailable here (%s)", f.Reason)
	}
}

func networkRecords(t *testing.T, runDir string) []ctoharness.NetworkRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, evidence.NetworkLog))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ctoharness.NetworkRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r ctoharness.NetworkRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// caseAttempts maps each probe Case recorded to whether it was denied.
func caseAttempts(t *testing.T, runDir string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, evidence.CaseEvents))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			Attempt string `json:"attempt"`
			Target  string `json:"target"`
			Denied  bool   `json:"denied"`
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Attempt != "" {
			out[e.Attempt+" "+e.Target] = e.Denied
			t.Logf("Case: %s", e.Message)
		}
	}
	return out
}

// A listener on the host, allowed with --allow-net 127.0.0.1:PORT, is reached
// from inside the sandbox by unmodified clients, with and without the proxy
// variables; without the allowance the same requests fail.
func TestEgressAllowedEndpoint(t *testing.T) {
	requireEgress(t)
	set := compile(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the host\n")
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	url := "http://" + addr + "/"
	base, _ := sharedStage3(t, set)
	probes := "net-probes=get " + url + ";proxyget " + url
	// The verification command uses whatever unmodified clients the machine
	// has: curl honours the proxy variables (and --noproxy bypasses them),
	// node's fetch ignores them.
	var verify []string
	wantVerify := 0
	if _, err := exec.LookPath("curl"); err == nil {
		verify = append(verify, fmt.Sprintf("curl -fsS %[1]s | grep -q hello && curl -fsS --noproxy '*' %[1]s | grep -q hello", url))
		wantVerify += 2
	}
	if _, err := exec.LookPath("node"); err == nil {
		verify = append(verify, fmt.Sprintf(`node -e "fetch('%s').then(r => r.text()).then(t => process.exit(t.includes('hello') ? 0 : 1), () => process.exit(2))"`, url))
		wantVerify++
	}
	if len(verify) == 0 {
		t.Log("neither curl nor node is installed: only Case's Go client is checked")
	}
	t.Run("allowed", func(t *testing.T) {
		o := base
		spec := *o.Spec
		if len(verify) > 0 {
			spec.Verification.Command = strings.Join(verify, " && ")
		}
		o.Spec, o.Scenario = &spec, probes
		o.AllowNetCase, o.AllowNetVerify = []string{addr}, []string{addr}
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != ctoharness.StatusPass {
			t.Fatalf("status %s: %v\n%s", rep.Status, rep.Blockers, rep.Tests.StderrInline)
		}
		for probe, denied := range caseAttempts(t, rep.RunArtifactDir) {
			if denied {
				t.Errorf("%s was denied", probe)
			}
		}
		via := map[string]int{}
		for _, r := range networkRecords(t, rep.RunArtifactDir) {
			if r.Via == egress.ViaSocket && r.Family == "AF_UNIX" && r.Command == "verification" {
				// glibc's lookups in curl first ask nscd over a UNIX
				// socket: refused, and recorded.
				continue
			}
			if r.Decision != "allowed" || r.Rule != addr || r.BytesDown == 0 {
				t.Errorf("record %+v", r)
			}
			via[r.Command+"/"+r.Via]++
		}
		if via["case/direct"] != 1 || via["case/http_proxy"] != 1 || via["verification/direct"]+via["verification/http_proxy"] != wantVerify {
			t.Errorf("records by command and path: %v", via)
		}
		if rep.Network == nil || rep.Network.Allowed != 2+wantVerify || rep.Network.Policy.Case[0].Source != "flag" {
			t.Errorf("report network %+v", rep.Network)
		}
		mustValidate(t, set, rep, false)
	})

	t.Run("no allowlist", func(t *testing.T) {
		o := base
		o.Scenario = probes
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		attempts := caseAttempts(t, rep.RunArtifactDir)
		if len(attempts) != 2 {
			t.Fatalf("attempts %v", attempts)
		}
		for probe, denied := range attempts {
			if !denied {
				t.Errorf("%s got through without an allowlist", probe)
			}
		}
		if rep.Network != nil {
			t.Errorf("a run without an allowlist records a network section: %+v", rep.Network)
		}
		if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, evidence.NetworkLog)); err == nil {
			t.Errorf("a run without an allowlist wrote %s", evidence.NetworkLog)
		}
		mustValidate(t, set, rep, rep.Status == ctoharness.StatusPass)
	})

	t.Run("another endpoint allowed", func(t *testing.T) {
		// The host's name is allowed, not its address: asking for the
		// address directly or through the proxy is denied and logged.
		_, port, _ := net.SplitHostPort(addr)
		o := base
		o.Scenario = probes
		o.AllowNetCase = []string{"localhost:" + port}
		o.AllowNetOrigin = map[string]string{"localhost:" + port: "model_endpoint"}
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for probe, denied := range caseAttempts(t, rep.RunArtifactDir) {
			if !denied {
				t.Errorf("%s got through", probe)
			}
		}
		if rep.Network == nil {
			t.Fatalf("no network section; blockers %v", rep.Blockers)
		}
		recs := networkRecords(t, rep.RunArtifactDir)
		if len(recs) != 2 {
			t.Fatalf("records %+v", recs)
		}
		for _, r := range recs {
			if r.Decision != "denied" || r.Host != "127.0.0.1" || r.Resolved != "" {
				t.Errorf("record %+v", r)
			}
		}
		if rep.Network == nil || rep.Network.Denied != 2 || rep.Network.Policy.Case[0].Source != "model_endpoint" {
			t.Errorf("report network %+v", rep.Network)
		}
		mustValidate(t, set, rep, rep.Status == ctoharness.StatusPass)
	})
}

// An allowed IP that is not a loopback address is added to the namespace's
// lo, so a client connecting to it by address reaches the forwarder, which
// dials the real address on the host.
func TestEgressNonLoopbackAddress(t *testing.T) {
	requireEgress(t)
	var ip net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("this host has no non-loopback IPv4 address")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })}
	go srv.Serve(ln)
	defer srv.Close()
	set := compile(t)
	o, _ := sharedStage3(t, set)
	addr := ln.Addr().String()
	o.Scenario = "net-probes=get http://" + addr + "/"
	o.AllowNetCase = []string{addr}
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s: %v", rep.Status, rep.Blockers)
	}
	for probe, denied := range caseAttempts(t, rep.RunArtifactDir) {
		if denied {
			t.Errorf("%s was denied", probe)
		}
	}
	recs := networkRecords(t, rep.RunArtifactDir)
	if len(recs) != 1 || recs[0].Decision != "allowed" || recs[0].Resolved != addr {
		t.Fatalf("records %+v", recs)
	}
	mustValidate(t, set, rep, true)
}

// A task may only ask for endpoints the config (or the flags) grant; a
// wildcard grant can be narrowed to one name, which is then recorded as the
// task's.
func TestTaskNetworkNarrowedByConfig(t *testing.T) {
	set := compile(t)
	base, _ := sharedStage3(t, set)

	t.Run("not granted", func(t *testing.T) {
		o := base
		spec := *o.Spec
		spec.Network = &task.NetworkAllow{CaseAllow: []string{"api.example.com:443"}}
		o.Spec = &spec
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if !hasCode(rep, ctoharness.BlockTaskInvalid) || rep.CaseProcessStarted {
			t.Fatalf("blockers %v, case started %v", rep.Blockers, rep.CaseProcessStarted)
		}
		if !strings.Contains(rep.Blockers[0].Message, "api.example.com:443") {
			t.Errorf("message does not name the endpoint: %s", rep.Blockers[0].Message)
		}
		mustValidate(t, set, rep, false)
	})

	t.Run("narrowed", func(t *testing.T) {
		requireEgress(t)
		o := base
		spec := *o.Spec
		spec.Network = &task.NetworkAllow{CaseAllow: []string{"api.example.com:443"}}
		o.Spec = &spec
		o.Config.Network = &config.NetworkAllow{CaseAllow: []string{"*.example.com:443"}}
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != ctoharness.StatusPass || rep.Network == nil {
			t.Fatalf("status %s %v, network %+v", rep.Status, rep.Blockers, rep.Network)
		}
		got := fmt.Sprint(rep.Network.Policy.Case)
		if got != "[{*.example.com:443 config} {api.example.com:443 task}]" || len(rep.Network.Policy.Verification) != 0 {
			t.Errorf("policy %s", got)
		}
		mustValidate(t, set, rep, true)
	})
}

// helloAndClosedPorts starts a loopback HTTP server that says hello (closed
// with the test) and finds a port nothing listens on.
func helloAndClosedPorts(t *testing.T) (port, closed string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") }))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closed, _ = net.SplitHostPort(other.Addr().String())
	other.Close()
	return port, closed
}

// Attempts that never reach a listener (an address outside the namespace, a
// port no endpoint allows, a DNS query to an outside resolver) are refused
// at the system call and recorded; a datagram that stays on the namespace's
// loopback is neither.
func TestEgressRefusedAttemptsAreRecorded(t *testing.T) {
	requireEgress(t)
	port, otherPort := helloAndClosedPorts(t)
	set := compile(t)
	o, _ := sharedStage3(t, set)
	o.AllowNetCase = []string{"localhost:" + port}
	o.Scenario = "net-probes=get http://localhost:" + port + "/;dial 192.0.2.7:" + port + ";dial localhost:" + otherPort + ";dns 8.8.8.8:53;dns 127.0.0.1:53;tfo 192.0.2.8:" + port + ";sendmsg 192.0.2.9:5353;sendmsg 127.0.0.1:5353;sendmmsg 192.0.2.10:5353"
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s: %v", rep.Status, rep.Blockers)
	}
	attempts := caseAttempts(t, rep.RunArtifactDir)
	for probe, denied := range attempts {
		// A datagram to the namespace's loopback is sent (nobody receives it).
		goesThrough := strings.Contains(probe, "localhost:"+port) || strings.Contains(probe, "sendmsg 127.0.0.1")
		if denied == goesThrough {
			t.Errorf("%s: denied %v", probe, denied)
		}
	}
	type key struct{ via, proto, host, port string }
	got := map[key]ctoharness.NetworkRecord{}
	for _, r := range networkRecords(t, rep.RunArtifactDir) {
		got[key{r.Via, r.Protocol, r.Host, fmt.Sprint(r.Port)}] = r
	}
	want := map[key]string{
		{"direct", "tcp", "localhost", port}:       "allowed",
		{"syscall", "tcp", "192.0.2.7", port}:      "denied",
		{"syscall", "tcp", "localhost", otherPort}: "denied",
		{"syscall", "udp", "8.8.8.8", "53"}:        "denied",
		{"syscall", "udp", "192.0.2.9", "5353"}:    "denied", // sendmsg, the address in the header
		{"syscall", "udp", "192.0.2.10", "5353"}:   "denied", // the second message of a sendmmsg
		{"syscall", "tcp", "192.0.2.8", port}:      "denied", // TCP Fast Open: sendto, not connect
	}
	if len(got) != len(want) {
		t.Errorf("records %+v, want %v", got, want)
	}
	for k, d := range want {
		r, ok := got[k]
		if !ok || r.Decision != d {
			t.Errorf("%v: record %+v, want %s", k, r, d)
		} else if d == "denied" && r.Reason == "" {
			t.Errorf("%v: no reason", k)
		}
	}
	if rep.Network.Denied != 6 || rep.Network.Allowed != 1 {
		t.Errorf("report network %+v", rep.Network)
	}
	mustValidate(t, set, rep, true)
}

// A command that loops on refused connects cannot grow network.jsonl without
// bound: past egress.MaxRecords the calls are still refused, but
// unrecorded, and the report says the limit was reached.
func TestEgressRefusalRecordsAreCapped(t *testing.T) {
	requireEgress(t)
	set := compile(t)
	o, _ := sharedStage3(t, set)
	o.AllowNetCase = []string{"localhost:8080"}
	o.Scenario = fmt.Sprintf("net-probes=dials %d@192.0.2.7:8080", egress.MaxRecords+50)
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s: %v", rep.Status, rep.Blockers)
	}
	for probe, denied := range caseAttempts(t, rep.RunArtifactDir) {
		if !denied {
			t.Errorf("%s got through", probe)
		}
	}
	recs := networkRecords(t, rep.RunArtifactDir)
	if len(recs) != egress.MaxRecords {
		t.Errorf("%d records, want %d", len(recs), egress.MaxRecords)
	}
	if rep.Network == nil || !slices.Contains(rep.Network.Limits.Exceeded, egress.LimitRecords) || rep.Network.Denied != egress.MaxRecords {
		t.Errorf("report network %+v", rep.Network)
	}
	mustValidate(t, set, rep, true)
}

// The script scanner leaves a host named by the verification command's
// enforced allowlist to the forwarder; unsandboxed, nothing enforces the
// list, and the same command is refused as dangerous.
func TestVerifyAllowlistQuietsTheScanner(t *testing.T) {
	set := compile(t)
	o, _ := sharedStage3(t, set)
	spec := *o.Spec
	spec.Verification.Command = "curl -fsS https://proxy.example.com/m/@v/list && go test ./..."
	o.Spec = &spec
	o.AllowNetVerify = []string{"proxy.example.com:443"}
	network := func(o harness.Options) bool {
		t.Helper()
		plan, err := harness.Plan(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range plan.Verification.Findings {
			if f.Pattern == "network" {
				return true
			}
		}
		return false
	}
	if network(o) {
		t.Error("an allowed host was flagged under the enforced allowlist")
	}
	o.AllowNetVerify = []string{"other.example.com:443"}
	if !network(o) {
		t.Error("a host outside the allowlist was not flagged")
	}
	o.AllowNetVerify = []string{"proxy.example.com:443"}
	o.Unsandboxed = true
	if !network(o) {
		t.Error("an unsandboxed command reaching the network was not flagged")
	}
}

// With an allowlist, Case's execs are observed all the same: the exec watch
// and the connection watch share the launcher's one seccomp listener. One
// Case runs /bin/true 40 times without claiming any (the ones past the
// budget are refused at the exec and counted) and makes a connection the
// allowlist does not allow (refused at the call and recorded).
func TestEgressAndExecWatchTogether(t *testing.T) {
	requireEgress(t)
	port, otherPort := helloAndClosedPorts(t)
	set := compile(t)
	o, _ := sharedStage3(t, set)
	o.AllowNetCase = []string{"localhost:" + port}
	o.Scenario = "net-probes=execs 40;dial localhost:" + otherPort + ";get http://localhost:" + port + "/"
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s: %v", rep.Status, rep.Blockers)
	}
	c := rep.Case.Commands
	if c == nil || !c.Observed {
		t.Fatalf("case.commands %+v: want observed", c)
	}
	if c.Commands+c.Refused != 40 || c.Refused == 0 || c.Claimed.Commands != 0 {
		t.Errorf("case.commands %+v: want 40 commands seen, those past the budget refused, none claimed", c)
	}
	if c.Execs < 41 {
		t.Errorf("%d execs observed, want the agent's and 40 more", c.Execs)
	}
	type key struct{ via, host, port, decision string }
	got := map[key]bool{}
	for _, r := range networkRecords(t, rep.RunArtifactDir) {
		got[key{r.Via, r.Host, fmt.Sprint(r.Port), r.Decision}] = true
	}
	for _, k := range []key{{"syscall", "localhost", otherPort, "denied"}, {"direct", "localhost", port, "allowed"}} {
		if !got[k] {
			t.Errorf("no record %+v in %v", k, got)
		}
	}
	mustValidate(t, set, rep, true)
}

// A socket call the sandbox refuses is recorded in network.jsonl, for Case
// and for the verification command, whether or not an allowlist is in
// force: without one, the log and the report's network section appear
// with the first such record.
func TestRefusedSocketsAreRecorded(t *testing.T) {
	requireEgress(t)
	set := compile(t)
	o, _ := sharedStage3(t, set)
	o.Scenario = "net-probes=sockets 3"
	verify := ""
	if _, err := exec.LookPath("python3"); err == nil {
		// The verification's own refused socket call.
		spec := *o.Spec
		verify = `python3 -c "import socket
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
except PermissionError:
    pass" && `
		spec.Verification.Command = verify + spec.Verification.Command
		o.Spec = &spec
	} else {
		t.Log("python3 is not installed: only Case's refused socket calls are checked")
	}
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s: %v\n%s", rep.Status, rep.Blockers, rep.Tests.StderrInline)
	}
	for probe, denied := range caseAttempts(t, rep.RunArtifactDir) {
		if !denied {
			t.Errorf("%s got through", probe)
		}
	}
	by := map[string]int{}
	for _, r := range networkRecords(t, rep.RunArtifactDir) {
		if r.Via != egress.ViaSocket || r.Decision != egress.Denied || r.Pid == 0 {
			t.Errorf("record %+v: want a denied socket record naming its caller", r)
			continue
		}
		if r.Family == "AF_VSOCK" && strings.HasPrefix(r.SocketType, "SOCK_STREAM") {
			by[r.Command]++
		}
	}
	if by["case"] != 3 {
		t.Errorf("%d of Case's 3 refused vsock sockets recorded (%v)", by["case"], by)
	}
	if verify != "" && by["verification"] != 1 {
		t.Errorf("%d of the verification's refused vsock sockets recorded, want 1 (%v)", by["verification"], by)
	}
	if rep.Network == nil || rep.Network.Denied != rep.Network.Attempts || rep.Network.Denied < 3 || len(rep.Network.Policy.Case) != 0 {
		t.Errorf("report network %+v", rep.Network)
	}
	mustValidate(t, set, rep, true)
}

// Refused socket calls take their lines from the same egress.MaxRecords as
// every other record of network.jsonl.
func TestSocketRecordsShareTheCap(t *testing.T) {
	requireEgress(t)
	set := compile(t)
	o, _ := sharedStage3(t, set)
	o.AllowNetCase = []string{"localhost:8080"}
	half := egress.MaxRecords/2 + 25
	o.Scenario = fmt.Sprintf("net-probes=dials %d@192.0.2.7:8080;sockets %d", half, half)
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s: %v", rep.Status, rep.Blockers)
	}
	recs := networkRecords(t, rep.RunArtifactDir)
	via := map[string]int{}
	for _, r := range recs {
		via[r.Via]++
	}
	if len(recs) != egress.MaxRecords || via[egress.ViaSyscall] != half || via[egress.ViaSocket] != egress.MaxRecords-half {
		t.Errorf("%d records (%v), want %d: %d refused connects, then sockets up to the cap", len(recs), via, egress.MaxRecords, half)
	}
	if rep.Network == nil || !slices.Contains(rep.Network.Limits.Exceeded, egress.LimitRecords) {
		t.Errorf("report network %+v", rep.Network)
	}
	mustValidate(t, set, rep, true)
}
