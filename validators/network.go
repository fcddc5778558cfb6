package validators

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// checkNetwork holds network.jsonl against the policy recorded in the
// report: every allowed connection went to an endpoint a rule of its own
// command covers (and, over TLS, named that endpoint), and the report's
// network summary says exactly what the log holds. A run without a policy
// has neither the summary nor the log, unless the sandbox refused a socket
// call: then both, and the log holds nothing else.
func checkNetwork(v *runView, c collector) {
	const name = "network_egress"
	sum := v.report.Network
	if sum == nil {
		if v.files[evidence.NetworkLog] {
			c.fail(name, evidence.NetworkLog, "present, but report.json has no network section")
		}
		return
	}
	if !v.files[evidence.NetworkLog] {
		c.fail(name, evidence.NetworkLog, "missing, but report.json has a network section")
		return
	}
	lines, errText := readLines(v.path(evidence.NetworkLog))
	if errText != "" {
		c.fail(name, evidence.NetworkLog, "%s", errText)
		return
	}
	rules := map[string]egress.List{}
	for cmd, list := range map[string][]ctoharness.NetworkRule{string(egress.CommandCase): sum.Policy.Case,
		string(egress.CommandVerify): sum.Policy.Verification, string(egress.CommandSetup): sum.Policy.Setup,
		string(egress.CommandAdversary): sum.Policy.Adversary} {
		for _, r := range list {
			e, err := egress.ParseEndpoint(r.Endpoint)
			if err != nil {
				c.fail(name, evidence.ReportJSON, "network policy entry %q: %v", r.Endpoint, err)
				continue
			}
			rules[cmd] = append(rules[cmd], egress.Rule{Endpoint: e, Source: r.Source})
		}
	}
	noPolicy := len(sum.Policy.Case)+len(sum.Policy.Verification)+len(sum.Policy.Setup)+len(sum.Policy.Adversary) == 0
	var got ctoharness.NetworkSummary
	got.DeniedLog = []ctoharness.NetworkDenied{}
	limits := map[string]bool{}
	for i, line := range lines {
		where := fmt.Sprintf("%s line %d", evidence.NetworkLog, i+1)
		if err := v.set.Validate(schemas.NetworkRecord, line); err != nil {
			c.fail(name, evidence.NetworkLog, "%s: %v", where, err)
			return
		}
		var r ctoharness.NetworkRecord
		if err := json.Unmarshal(line, &r); err != nil {
			c.fail(name, evidence.NetworkLog, "%s: %v", where, err)
			return
		}
		if noPolicy && r.Via != egress.ViaSocket {
			c.fail(name, evidence.NetworkLog, "%s: a %s record, but no command had a network allowlist: only refused socket calls can be recorded then", where, r.Via)
		}
		if r.Seq != i+1 {
			c.fail(name, evidence.NetworkLog, "%s: seq %d, want %d (a record is missing or out of place)", where, r.Seq, i+1)
		}
		got.Attempts++
		got.BytesUp += r.BytesUp
		got.BytesDown += r.BytesDown
		if r.Limit != "" {
			limits[r.Limit] = true
		}
		switch r.Decision {
		case egress.Denied:
			got.Denied++
			if len(got.DeniedLog) < ctoharness.MaxDeniedInReport {
				got.DeniedLog = append(got.DeniedLog, ctoharness.NetworkDenied{Seq: r.Seq, Command: r.Command, Host: r.Host, Port: r.Port, Reason: r.Reason})
			}
			continue
		case egress.Allowed:
			got.Allowed++
		case egress.Failed:
			got.Failed++
		}
		if msg := outsidePolicy(r, rules[r.Command]); msg != "" {
			c.fail(name, evidence.NetworkLog, "%s: %s", where, msg)
		}
	}
	mismatch := func(field string, want, have any) {
		c.fail(name, evidence.ReportJSON, "network.%s is %v, but %s says %v", field, have, evidence.NetworkLog, want)
	}
	for _, f := range []struct {
		field      string
		want, have int64
	}{
		{"attempts", int64(got.Attempts), int64(sum.Attempts)}, {"allowed", int64(got.Allowed), int64(sum.Allowed)},
		{"denied", int64(got.Denied), int64(sum.Denied)}, {"failed", int64(got.Failed), int64(sum.Failed)},
		{"bytes_up", got.BytesUp, sum.BytesUp}, {"bytes_down", got.BytesDown, sum.BytesDown},
	} {
		if f.want != f.have {
			mismatch(f.field, f.want, f.have)
		}
	}
	if !slices.Equal(got.DeniedLog, sum.DeniedLog) {
		mismatch("denied_attempts", got.DeniedLog, sum.DeniedLog)
	}
	for l := range limits {
		if !slices.Contains(sum.Limits.Exceeded, l) {
			c.fail(name, evidence.ReportJSON, "network.limits.exceeded lacks %q, which %s records", l, evidence.NetworkLog)
		}
	}
}

// outsidePolicy says why an allowed (or failed) record is outside its
// command's rules, or "".
func outsidePolicy(r ctoharness.NetworkRecord, rules egress.List) string {
	var rule *egress.Rule
	for i := range rules {
		if rules[i].Endpoint.String() == r.Rule {
			rule = &rules[i]
			break
		}
	}
	switch {
	case rule == nil:
		return fmt.Sprintf("%s connection to %s:%d names rule %q, which is not in the %s policy", r.Decision, r.Host, r.Port, r.Rule, r.Command)
	case !rule.Endpoint.Matches(r.Host, uint16(r.Port)):
		return fmt.Sprintf("%s connection to %s:%d is not covered by its rule %s", r.Decision, r.Host, r.Port, r.Rule)
	case r.Via == egress.ViaDirect && rule.Endpoint.Wildcard:
		return fmt.Sprintf("direct connection to %s:%d allowed by the wildcard %s, which has no address of its own", r.Host, r.Port, r.Rule)
	case r.TLS && rule.Endpoint.IsIP() && r.SNI != "":
		return fmt.Sprintf("TLS connection to the address %s named %q", r.Host, r.SNI)
	case r.TLS && !rule.Endpoint.IsIP() && !strings.EqualFold(r.SNI, r.Host):
		return fmt.Sprintf("TLS connection to %s named %q", r.Host, r.SNI)
	}
	return ""
}
