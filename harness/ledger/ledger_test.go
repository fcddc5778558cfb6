package ledger_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/ledger"
)

func cost(v float64) *float64 { return &v }

var day1 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func entry(id string) ledger.Entry {
	return ledger.Entry{
		At: day1, RunID: id, Stage: 3, Status: "pass", Outcome: "solved",
		Case: &ledger.Party{Agent: "qwen-code", Model: "qwen3", Requests: 3, InputTokens: 100, CacheReadTokens: 20,
			CacheWriteTokens: 5, OutputTokens: 40, CostUSD: cost(0.25), CostSource: "estimated"},
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if es, ps, err := ledger.Read(dir); err != nil || es != nil || ps != nil {
		t.Fatalf("a missing ledger: %v %v %v, want an empty one", es, ps, err)
	}
	a := entry("r1")
	b := ledger.Entry{At: day1.Add(time.Hour), RunID: "r2", TrialID: "t1", BatchID: "b1", Stage: 3, Status: "blocked",
		Blockers: []string{"GATE_X", "GATE_Y"},
		Case:     &ledger.Party{Agent: "command", Model: "m", CostSource: "not_reported"},
		Adversary: &ledger.Party{Agent: "fake", Model: "m2", Requests: 1, OutputTokens: 7, CostUSD: cost(0),
			CostSource: "reported"}}
	for _, e := range []ledger.Entry{a, b} {
		if err := ledger.Append(dir, e); err != nil {
			t.Fatal(err)
		}
	}
	got, problems, err := ledger.Read(dir)
	if err != nil || problems != nil {
		t.Fatalf("Read: %v, problems %v", err, problems)
	}
	if want := []ledger.Entry{a, b}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, ledger.File))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 2 {
		t.Errorf("%d lines, want 2:\n%s", n, data)
	}
	// A known cost of 0 stays 0, an unknown one stays null.
	if !strings.Contains(string(data), `"cost_usd":0,`) || !strings.Contains(string(data), `"cost_usd":null`) {
		t.Errorf("costs not kept as written:\n%s", data)
	}
}

func TestLedgerTornLine(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"r1", "r2"} {
		if err := ledger.Append(dir, entry(id)); err != nil {
			t.Fatal(err)
		}
	}
	// A crash mid-append: the last line has no end.
	f, err := os.OpenFile(filepath.Join(dir, ledger.File), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := `{"at":"2026-03-01T10:00:00Z","run_id":"r3","stage":3,"sta` + strings.Repeat("x", 300)
	if _, err := f.WriteString(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()

	got, problems, err := ledger.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].RunID != "r1" || got[1].RunID != "r2" {
		t.Errorf("entries %+v, want r1 and r2", got)
	}
	if len(problems) != 1 || problems[0].Line != 3 || problems[0].Err == "" || problems[0].Text != torn[:200] {
		t.Fatalf("problems %+v, want line 3 with its first 200 bytes", problems)
	}

	// The next append starts a line of its own: only the torn line is lost.
	if err := ledger.Append(dir, entry("r4")); err != nil {
		t.Fatal(err)
	}
	got, problems, err = ledger.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].RunID != "r4" || len(problems) != 1 || problems[0].Line != 3 {
		t.Errorf("after the next append: entries %+v, problems %+v", got, problems)
	}
}

func TestLedgerNotAnEntry(t *testing.T) {
	dir := t.TempDir()
	lines := "\n{}\n" + `{"run_id":"r1"}` + "\n[1]\n" + `{"at":"2026-03-01T10:00:00Z","run_id":"r2"}` + "\r\n"
	if err := os.WriteFile(filepath.Join(dir, ledger.File), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, problems, err := ledger.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].RunID != "r2" {
		t.Errorf("entries %+v, want r2", got)
	}
	var lineNos []int
	for _, p := range problems {
		lineNos = append(lineNos, p.Line)
	}
	if !reflect.DeepEqual(lineNos, []int{2, 3, 4}) {
		t.Errorf("problems %+v, want lines 2, 3, 4", problems)
	}
}

func TestLedgerLongLine(t *testing.T) {
	dir := t.TempDir()
	e := entry("long")
	for i := 0; i < 20000; i++ {
		e.Blockers = append(e.Blockers, fmt.Sprintf("CODE_%d", i))
	}
	if err := ledger.Append(dir, e); err != nil {
		t.Fatal(err)
	}
	got, problems, err := ledger.Read(dir)
	if err != nil || len(problems) != 0 || len(got) != 1 || len(got[0].Blockers) != 20000 {
		t.Fatalf("a line over 64 KiB: %d entries, problems %v, err %v", len(got), problems, err)
	}
}

func TestLedgerSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(elsewhere, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, ledger.File)); err != nil {
		t.Fatal(err)
	}
	err := ledger.Append(dir, entry("r1"))
	if err == nil || !strings.Contains(err.Error(), "symlink") || !strings.Contains(err.Error(), ledger.File) {
		t.Errorf("Append through a symlink: %v, want a refusal naming the ledger", err)
	}
	if data, _ := os.ReadFile(elsewhere); len(data) != 0 {
		t.Errorf("the link's target was written: %q", data)
	}
	if _, _, err := ledger.Read(dir); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Read through a symlink: %v, want a refusal", err)
	}
	// A dangling link too: O_CREAT must not create its target.
	dir2 := t.TempDir()
	target := filepath.Join(t.TempDir(), "absent")
	if err := os.Symlink(target, filepath.Join(dir2, ledger.File)); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Append(dir2, entry("r1")); err == nil {
		t.Error("Append through a dangling symlink succeeded")
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("the dangling link's target was created")
	}
}

func TestLedgerNotAFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ledger.File), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Append(dir, entry("r1")); err == nil {
		t.Error("Append to a directory succeeded")
	}
	if err := ledger.Append(filepath.Join(dir, "no-such-dir"), entry("r1")); err == nil || !strings.Contains(err.Error(), "runs directory must exist") {
		t.Errorf("Append in a missing runs directory: %v", err)
	}
}

func TestLedgerConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	const writers, each = 8, 50
	// Long lines make a torn or interleaved write likely if the lock failed.
	pad := strings.Repeat("p", 8<<10)
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				e := entry(fmt.Sprintf("w%d-%d", w, i))
				e.Outcome = pad
				if err := ledger.Append(dir, e); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, problems, err := ledger.Read(dir)
	if err != nil || len(problems) != 0 {
		t.Fatalf("err %v, problems %+v", err, problems)
	}
	seen := map[string]bool{}
	for _, e := range got {
		if e.Outcome != pad {
			t.Fatalf("entry %s was changed", e.RunID)
		}
		seen[e.RunID] = true
	}
	if len(got) != writers*each || len(seen) != writers*each {
		t.Errorf("%d entries (%d distinct), want %d", len(got), len(seen), writers*each)
	}
}

// sumEntries: two days; r1 has Case and adversary (one cost unknown), r2 an
// unknown Case cost, r3 no agent at all.
func sumEntries() []ledger.Entry {
	day2 := time.Date(2026, 3, 2, 23, 30, 0, 0, time.FixedZone("x", -3600)) // 2026-03-03 in UTC
	return []ledger.Entry{
		{At: day1, RunID: "r1", Status: "pass",
			Case:      &ledger.Party{Agent: "qwen-code", Model: "qwen3", Requests: 2, InputTokens: 100, CacheReadTokens: 10, CacheWriteTokens: 1, OutputTokens: 50, CostUSD: cost(0.25)},
			Adversary: &ledger.Party{Agent: "fake", Model: "qwen3", Requests: 1, InputTokens: 7, OutputTokens: 3}},
		{At: day1.Add(time.Hour), RunID: "r2", Status: "blocked",
			Case: &ledger.Party{Agent: "qwen-code", Model: "qwen3", Requests: 4, InputTokens: 200, OutputTokens: 60}},
		{At: day2, RunID: "r3", Status: "pass"},
		{At: day2, RunID: "r4", Status: "pass",
			Case: &ledger.Party{Agent: "qwen-code", Model: "big", Requests: 1, InputTokens: 1000, OutputTokens: 100, CostUSD: cost(1.5)}},
	}
}

func TestLedgerSum(t *testing.T) {
	row := func(k ledger.Key, runs, req int, in, cr, cw, out int64, c *float64, unknown, passes int) ledger.Row {
		return ledger.Row{Key: k, Runs: runs, Requests: req, InputTokens: in, CacheReadTokens: cr, CacheWriteTokens: cw,
			OutputTokens: out, CostUSD: c, UnknownCostRuns: unknown, Passes: passes}
	}
	for _, tc := range []struct {
		by   []string
		want []ledger.Row
	}{
		{nil, []ledger.Row{row(ledger.Key{}, 4, 8, 1307, 10, 1, 213, cost(1.75), 2, 3)}},
		{[]string{"day"}, []ledger.Row{
			row(ledger.Key{Day: "2026-03-01"}, 2, 7, 307, 10, 1, 113, cost(0.25), 2, 1),
			row(ledger.Key{Day: "2026-03-03"}, 2, 1, 1000, 0, 0, 100, cost(1.5), 0, 2),
		}},
		{[]string{"agent"}, []ledger.Row{
			row(ledger.Key{}, 1, 0, 0, 0, 0, 0, cost(0), 0, 1),
			row(ledger.Key{Agent: "fake"}, 1, 1, 7, 0, 0, 3, nil, 1, 1),
			row(ledger.Key{Agent: "qwen-code"}, 3, 7, 1300, 10, 1, 210, cost(1.75), 1, 2),
		}},
		{[]string{"model", "day"}, []ledger.Row{
			row(ledger.Key{Day: "2026-03-03"}, 1, 0, 0, 0, 0, 0, cost(0), 0, 1),
			row(ledger.Key{Model: "big", Day: "2026-03-03"}, 1, 1, 1000, 0, 0, 100, cost(1.5), 0, 1),
			row(ledger.Key{Model: "qwen3", Day: "2026-03-01"}, 2, 7, 307, 10, 1, 113, cost(0.25), 2, 1),
		}},
		{[]string{"role", "role"}, []ledger.Row{
			row(ledger.Key{}, 1, 0, 0, 0, 0, 0, cost(0), 0, 1),
			row(ledger.Key{Role: "adversary"}, 1, 1, 7, 0, 0, 3, nil, 1, 1),
			row(ledger.Key{Role: "case"}, 3, 7, 1300, 10, 1, 210, cost(1.75), 1, 2),
		}},
	} {
		got, err := ledger.Sum(sumEntries(), tc.by, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("by %v:\n%s\nwant\n%s", tc.by, rowsString(got), rowsString(tc.want))
		}
	}
}

func TestLedgerSumSinceUntil(t *testing.T) {
	// [2026-03-01 11:00, 2026-03-03): r2 only; the end is excluded.
	got, err := ledger.Sum(sumEntries(), []string{"agent"}, day1.Add(time.Hour), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.Row{{Key: ledger.Key{Agent: "qwen-code"}, Runs: 1, Requests: 4, InputTokens: 200, OutputTokens: 60, UnknownCostRuns: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", rowsString(got), rowsString(want))
	}
	got, err = ledger.Sum(sumEntries(), nil, day1.Add(time.Hour), day1.Add(time.Hour))
	if err != nil || len(got) != 0 {
		t.Errorf("an empty window: %v, %v", got, err)
	}
}

func TestLedgerSumUnknownGroup(t *testing.T) {
	_, err := ledger.Sum(nil, []string{"day", "week"}, time.Time{}, time.Time{})
	if err == nil || !strings.Contains(err.Error(), `"week"`) || !strings.Contains(err.Error(), "day, agent, model, role") {
		t.Errorf("err %v, want one naming the group and listing the valid ones", err)
	}
}

func rowsString(rows []ledger.Row) string {
	var b strings.Builder
	for _, r := range rows {
		c := "null"
		if r.CostUSD != nil {
			c = fmt.Sprint(*r.CostUSD)
		}
		fmt.Fprintf(&b, "  %+v cost=%s\n", r, c)
	}
	return b.String()
}
