package validators

import (
	"fmt"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

func TestCheckUsage(t *testing.T) {
	cost := 0.5
	good := func() *ctoharness.Report {
		return &ctoharness.Report{Agent: &ctoharness.AgentRecord{Usage: &ctoharness.ModelUsage{
			Requests: 2, Failed: 1, InputUncached: 60, CacheRead: 40, Output: 20, CostSource: ctoharness.CostNotReported,
			PerRequest: []ctoharness.ModelRequest{{Seq: 1, InputUncached: 60, CacheRead: 40, Output: 20}, {Seq: 2, Status: 500, Error: "HTTP 500"}}}}}
	}
	for _, tc := range []struct {
		name  string
		edit  func(u *ctoharness.ModelUsage)
		fails bool
	}{
		{"consistent", func(*ctoharness.ModelUsage) {}, false},
		{"output not the sum", func(u *ctoharness.ModelUsage) { u.Output = 0 }, true},
		{"a zero cost for unknown", func(u *ctoharness.ModelUsage) { z := 0.0; u.CostUSD = &z }, true},
		{"a reported cost without an amount", func(u *ctoharness.ModelUsage) { u.CostSource = ctoharness.CostReported }, true},
		{"reported cost", func(u *ctoharness.ModelUsage) { u.CostUSD, u.CostSource = &cost, ctoharness.CostReported }, false},
		{"more listed than made", func(u *ctoharness.ModelUsage) { u.Requests = 1 }, true},
		{"failed miscounted", func(u *ctoharness.ModelUsage) { u.Failed = 0 }, true},
	} {
		r := good()
		tc.edit(r.Agent.Usage)
		var got []string
		checkUsage(r, func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) })
		if (len(got) > 0) != tc.fails {
			t.Errorf("%s: failures %v, want failing=%v", tc.name, got, tc.fails)
		}
	}
}
