package batch

import (
	"bytes"
	"fmt"
	"html/template"
)

// Page renders batch.html: one self-contained file (inline style, no
// script, nothing fetched), so it opens the same from a CI artifact, a mail
// attachment or the batch directory. Every string from a trial is escaped by
// html/template; links go only to the trials' report.html files.
func Page(s Summary) ([]byte, error) {
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

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
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>batch {{.Name}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
.wrap{overflow-x:auto;margin:1em 0}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
th{background:#f3f3f3}.pass{color:#176d2c}.fail{color:#a11}.pending{color:#777}
</style></head><body>
<h1>Batch {{.Name}}</h1>
<p id="status">{{.Finished}} of {{.Trials}} trials finished{{if .Complete}} (complete){{else}} (incomplete){{end}}; at most {{.MaxAttempts}} attempts per trial; batch id <code>{{.BatchID}}</code>; generated {{.GeneratedAt.Format "2006-01-02 15:04:05Z"}}.</p>
<h2>Agents</h2>
<div class="wrap"><table id="agents"><tr><th>agent</th><th>passed</th><th>unscored</th><th>pass rate</th><th>pass</th><th>agent failed</th><th>model failed</th><th>infra failed</th><th>policy blocked</th><th>task invalid</th><th>flaky</th><th>rejected by the adversary</th><th>attempts</th><th>tokens in/out</th><th>cost</th><th>time</th></tr>
{{range .Agents}}<tr><td>{{.Agent}}</td><td>{{.Passes}}/{{.Scored}}</td><td>{{unscored .Totals}}</td><td>{{pct .PassRate}}</td><td>{{.Outcomes.Pass}}</td><td>{{.Outcomes.AgentFailed}}</td><td>{{.Outcomes.ModelFailed}}</td><td>{{.Outcomes.InfraFailed}}</td><td>{{.Outcomes.PolicyBlocked}}</td><td>{{.Outcomes.TaskInvalid}}</td><td>{{.Flaky}}</td><td>{{.AdversaryRejected}}</td><td>{{.Attempts}}</td><td>{{.InputTokens}}/{{.OutputTokens}}</td><td>{{cost .Totals}}</td><td>{{secs .DurationMs}}</td></tr>
{{end}}</table></div>
<h2>Agent × task</h2>
<div class="wrap"><table id="cells"><tr><th>agent</th><th>task</th><th>passed</th><th>unscored</th><th>pass@k</th><th>pass^k</th><th>flaky</th><th>rejected by the adversary</th><th>attempts</th><th>tokens in/out</th><th>cost</th><th>time</th><th>queued</th></tr>
{{range .Cells}}<tr><td>{{.Agent}}</td><td>{{.Task}}</td><td>{{.Passes}}/{{.Scored}} of {{.Trials}}</td><td>{{unscored .Totals}}</td><td>{{pk "@" .PassAtK}}</td><td>{{pk "^" .PassHatK}}</td><td>{{.Flaky}}</td><td>{{.AdversaryRejected}}</td><td>{{.Attempts}}</td><td>{{.InputTokens}}/{{.OutputTokens}}</td><td>{{cost .Totals}}</td><td>{{secs .DurationMs}}</td><td>{{secs .QueueMs}}</td></tr>
{{end}}</table></div>
{{if .Tests}}<h2>Tests</h2>
<p>Each listed test of a task, per agent, over the trials whose last attempt was graded: every fail-to-pass test, and the pass-to-pass tests that failed in some trial. A test that no agent makes pass, or that every agent breaks, points at the task rather than the agents.</p>
<div class="wrap"><table id="tests"><tr><th>task</th><th>list</th><th>test</th><th>agent</th><th>held</th><th>missing from the report</th></tr>
{{range .Tests}}<tr><td>{{.Task}}</td><td>{{list .List}}</td><td><code>{{.Test}}</code></td><td>{{.Agent}}</td><td class="{{if eq .Held .Graded}}pass{{else}}fail{{end}}">{{.Held}}/{{.Graded}}</td><td>{{.Missing}}</td></tr>
{{end}}</table></div>
{{end}}<h2>Trials</h2>
<div class="wrap"><table id="trials"><tr><th>trial</th><th>agent</th><th>task</th><th>repeat</th><th>source</th><th>outcome</th><th>attempts</th><th>refused results</th><th>worker</th><th>evidence</th></tr>
{{range .TrialList}}<tr><td><code>{{.TrialID}}</code></td><td>{{.Agent}}</td><td>{{.Task}}</td><td>{{.Repeat}}</td><td>{{.Source}}</td><td class="{{if eq .Outcome "pass"}}pass{{else if eq .Outcome "pending"}}pending{{else}}fail{{end}}">{{.Outcome}}</td><td>{{.Attempts}}{{if .AttemptID}} (last <code>{{.AttemptID}}</code>){{end}}</td><td>{{.Refused}}</td><td>{{.Worker}}</td><td>{{if .ReportHTML}}<a href="{{.ReportHTML}}">report</a>{{end}}</td></tr>
{{end}}</table></div>
</body></html>
`))
