package validators_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/validators"
)

// resealRun makes a forged run directory consistent again, as anyone who can
// write it can: the event chain rebuilt, the digests and the checksum
// recomputed, report.md rendered again.
func resealRun(t *testing.T, dir string, events func([]ctoharness.Event) []ctoharness.Event) {
	t.Helper()
	var rep ctoharness.Report
	raw, _ := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if events != nil {
		p := filepath.Join(dir, evidence.EventsFile)
		data, _ := os.ReadFile(p)
		var evs []ctoharness.Event
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e ctoharness.Event
			json.Unmarshal([]byte(line), &e)
			evs = append(evs, e)
		}
		evs = events(evs)
		prev := evidence.GenesisHash(rep.RunID, rep.Freshness.Nonce)
		var out []byte
		for i, e := range evs {
			e.Seq, e.Prev = i+1, prev
			b, _ := json.Marshal(e)
			prev = evidence.LineHash(b)
			out = append(append(out, b...), '\n')
		}
		os.WriteFile(p, out, 0o644)
		rep.Freshness.FinalEventHash, rep.Freshness.Events = prev, len(evs)
	}
	rep.ArtifactDigests = nil
	os.WriteFile(filepath.Join(dir, evidence.ReportMD), harnessMarkdown(&rep), 0o644)
	d, err := evidence.Digests(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep.ArtifactDigests = d
	out, _ := json.MarshalIndent(rep, "", "  ")
	os.WriteFile(filepath.Join(dir, evidence.ReportJSON), append(out, '\n'), 0o644)
	sum, _ := evidence.FileSHA256(filepath.Join(dir, evidence.ReportJSON))
	os.WriteFile(filepath.Join(dir, evidence.ReportSum), []byte(sum+"  report.json\n"), 0o644)
}

func wantCheck(t *testing.T, res validators.Result, check string) {
	t.Helper()
	if res.OK {
		t.Fatalf("the forged run validated")
	}
	for _, f := range res.Errors {
		if f.Check == check {
			return
		}
	}
	t.Fatalf("check %s did not fire: %v", check, res.Errors)
}

// A hunk with a plain ---/+++ header, which git apply applies, adds a file
// outside the allowed paths to the patch of a passing run.
func TestRewrittenPatchIsRefused(t *testing.T) {
	run, set, _ := passRun(t)
	f, _ := os.OpenFile(filepath.Join(run, evidence.PatchFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("--- /dev/null\n+++ b/OUTSIDE_ALLOWED.txt\n@@ -0,0 +1 @@\n+smuggled\n")
	f.Close()
	resealRun(t, run, nil)
	res := validators.Run(context.Background(), run, set, validators.RunOptions{ExpectPass: true})
	wantCheck(t, res, "patch_rederived")
	if got := validators.PatchPaths([]byte("--- /dev/null\n+++ b/OUTSIDE_ALLOWED.txt\n")); len(got) != 1 || got[0] != "OUTSIDE_ALLOWED.txt" {
		t.Fatalf("PatchPaths = %v", got)
	}
}

// The same patch without the smuggled hunk, but with a changed-file list that
// no longer matches the fixture's commits.
func TestChangedFilesMustMatchTheFixture(t *testing.T) {
	run, set, _ := passRun(t)
	editJSON(t, filepath.Join(run, evidence.ReportJSON), func(m map[string]any) { m["changed_files"] = []any{} })
	os.WriteFile(filepath.Join(run, evidence.PatchFile), nil, 0o644)
	resealRun(t, run, nil)
	wantCheck(t, validators.Run(context.Background(), run, set, validators.RunOptions{ExpectPass: true}), "patch_rederived")
}

// report.md must be the rendering of report.json.
func TestEditedReportMarkdownIsRefused(t *testing.T) {
	run, set, _ := passRun(t)
	p := filepath.Join(run, evidence.ReportMD)
	data, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(data), "pass", "PASS (all good)", 1)), 0o644)
	d, _ := evidence.Digests(run)
	editJSON(t, filepath.Join(run, evidence.ReportJSON), func(m map[string]any) { m["artifact_digests"] = d })
	sum, _ := evidence.FileSHA256(filepath.Join(run, evidence.ReportJSON))
	os.WriteFile(filepath.Join(run, evidence.ReportSum), []byte(sum+"  report.json\n"), 0o644)
	wantCheck(t, validators.Run(context.Background(), run, set, validators.RunOptions{ExpectPass: true}), "report_markdown")
}

// Case events reordered in the log after the fact are refused.
func TestForgedCaseEventOrderIsRefused(t *testing.T) {
	run, set, _ := passRun(t)
	resealRun(t, run, func(evs []ctoharness.Event) []ctoharness.Event {
		var started, finished int
		for i, e := range evs {
			switch e.Type {
			case ctoharness.EvCaseStarted:
				started = i
			case ctoharness.EvCaseFinished:
				finished = i
			}
		}
		evs[started].Type, evs[finished].Type = evs[finished].Type, evs[started].Type
		evs[started].Data, evs[finished].Data = json.RawMessage(`{"status":"ok"}`), json.RawMessage(`{}`)
		return evs
	})
	wantCheck(t, validators.Run(context.Background(), run, set, validators.RunOptions{ExpectPass: true}), "case_event_grammar")
}

// A SOURCE_MUTATED run rewritten to pass, with its blockers gone, its event
// log rebuilt and every digest recomputed, does not validate as a pass.
func TestSourceMutatedRunForgedAsPass(t *testing.T) {
	o := replayOpts(t)
	var row fixtures.Row
	rows, _ := fixtures.Matrix()
	for _, r := range rows {
		if r.Name == "source-mutated" {
			row = r
		}
	}
	res := validators.Replay(context.Background(), row, o)
	if !res.OK {
		t.Fatalf("row: %v", res.Errors)
	}
	for _, level := range []string{"report", "report+proof"} {
		t.Run(level, func(t *testing.T) {
			dir := res.RunDir
			keep := filepath.Join(t.TempDir(), "keep")
			copyTree(t, dir, keep)
			defer func() { os.RemoveAll(dir); copyTree(t, keep, dir) }()
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
				m["status"], m["blockers"], m["source_repository_mutated"] = "pass", []any{}, false
			})
			if level == "report+proof" {
				editJSON(t, filepath.Join(dir, evidence.NonMutation), func(m map[string]any) {
					m["mutated"], m["differences"], m["difference_count"] = false, []any{}, float64(0)
				})
			}
			resealRun(t, dir, func(evs []ctoharness.Event) []ctoharness.Event {
				var out []ctoharness.Event
				for _, e := range evs {
					if e.Type == ctoharness.EvRunBlocked {
						continue
					}
					if e.Type == ctoharness.EvRunFinished {
						e.Data = json.RawMessage(`{"status":"pass"}`)
					}
					out = append(out, e)
				}
				return out
			})
			wantCheck(t, validators.Run(context.Background(), dir, o.Schemas, validators.RunOptions{ExpectPass: true}), "source_non_mutation")
		})
	}
}
