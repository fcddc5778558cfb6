package htmlreport_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
)

// An event whose data is nested past the ingest's limit never reaches the
// page's walks: the timeline stops before it with a note, and rendering
// stays cheap (a line 9,000 deep once took tens of seconds).
func TestRenderStopsAtADeepEvent(t *testing.T) {
	rep := baseReport(ctoharness.StatusBlocked, nil, nil)
	log := events(t, "run_started", "case_process_started", "case.started")
	deep := `{"seq":4,"time":"2026-01-02T03:04:06Z","run_id":"r","type":"case.log","prev":"x","data":{"message":"DEEPMARK","d":` +
		strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + "}}\n"
	raw, dir := writeRun(t, rep, map[string]string{"events.normalized.jsonl": log + deep})
	start := time.Now()
	page, err := htmlreport.Render(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("rendering took %s", d)
	}
	if !strings.Contains(string(page), "events.normalized.jsonl line 4 is not an event: nested too deep") {
		t.Error("the page does not say why the event log stops at line 4")
	}
	if strings.Contains(string(page), "DEEPMARK") || !strings.Contains(string(page), "case.started") {
		t.Error("the page shows the deep event, or not the events before it")
	}
}

// A report.json nested past any the harness writes is refused before it is
// decoded: the page walks the agent record it carries.
func TestRenderRefusesADeepReport(t *testing.T) {
	rep := baseReport(ctoharness.StatusPass, nil, nil)
	raw, dir := writeRun(t, rep, nil)
	deep := append(raw[:len(raw)-1:len(raw)-1], []byte(`,"agent":{"name":"a","x":`+strings.Repeat("[", 9000)+strings.Repeat("]", 9000)+"}}")...)
	if !json.Valid(deep) {
		t.Fatal("the test's report is not JSON")
	}
	if _, err := htmlreport.Render(deep, dir); err == nil || !strings.Contains(err.Error(), "nested too deep") {
		t.Fatalf("Render = %v, want a refusal of the nesting", err)
	}
	if _, err := htmlreport.Render(raw, dir); err != nil {
		t.Fatalf("the same report without the nesting: %v", err)
	}
}
