package batch

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"strings"
)

// Page renders batch.html: one self-contained file (inline style and SVG,
// no script, nothing fetched), so it opens the same from a CI artifact, a
// mail attachment or the batch directory. Every string from a trial is
// escaped by html/template; links go only to the trials' report.html files.
func Page(s Summary) ([]byte, error) {
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, newPageView(s)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// pageView is the summary with what the page draws from it.
type pageView struct {
	Summary
	Rows     []agentRow
	Plot     scatter
	Failures []failureRow
}

// agentRow is one agent with its pass rate's interval and bar.
type agentRow struct {
	AgentTotal
	Lo, Hi float64 // the 95 % Wilson score interval of the pass rate
	Bar    bar
}

// bar is a pass-rate bar in barWidth pixels: the rate filled, the
// interval a whisker across it.
type bar struct{ Fill, Lo, Hi string }

const barWidth = 120

// failureRow is one agent's failures of one outcome class.
type failureRow struct {
	Agent, Outcome string
	Attempts       int
	Codes          []FailureCount
}

func newPageView(s Summary) pageView {
	v := pageView{Summary: s}
	for _, a := range s.Agents {
		r := agentRow{AgentTotal: a}
		r.Lo, r.Hi = wilson(a.Passes, a.Scored)
		if a.Scored > 0 {
			r.Bar = bar{Fill: px(a.PassRate * barWidth), Lo: px(r.Lo * barWidth), Hi: px(r.Hi * barWidth)}
		}
		v.Rows = append(v.Rows, r)
		for _, f := range a.Failures {
			if n := len(v.Failures); n > 0 && v.Failures[n-1].Agent == a.Agent && v.Failures[n-1].Outcome == f.Outcome {
				v.Failures[n-1].Attempts += f.Attempts
				v.Failures[n-1].Codes = append(v.Failures[n-1].Codes, f)
				continue
			}
			v.Failures = append(v.Failures, failureRow{Agent: a.Agent, Outcome: f.Outcome, Attempts: f.Attempts, Codes: []FailureCount{f}})
		}
	}
	v.Plot = newScatter(v.Rows)
	return v
}

// wilsonZ is the standard normal quantile of a two-sided 95 % interval.
const wilsonZ = 1.959963984540054

// wilson is the 95 % Wilson score interval of passes out of n trials.
// Unlike passes/n ± z·se it stays inside [0, 1] and does not shrink to a
// point at 0 or n passes, which matters at the few trials a batch has.
// With no trial nothing is known: [0, 1].
func wilson(passes, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	nf, z2 := float64(n), wilsonZ*wilsonZ
	p := float64(passes) / nf
	d := 1 + z2/nf
	c := (p + z2/(2*nf)) / d
	h := wilsonZ * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / d
	return math.Max(0, c-h), math.Min(1, c+h)
}

func px(v float64) string { return fmt.Sprintf("%.1f", v) }

// The scatter's geometry, in SVG user units.
const (
	plotW, plotH           = 460, 250
	plotLeft, plotRight    = 60, 130 // room for the y ticks, and the agents' names
	plotTop, plotBottom    = 12, 44
	plotInnerW, plotInnerH = plotW - plotLeft - plotRight, plotH - plotTop - plotBottom
	maxPlotLabel           = 18 // runes of an agent's name beside its point
)

// scatter is cost against pass rate, one point per agent with its
// interval as a vertical whisker. Agents without a known cost or without
// a scored trial are named beside it, not drawn.
type scatter struct {
	W, H, Left, Right, Top, Bottom int
	YLabel                         int // the y axis label's place, in the rotated frame
	Points                         []point
	XTicks, YTicks                 []tick
	Omitted                        []string // agents not drawn, with why
}

type point struct {
	X, Y, Lo, Hi, LabelX string
	Name, Title          string
}

// tick is an axis mark at At, its label at LabelAt on the same axis.
type tick struct{ At, LabelAt, Label string }

func newScatter(rows []agentRow) scatter {
	s := scatter{W: plotW, H: plotH, Left: plotLeft, Right: plotLeft + plotInnerW, Top: plotTop, Bottom: plotTop + plotInnerH, YLabel: -(plotTop + plotInnerH/2)}
	maxCost := 0.0
	for _, r := range rows {
		if r.CostUSD != nil && r.Scored > 0 {
			maxCost = math.Max(maxCost, *r.CostUSD)
		}
	}
	xmax := niceCeil(maxCost)
	x := func(c float64) float64 { return plotLeft + c/xmax*plotInnerW }
	y := func(rate float64) float64 { return plotTop + (1-rate)*plotInnerH }
	for _, r := range rows {
		switch {
		case r.Scored == 0:
			s.Omitted = append(s.Omitted, r.Agent+" (no scored trial)")
			continue
		case r.CostUSD == nil:
			s.Omitted = append(s.Omitted, r.Agent+" (cost unknown)")
			continue
		}
		name := r.Agent
		if rs := []rune(name); len(rs) > maxPlotLabel {
			name = string(rs[:maxPlotLabel-1]) + "…"
		}
		cx := x(*r.CostUSD)
		s.Points = append(s.Points, point{X: px(cx), Y: px(y(r.PassRate)), Lo: px(y(r.Lo)), Hi: px(y(r.Hi)), LabelX: px(cx + 6), Name: name,
			Title: fmt.Sprintf("%s: pass rate %.0f%% (95%% interval %.0f–%.0f%%) at $%.4f", r.Agent, r.PassRate*100, r.Lo*100, r.Hi*100, *r.CostUSD)})
	}
	for _, f := range []float64{0, 0.5, 1} {
		s.XTicks = append(s.XTicks, tick{At: px(x(f * xmax)), LabelAt: px(x(f * xmax)), Label: usd(f * xmax)})
		s.YTicks = append(s.YTicks, tick{At: px(y(f)), LabelAt: px(y(f) + 4), Label: fmt.Sprintf("%.0f%%", f*100)})
	}
	return s
}

// niceCeil is the smallest 1, 2 or 5 times a power of ten at or above v
// (1 for v <= 0: a batch that cost nothing still has an axis).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func usd(v float64) string {
	s := fmt.Sprintf("$%.4f", v)
	if v >= 0.01 || v == 0 {
		s = fmt.Sprintf("$%.2f", v)
	}
	return s
}

//go:embed page.html.tmpl
var pageSource string

var pageTmpl = template.Must(template.New("batch").Funcs(template.FuncMap{
	"cost": func(t Totals) string {
		if t.CostUSD == nil {
			return "unknown"
		}
		return fmt.Sprintf("$%.4f (%s)", *t.CostUSD, t.CostBasis)
	},
	"pct": func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) },
	"list": func(l string) string {
		if l == ListFailToPass {
			return "fail-to-pass"
		}
		return "pass-to-pass"
	},
	"outcome":  func(o string) string { return strings.ReplaceAll(o, "_", " ") },
	"plus":     func(a, b int) int { return a + b },
	"unscored": func(t Totals) int { return t.Finished - t.Scored },
	"secs":     func(ms int64) string { return fmt.Sprintf("%.1fs", float64(ms)/1000) },
	"pk": func(sign string, p []PassAtK) string {
		var b bytes.Buffer
		for i, x := range p {
			if i > 0 {
				b.WriteString(" ")
			}
			if x.Value == nil {
				fmt.Fprintf(&b, "%s%d: not enough trials", sign, x.K)
				break
			}
			fmt.Fprintf(&b, "%s%d=%.2f", sign, x.K, *x.Value)
		}
		return b.String()
	},
}).Parse(pageSource))
