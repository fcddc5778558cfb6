package htmlreport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// proofView sets the source proofs before and after side by side, with the
// comparison and the fixture's clean proofs.
type proofView struct {
	Rows        []proofRow
	HaveBefore  bool
	HaveAfter   bool
	NonMutation *ctoharness.NonMutationProof
	Diffs       []ctoharness.Difference
	DiffsCut    int
	CleanStart  *ctoharness.FixtureProof
	CleanEnd    *ctoharness.FixtureProof
}

type proofRow struct {
	Field, Before, After string
	Differs              bool
}

// proofSummary is what the page shows of a source proof: its manifest
// and status are only counted, so their entries are not decoded (a proof
// of a large tree lists every file).
type proofSummary struct {
	ctoharness.SourceProof
	Manifest []struct{} `json:"manifest"`
	Status   []struct{} `json:"status"`
}

func (r reader) proofs() proofView {
	var v proofView
	var before, after proofSummary
	v.HaveBefore = r.proof("proofs/source-before.json", &before)
	v.HaveAfter = r.proof("proofs/source-after.json", &after)
	if v.HaveBefore || v.HaveAfter {
		side := func(p *proofSummary, ok bool) []string {
			if !ok {
				return make([]string, 11)
			}
			return []string{stamp(p.TakenAt), p.Root, p.Head.SymbolicRef, p.Head.Commit, p.Head.Tree, p.RefsDigest,
				fmt.Sprint(p.RefCount), fmt.Sprint(p.StatusClean), fmt.Sprint(len(p.Status)), fmt.Sprint(len(p.Manifest)), p.ManifestDigest}
		}
		names := []string{"taken at", "root", "HEAD ref", "HEAD commit", "HEAD tree", "refs digest", "refs",
			"status clean", "status entries", "manifest entries", "manifest digest"}
		b, a := side(&before, v.HaveBefore), side(&after, v.HaveAfter)
		for i, n := range names {
			row := proofRow{Field: n, Before: b[i], After: a[i]}
			row.Differs = i > 0 && v.HaveBefore && v.HaveAfter && b[i] != a[i]
			v.Rows = append(v.Rows, row)
		}
	}
	var nm ctoharness.NonMutationProof
	if r.json("proofs/source-non-mutation.json", &nm) {
		v.NonMutation = &nm
		v.Diffs = nm.Differences
		if len(v.Diffs) > maxTableRows {
			v.DiffsCut = len(v.Diffs) - maxTableRows
			v.Diffs = v.Diffs[:maxTableRows]
		}
	}
	var cs, ce ctoharness.FixtureProof
	if r.json("proofs/fixture-clean-start.json", &cs) {
		v.CleanStart = &cs
	}
	if r.json("proofs/fixture-clean-end.json", &ce) {
		v.CleanEnd = &ce
	}
	return v
}

// table is a generic table built from JSON objects: columns are the union of
// their keys, in a preferred order first, then alphabetical.
type table struct {
	Cols []string
	Rows []tableRow
	Cut  int
}

type tableRow struct {
	Cells []string
	Class string // "denied" highlights a refused connection
}

func newTable(objs []map[string]any, prefer []string) *table {
	seen := map[string]bool{}
	t := &table{}
	for _, c := range prefer {
		for _, o := range objs {
			if _, ok := o[c]; ok && !seen[c] {
				seen[c] = true
				t.Cols = append(t.Cols, c)
			}
		}
	}
	var rest []string
	for _, o := range objs {
		for k := range o {
			if !seen[k] {
				seen[k] = true
				rest = append(rest, k)
			}
		}
	}
	sort.Strings(rest)
	t.Cols = append(t.Cols, rest...)
	if len(objs) > maxTableRows {
		t.Cut = len(objs) - maxTableRows
		objs = objs[:maxTableRows]
	}
	for _, o := range objs {
		row := tableRow{}
		for _, c := range t.Cols {
			if v, ok := o[c]; ok {
				row.Cells = append(row.Cells, scalar(v))
			} else {
				row.Cells = append(row.Cells, "")
			}
		}
		if d, _ := o["decision"].(string); d != "" && d != "allowed" {
			row.Class = "denied"
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// netView is network.jsonl (one line per connection attempt) and the
// report's network summary, when the run had them.
type netView struct {
	Present bool
	Summary []kv
	Log     *table
}

func (r reader) network(summary json.RawMessage) netView {
	var v netView
	if !isNull(summary) {
		v.Present = true
		v.Summary = flatten(summary, "")
	}
	text, ok := r.read("network.jsonl")
	if !ok {
		return v
	}
	v.Present = true
	var objs []map[string]any
	for i, l := range lines(string(text)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			*r.notes = append(*r.notes, fmt.Sprintf("network.jsonl line %d is not a JSON object", i+1))
			break
		}
		objs = append(objs, m)
	}
	v.Log = newTable(objs, []string{"seq", "time", "command", "via", "protocol", "host", "port", "resolved", "tls", "sni", "decision", "rule",
		"rule_source", "reason", "bytes_up", "bytes_down", "duration_ms", "limit"})
	return v
}

// viewSection is one recorded filesystem view.
type viewSection struct {
	Name   string
	Rows   []kv
	Mounts *table
}

// sandboxViews shows report.sandbox.view (Case's) and
// sandbox.verification_view when the run recorded them.
func sandboxViews(sandbox json.RawMessage) []viewSection {
	var s map[string]json.RawMessage
	if isNull(sandbox) || json.Unmarshal(sandbox, &s) != nil {
		return nil
	}
	var out []viewSection
	for _, v := range []struct{ key, name string }{{"view", "Case's filesystem view"}, {"verification_view", "The verification command's filesystem view"}} {
		if isNull(s[v.key]) {
			continue
		}
		rows, mounts := sandboxView(s[v.key])
		out = append(out, viewSection{Name: v.name, Rows: rows, Mounts: mounts})
	}
	return out
}

// sandboxView shows one view: its mounts as a table, everything else as rows.
func sandboxView(raw json.RawMessage) ([]kv, *table) {
	var view map[string]json.RawMessage
	if json.Unmarshal(raw, &view) != nil {
		return flatten(raw, ""), nil
	}
	var mounts *table
	var rows []kv
	keys := make([]string, 0, len(view))
	for k := range view {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var objs []map[string]any
		if k == "mounts" && json.Unmarshal(view[k], &objs) == nil {
			mounts = newTable(objs, []string{"path", "kind", "mode", "source"})
			continue
		}
		rows = append(rows, flatten(view[k], k)...)
	}
	return rows, mounts
}

// testsView is the verification's outcome and an excerpt of test.log.
type testsView struct {
	Class string
	Exit  string
	// Counts says what was counted and how many passed and failed: the
	// tests of the test report when the run read one, else what the
	// command's output counted (tests, or go test's packages).
	Counts  string
	LogName string
	Log     string
	LogCut  int // lines left out of the excerpt
	LogSize int
}

func (r reader) tests(rep *ctoharness.Report) testsView {
	t := rep.Tests
	v := testsView{Class: "blocked", Exit: "(none)"}
	switch t.Classification {
	case ctoharness.TestPass:
		v.Class = "pass"
	case ctoharness.TestNotRun:
		v.Class = "unknown"
	}
	if t.ExitCode != nil {
		v.Exit = fmt.Sprint(*t.ExitCode)
	}
	v.Counts = counts(t)
	name := t.LogPath
	if !safeName(name) {
		name = "test.log"
	}
	v.LogName = name
	v.LogSize = len(r.text(name))
	v.Log, v.LogCut = r.excerpt(name)
	return v
}

// excerpt is the start and the end of the run's log name, with how many
// lines between were left out.
func (r reader) excerpt(name string) (string, int) {
	ls := lines(r.text(name))
	cut := 0
	if len(ls) > testLogHead+testLogTail {
		cut = len(ls) - testLogHead - testLogTail
		ls = append(append(append([]string{}, ls[:testLogHead]...), fmt.Sprintf("… %d lines left out; the whole log is %s …", cut, name)), ls[len(ls)-testLogTail:]...)
	}
	return strings.Join(ls, "\n"), cut
}

// counts describes the verification's counts with their unit. The test
// report's per-test results win over the output's counts, which go test
// without -v gives per package, not per test.
func counts(t ctoharness.TestsRecord) string {
	if r := t.Results; r != nil && r.Problem == "" {
		s := fmt.Sprintf("%s: %d passed, %d failed", plural(r.Total, "test"), r.Pass, r.Fail)
		if r.Error > 0 {
			s += fmt.Sprintf(", %d errored", r.Error)
		}
		s += fmt.Sprintf(", %d skipped", r.Skip)
		if r.XFail > 0 {
			s += fmt.Sprintf(", %d expected failures", r.XFail)
		}
		return s + " (per test, from the test report " + r.Path + ")"
	}
	c := t.Counts
	if c == nil {
		return ""
	}
	unit := "tests"
	pkgs, tests := 0, 0
	for _, f := range strings.Split(t.CountsFormat, "+") {
		if strings.HasSuffix(f, "-packages") {
			pkgs++
		} else {
			tests++
		}
	}
	switch {
	case pkgs > 0 && tests == 0:
		unit = "Go packages, not tests"
	case pkgs > 0:
		unit = "tests and Go packages"
	}
	s := fmt.Sprintf("%d passed, %d failed, %d skipped (%s", c.Passed, c.Failed, c.Skipped, unit)
	if t.CountsFormat != "" {
		s += ", counted from the output as " + t.CountsFormat
	}
	return s + ")"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
