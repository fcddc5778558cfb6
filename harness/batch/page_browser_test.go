package batch_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/htmlreport/cdp"
)

// TestSummaryPageInBrowser renders batch.html of a real (small) batch in
// headless Chromium from file:// and checks what a person sees: the counts
// per agent and task with each agent's pass-rate bar and interval, the cost
// against pass rate plot, the failure reasons, whether the summary is
// signed and by which key, every trial with its outcome, links that reach
// each trial's report.html, no console errors, and no sideways scrolling of
// the page (or the plot) in a narrow window.
func TestSummaryPageInBrowser(t *testing.T) {
	exe := cdp.Find()
	if exe == "" {
		t.Skip("chromium is not installed (Debian: apt-get install chromium); the batch page's browser test needs it")
	}
	w := newWorld(t, 1)
	p := w.plan(t, batch.Spec{Name: "page", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note"}},
		Agents: []batch.Agent{{Name: "fine"}, {Name: "broken", Scenario: "break-verification"}}, Repeats: 2})
	st, err := batch.OpenStore(w.runs, p.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch.Execute(context.Background(), p, st, batch.Local{Base: w.base}, batch.Options{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	sum, err := batch.Summarize(p, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch.WriteSummary(context.Background(), st, sum, w.set, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := cdp.Launch(ctx, exe, filepath.Join(t.TempDir(), "chromium-profile"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	page, err := b.Open(ctx, "file://"+filepath.Join(st.Dir, batch.SummaryHTML), 1280, 900)
	if err != nil {
		t.Fatalf("%v\nchromium log:\n%s", err, b.Log())
	}
	var seen struct {
		Status    string   `json:"status"`
		Signature string   `json:"signature"`
		Agents    string   `json:"agents"`
		Bars      int      `json:"bars"`
		Plot      string   `json:"plot"`
		Points    int      `json:"points"`
		PlotW     float64  `json:"plotW"`
		Failures  string   `json:"failures"`
		Trials    string   `json:"trials"`
		Links     []string `json:"links"`
	}
	if err := page.Eval(ctx, `({status: document.getElementById("status").innerText, signature: document.getElementById("signature").innerText,
		agents: document.getElementById("agents").innerText, bars: document.querySelectorAll("#agents svg.bar").length,
		plot: document.getElementById("scatter").textContent, points: document.querySelectorAll("#scatter circle").length,
		plotW: document.querySelector("#scatter svg").getBoundingClientRect().width,
		failures: document.getElementById("failures").innerText, trials: document.getElementById("trials").innerText,
		links: [...document.querySelectorAll("#trials a")].map(a => a.href)})`, &seen); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(seen.Signature, "Not signed") {
		t.Errorf("signature line of an unsigned summary: %q", seen.Signature)
	}
	if seen.Bars != 2 || !strings.Contains(seen.Agents, "34%–100%") || !strings.Contains(seen.Agents, "0%–66%") { // 2/2 and 0/2: Wilson [0.342, 1], [0, 0.658]
		t.Errorf("%d pass-rate bars; agents table:\n%s", seen.Bars, seen.Agents)
	}
	if seen.Points != 2 || seen.PlotW < 200 || !strings.Contains(seen.Plot, "cost in USD (all attempts)") || !strings.Contains(seen.Plot, "pass rate") ||
		!strings.Contains(seen.Plot, "fine") || !strings.Contains(seen.Plot, "broken") {
		t.Errorf("the cost plot has %d points, is %.0f px wide, and reads %q", seen.Points, seen.PlotW, seen.Plot)
	}
	for _, a := range sum.Agents {
		for _, f := range a.Failures {
			if !strings.Contains(seen.Failures, a.Agent+"\t"+strings.ReplaceAll(f.Outcome, "_", " ")) || !strings.Contains(seen.Failures, f.Code) {
				t.Errorf("failure reasons do not show %s's %s %s:\n%s", a.Agent, f.Outcome, f.Code, seen.Failures)
			}
		}
	}
	if len(sum.Agents) != 2 || len(sum.Agents[0].Failures) != 0 || len(sum.Agents[1].Failures) == 0 || sum.Agents[1].Failures[0].Outcome != "agent_failed" {
		t.Errorf("failures counted: %+v", sum.Agents)
	}
	if !strings.Contains(seen.Status, "4 of 4 trials finished (complete)") {
		t.Errorf("status line %q", seen.Status)
	}
	for _, want := range []string{"fine\t2/2\t0\t100%", "broken\t0/2\t0\t0%"} {
		if !strings.Contains(seen.Agents, want) {
			t.Errorf("the agents table does not show %q:\n%s", want, seen.Agents)
		}
	}
	for _, row := range sum.TrialList {
		if !strings.Contains(seen.Trials, row.TrialID) {
			t.Errorf("trial %s is not listed", row.TrialID)
		}
		if row.AttemptID == "" || !strings.Contains(seen.Trials, "(last "+row.AttemptID+")") {
			t.Errorf("trial %s: its attempt %q is not shown", row.TrialID, row.AttemptID)
		}
	}
	if strings.Count(seen.Trials, "agent_failed") != 2 || strings.Count(seen.Trials, "pass") != 2 {
		t.Errorf("outcomes shown:\n%s", seen.Trials)
	}
	if len(seen.Links) != 4 {
		t.Fatalf("%d report links, want 4", len(seen.Links))
	}
	for _, l := range seen.Links {
		u, err := url.Parse(l)
		if err != nil || u.Scheme != "file" {
			t.Errorf("link %q", l)
			continue
		}
		if _, err := os.Stat(u.Path); err != nil || filepath.Base(u.Path) != "report.html" {
			t.Errorf("link %q does not reach a report.html: %v", l, err)
		}
	}
	if c := page.Console(); len(c) > 0 {
		t.Errorf("console messages: %v", c)
	}
	if err := page.Resize(ctx, 380, 800); err != nil {
		t.Fatal(err)
	}
	var widths struct{ Scroll, Inner float64 }
	if err := page.Eval(ctx, `({Scroll: document.documentElement.scrollWidth, Inner: window.innerWidth})`, &widths); err != nil {
		t.Fatal(err)
	}
	if widths.Scroll > widths.Inner+1 {
		t.Errorf("in a %.0f px window the page is %.0f px wide", widths.Inner, widths.Scroll)
	}
	var plotRight float64
	if err := page.Eval(ctx, `document.querySelector("#scatter svg").getBoundingClientRect().right`, &plotRight); err != nil {
		t.Fatal(err)
	}
	if plotRight > widths.Inner+1 {
		t.Errorf("in a %.0f px window the plot ends at %.0f px", widths.Inner, plotRight)
	}

	// Signed, the page names the key the summary records.
	keyID, err := batch.WriteSummary(context.Background(), st, sum, w.set, w.keys.Signer)
	if err != nil || keyID == "" {
		t.Fatalf("signed summary: key %q, %v", keyID, err)
	}
	signed, err := b.Open(ctx, "file://"+filepath.Join(st.Dir, batch.SummaryHTML), 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	var sig string
	if err := signed.Eval(ctx, `document.getElementById("signature").innerText`, &sig); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sig, "Signed") || !strings.Contains(sig, keyID) {
		t.Errorf("signature line of a summary signed with %s: %q", keyID, sig)
	}
	if d := os.Getenv("CTO_HARNESS_KEEP_SCREENSHOTS"); d != "" {
		_ = os.MkdirAll(d, 0o755)
		if err := signed.Screenshot(ctx, filepath.Join(d, "batch.png"), true); err != nil {
			t.Fatal(err)
		}
	}
}
