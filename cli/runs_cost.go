package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cto-harness/cto-harness/harness/ledger"
)

// RunsCostCmd is `cto-harness runs cost`.
type RunsCostCmd struct {
	By    string `name:"by" default:"day,agent,model" placeholder:"GROUPS" help:"Group by these, comma-separated, in this order: day (UTC), agent, model, role (case or adversary); default ${default}; none is one total row."`
	Since string `name:"since" placeholder:"YYYY-MM-DD" help:"Only runs that ended on this UTC day or later."`
	Until string `name:"until" placeholder:"YYYY-MM-DD" help:"Only runs that ended on this UTC day or earlier."`
	JSON  bool   `name:"json" help:"Print one JSON object: ledger (its path), rows (the group values, runs, requests, tokens, cost_usd, unknown_cost_runs, passes) and problems (the lines skipped)."`
}

// Help explains cost.
func (RunsCostCmd) Help() string {
	return `Sums the cost ledger, RUNS_DIR/` + ledger.File + `: every run appends one line to it when it ends (its
status and, for Case and the adversary, the agent, model, requests, tokens and cost), and the line
stays when the run is pruned. The table has one row per group (--by): a run with Case and an
adversary adds to two rows when grouped by agent, model or role. RUNS counts distinct runs and
PASSES the runs that passed; INPUT counts every input token, cached or not. A cost no one reported or estimated stays unknown: COST sums the known
costs and says how many are unknown ("$0.0123 + 2 unknown"), or "unknown" when none is known.
Lines that cannot be read (a run killed mid-append) are skipped with a warning naming them.`
}

// costReport is the --json output.
type costReport struct {
	Ledger   string           `json:"ledger"`
	Rows     []ledger.Row     `json:"rows"`
	Problems []ledger.Problem `json:"problems"`
}

// Run executes the command.
func (c *RunsCostCmd) Run(g *Globals, env *Env) error {
	var by []string
	for _, s := range strings.Split(c.By, ",") {
		if s = strings.TrimSpace(s); s != "" {
			by = append(by, s)
		}
	}
	since, err := costDay("--since", c.Since)
	if err != nil {
		return err
	}
	until, err := costDay("--until", c.Until)
	if err != nil {
		return err
	}
	if !until.IsZero() {
		until = until.AddDate(0, 0, 1) // --until names the last day included
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return usagef("--since %s is after --until %s: no day is in between", c.Since, c.Until)
	}
	if _, err := ledger.Sum(nil, by, since, until); err != nil {
		return usagef("--by: %v", err) // before reading: bad input is reported alike for every ledger
	}
	runs, err := runsDirAbs(g, env)
	if err != nil {
		return err
	}
	path := ledger.Path(runs)
	entries, problems, err := ledger.Read(runs)
	if err != nil {
		return usageError{err}
	}
	for _, p := range problems {
		fmt.Fprintf(env.Stderr, "warning: line %d of %s: skipped: %s: %s\n", p.Line, term(path), term(p.Err), term(p.Text))
	}
	rows, err := ledger.Sum(entries, by, since, until)
	if err != nil {
		return usageError{err}
	}
	if c.JSON {
		if problems == nil {
			problems = []ledger.Problem{}
		}
		return printJSON(env.Stdout, costReport{Ledger: path, Rows: rows, Problems: problems})
	}
	if len(rows) == 0 {
		window := ""
		if c.Since != "" || c.Until != "" {
			window = fmt.Sprintf(" from %s to %s", orElse(c.Since, "the start"), orElse(c.Until, "today"))
		}
		fmt.Fprintf(env.Stdout, "no runs in the cost ledger %s%s\n", term(path), window)
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	for _, b := range by {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(b))
	}
	fmt.Fprintln(tw, "RUNS\tREQUESTS\tINPUT\tOUTPUT\tCOST\tPASSES")
	for _, r := range rows {
		for _, b := range by {
			fmt.Fprintf(tw, "%s\t", term(orElse(r.Value(b), "-")))
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%d\n", r.Runs, r.Requests,
			r.InputTokens+r.CacheReadTokens+r.CacheWriteTokens, r.OutputTokens, ledgerCostText(r), r.Passes)
	}
	return tw.Flush()
}

// costDay parses a --since or --until day; "" is no bound.
func costDay(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, usagef("%s %q is not a day: give it as YYYY-MM-DD (a UTC day, e.g. 2026-03-01)", flag, v)
	}
	return t, nil
}

// ledgerCostText is a row's cost: the known sum, and how many parties' costs are
// unknown, never counted as $0.
func ledgerCostText(r ledger.Row) string {
	switch {
	case r.CostUSD == nil:
		return "unknown"
	case r.UnknownCostRuns > 0:
		return fmt.Sprintf("$%.4f + %d unknown", *r.CostUSD, r.UnknownCostRuns)
	default:
		return fmt.Sprintf("$%.4f", *r.CostUSD)
	}
}

func orElse(v, alt string) string {
	if v == "" {
		return alt
	}
	return v
}
