package modelmeter

import (
	"encoding/json"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/config"
)

// Account sums what a meter relayed into the report's usage, one shape for
// Case's agent and the adversary's: every request in order (at most
// ctoharness.MaxModelRequestsShown listed), and the cost the agent
// reported (reported > 0), else one estimated from price when known, else
// none. lines are the requests, one JSON line each, for the evidence.
func Account(reqs []Request, reported float64, price *config.Price) (u *ctoharness.ModelUsage, lines []byte) {
	u = &ctoharness.ModelUsage{PerRequest: []ctoharness.ModelRequest{}, CostSource: ctoharness.CostNotReported}
	for _, q := range reqs {
		mr := ctoharness.ModelRequest{Seq: q.Seq, At: q.At, API: string(q.API), Status: q.Status, Error: q.Error, LatencyMs: q.LatencyMs,
			InputUncached: q.Usage.InputUncached, CacheRead: q.Usage.CacheRead, CacheWrite: q.Usage.CacheWrite, Output: q.Usage.Output}
		u.Requests++
		if q.Error != "" {
			u.Failed++
		}
		if !q.Reported {
			u.Unreported++
		}
		u.InputUncached += mr.InputUncached
		u.CacheRead += mr.CacheRead
		u.CacheWrite += mr.CacheWrite
		u.Output += mr.Output
		if len(u.PerRequest) < ctoharness.MaxModelRequestsShown {
			u.PerRequest = append(u.PerRequest, mr)
		}
		line, _ := json.Marshal(mr)
		lines = append(append(lines, line...), '\n')
	}
	switch {
	case reported > 0:
		c := reported
		u.CostUSD, u.CostSource = &c, ctoharness.CostReported
	case price != nil:
		c := (float64(u.InputUncached)*price.Input + float64(u.CacheRead)*price.CacheRead +
			float64(u.CacheWrite)*price.CacheWrite + float64(u.Output)*price.Output) / 1e6
		u.CostUSD, u.CostSource = &c, ctoharness.CostEstimated
	}
	return u, lines
}
