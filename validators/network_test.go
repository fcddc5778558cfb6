package validators_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/validators"
)

// The raw-IP row turns red when the address itself is allowed: the row
// checks what happened to each probe, not just that the run passed.
func TestEgressRowTurnsRedWhenTheAddressIsAllowed(t *testing.T) {
	o := replayOpts(t)
	o.Harness = func(h *harness.Options) {
		for _, a := range h.AllowNetCase {
			if port, ok := strings.CutPrefix(a, "localhost:"); ok {
				h.AllowNetCase = append(h.AllowNetCase, "127.0.0.1:"+port)
				return
			}
		}
	}
	row, err := fixtures.Lookup("egress-raw-ip")
	if err != nil {
		t.Fatal(err)
	}
	res := validators.Replay(context.Background(), row, o)
	if res.OK {
		t.Fatal("the raw-IP row stayed green with the address allowed")
	}
	if !strings.Contains(strings.Join(res.Errors, " "), "denied=false, expected true") {
		t.Fatalf("errors do not name the probe that got through: %v", res.Errors)
	}
}

// The network check fails when network.jsonl records an allowed connection
// outside the policy, or when the report's summary disagrees with the log.
func TestNetworkCheckCatchesOutOfPolicyRecords(t *testing.T) {
	o := replayOpts(t)
	o.Keep = true
	row, err := fixtures.Lookup("egress-allowed")
	if err != nil {
		t.Fatal(err)
	}
	res := validators.Replay(context.Background(), row, o)
	if !res.OK {
		t.Fatalf("egress-allowed: %v", res.Errors)
	}
	p := filepath.Join(res.RunDir, evidence.NetworkLog)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	// Point the first allowed record at a host no rule covers.
	lines[0] = strings.Replace(lines[0], `"host":"localhost"`, `"host":"evil.example.com"`, 1)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	v := validators.Run(context.Background(), res.RunDir, o.Schemas, validators.RunOptions{})
	var network []string
	for _, f := range v.Errors {
		if f.Check == "network_egress" {
			network = append(network, f.Message)
		}
	}
	if len(network) == 0 || !strings.Contains(strings.Join(network, " "), "not covered by its rule") {
		t.Fatalf("network_egress findings %v (all: %v)", network, v.Errors)
	}
	// Dropping a record makes the summary disagree with the log.
	if err := os.WriteFile(p, []byte(strings.Join(lines[1:], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	v = validators.Run(context.Background(), res.RunDir, o.Schemas, validators.RunOptions{})
	msgs := ""
	for _, f := range v.Errors {
		if f.Check == "network_egress" {
			msgs += f.Message + "; "
		}
	}
	if !strings.Contains(msgs, "network.attempts") {
		t.Fatalf("a dropped record was not noticed: %s", msgs)
	}
}

// Without an allowlist network.jsonl may hold refused socket calls only:
// the vsock row's log validates, and a connection record slipped into it
// does not.
func TestNetworkCheckWithoutAPolicyTakesSocketRecordsOnly(t *testing.T) {
	o := replayOpts(t)
	o.Keep = true
	row, err := fixtures.Lookup("sandbox-vsock")
	if err != nil {
		t.Fatal(err)
	}
	res := validators.Replay(context.Background(), row, o)
	if !res.OK {
		t.Fatalf("sandbox-vsock: %v", res.Errors)
	}
	p := filepath.Join(res.RunDir, evidence.NetworkLog)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The first denied line, as a refused connect: the counts still agree.
	first, rest, _ := strings.Cut(string(data), "\n")
	first = strings.Replace(first, `"via":"socket"`, `"via":"syscall"`, 1)
	first = regexp.MustCompile(`,"family":"AF_VSOCK","socket_type":"SOCK_STREAM","pid":\d+(,"comm":"[^"]*")?`).ReplaceAllString(first, "")
	forged := first + "\n" + rest
	if strings.Contains(first, `"family"`) || !strings.Contains(first, `"via":"syscall"`) {
		t.Fatalf("no socket record to rewrite in %s", data)
	}
	if err := os.WriteFile(p, []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	v := validators.Run(context.Background(), res.RunDir, o.Schemas, validators.RunOptions{})
	msgs := ""
	for _, f := range v.Errors {
		if f.Check == "network_egress" {
			msgs += f.Message + "; "
		}
	}
	if !strings.Contains(msgs, "only refused socket calls") {
		t.Fatalf("a connection record without an allowlist was not noticed: %s (all: %v)", msgs, v.Errors)
	}
}
