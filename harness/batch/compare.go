package batch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cto-harness/cto-harness/schemas"
)

// Side is one side of a comparison: a summary and, optionally, one agent.
type Side struct {
	Label   string
	Summary Summary
	Agent   string // "" compares every agent, pairing by agent and task
}

// ParseSide reads "PATH" or "PATH#AGENT", where PATH is a batch directory or
// its batch.json; the summary is checked against its schema.
func ParseSide(arg string, set *schemas.Set) (Side, error) {
	path, agent, _ := strings.Cut(arg, "#")
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, SummaryJSON)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Side{}, err
	}
	if err := set.Validate(schemas.Batch, data); err != nil {
		return Side{}, fmt.Errorf("%s: %w", path, err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return Side{}, fmt.Errorf("%s: %w", path, err)
	}
	if agent != "" {
		found := false
		for _, a := range s.Agents {
			found = found || a.Agent == agent
		}
		if !found {
			return Side{}, fmt.Errorf("%s has no agent %q (it has %s)", path, agent, strings.Join(sortedAgents(s), ", "))
		}
	}
	return Side{Label: arg, Summary: s, Agent: agent}, nil
}

// Pair is one task (and agent, when comparing whole batches) on both sides.
type Pair struct {
	Key       string `json:"key"`
	APasses   int    `json:"a_passes"`
	AFinished int    `json:"a_finished"`
	BPasses   int    `json:"b_passes"`
	BFinished int    `json:"b_finished"`
	// AScored and BScored are the denominators of the rates: finished
	// trials minus the unscored (infra_failed, model_failed) ones.
	AScored      int     `json:"a_scored"`
	BScored      int     `json:"b_scored"`
	ARate        float64 `json:"a_rate"`
	BRate        float64 `json:"b_rate"`
	Delta        float64 `json:"delta"` // BRate - ARate
	AFinishedAll bool    `json:"a_complete"`
	BFinishedAll bool    `json:"b_complete"`
	ACostUSD     *float64
	BCostUSD     *float64
	ADurationMs  int64
	BDurationMs  int64
}

// Comparison is the paired result.
type Comparison struct {
	A, B             string
	Pairs            []Pair
	BBetter, ABetter int
	Ties             int
	MeanDelta        float64
	OnlyInA, OnlyInB []string
	// Unscored are the tasks paired but not compared: one side has no
	// scored trial (every finished one failed for the machine's or the
	// model provider's reasons), so there is no rate to compare.
	Unscored []string
}

// Compare pairs the two sides per task (per agent and task when neither
// side names an agent). Tasks on one side only are listed, not compared.
func Compare(a, b Side) Comparison {
	key := func(s Side, c Cell) (string, bool) {
		if s.Agent != "" {
			return c.Task, c.Agent == s.Agent
		}
		if a.Agent != "" || b.Agent != "" {
			return c.Task, true
		}
		return c.Agent + "/" + c.Task, true
	}
	index := func(s Side) map[string]Cell {
		m := map[string]Cell{}
		for _, c := range s.Summary.Cells {
			if k, ok := key(s, c); ok {
				m[k] = c
			}
		}
		return m
	}
	ma, mb := index(a), index(b)
	out := Comparison{A: a.Label, B: b.Label}
	var keys []string
	for k := range ma {
		if _, ok := mb[k]; ok {
			keys = append(keys, k)
		} else {
			out.OnlyInA = append(out.OnlyInA, k)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			out.OnlyInB = append(out.OnlyInB, k)
		}
	}
	sort.Strings(keys)
	sort.Strings(out.OnlyInA)
	sort.Strings(out.OnlyInB)
	sum := 0.0
	for _, k := range keys {
		ca, cb := ma[k], mb[k]
		p := Pair{Key: k, APasses: ca.Passes, AFinished: ca.Finished, BPasses: cb.Passes, BFinished: cb.Finished,
			AScored: ca.Scored, BScored: cb.Scored,
			AFinishedAll: ca.Finished == ca.Trials, BFinishedAll: cb.Finished == cb.Trials,
			ACostUSD: ca.CostUSD, BCostUSD: cb.CostUSD, ADurationMs: ca.DurationMs, BDurationMs: cb.DurationMs}
		if ca.Scored == 0 || cb.Scored == 0 {
			out.Unscored = append(out.Unscored, k)
			continue
		}
		p.ARate = float64(ca.Passes) / float64(ca.Scored)
		p.BRate = float64(cb.Passes) / float64(cb.Scored)
		p.Delta = p.BRate - p.ARate
		switch {
		case p.Delta > 0:
			out.BBetter++
		case p.Delta < 0:
			out.ABetter++
		default:
			out.Ties++
		}
		sum += p.Delta
		out.Pairs = append(out.Pairs, p)
	}
	if len(out.Pairs) > 0 {
		out.MeanDelta = sum / float64(len(out.Pairs))
	}
	return out
}
