package backend

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Case's stdout is read strictly: a line that could be read two ways, or is
// nested past the limit, is malformed; it reaches neither OnEvent nor the
// raw event log, and the record of it names where and why, not what it said.
func TestRunIngestsStrictly(t *testing.T) {
	deep := `{"type":"case.log","message":"MARK","deep":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + "}"
	lines := []string{
		`{"type":"case.started"}`,
		`{"TYPE":"case.finished","status":"MARK"}`,
		`{"type":"case.log","type":"case.finished","status":"MARK"}`,
		`{"type":"case.log","message":"m","a":{"b":1,"b":"MARK"}}`,
		`{"type":"case.verdict","status":"MARK"}`,
		deep,
		`{"type":"case.log","message":"kept"}`,
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "events")
	if err := os.WriteFile(script, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var got []ctoharness.EventType
	out, err := Run(context.Background(), Input{Argv: []string{"cat", script}, Fixture: dir, Timeout: 30 * time.Second,
		Stdout: open("stdout"), Stderr: open("stderr"), Events: open("events.jsonl"),
		OnEvent: func(e CaseEvent) { got = append(got, e.Type) }})
	if err != nil {
		t.Fatal(err)
	}
	if out.MalformedN != 5 || len(out.Malformed) != 3 {
		t.Fatalf("%d malformed (%q), want 5", out.MalformedN, out.Malformed)
	}
	for i, want := range []string{"stdout line 2: ", "stdout line 3: ", "stdout line 4: "} {
		if !strings.HasPrefix(out.Malformed[i], want) || strings.Contains(out.Malformed[i], "MARK") {
			t.Fatalf("malformed record %q: want it to start %q and not to quote the line", out.Malformed[i], want)
		}
	}
	if len(got) != 2 || got[0] != ctoharness.EvCaseStarted || got[1] != ctoharness.EvCaseLog || out.Events != 2 {
		t.Fatalf("accepted %v (%d)", got, out.Events)
	}
	if out.Types[ctoharness.EvCaseFinished] {
		t.Fatal("a refused line counted as case.finished")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if want := lines[0] + "\n" + lines[6] + "\n"; string(raw) != want {
		t.Fatalf("raw event log:\n%s\nwant:\n%s", raw, want)
	}
}

// Translated events (a coding agent's own stream) are held to the same
// depth and key rules.
func TestRunChecksTranslatedEvents(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	deep := CaseEvent{Type: ctoharness.EvCaseLog, Raw: []byte(`{"type":"case.log","message":"m","x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "}")}
	fine := CaseEvent{Type: ctoharness.EvCaseLog, Raw: []byte(`{"type":"case.log","message":"m"}`)}
	out, err := Run(context.Background(), Input{Argv: []string{"true"}, Fixture: dir, Timeout: 30 * time.Second,
		Stdout: open("stdout"), Stderr: open("stderr"), Events: open("events.jsonl"),
		Translate: func([]byte) []CaseEvent { return nil },
		AfterExit: func() []CaseEvent { return []CaseEvent{fine, deep} }})
	if err != nil {
		t.Fatal(err)
	}
	if out.Events != 1 || out.MalformedN != 1 || !strings.HasPrefix(out.Malformed[0], "translated event 2: ") {
		t.Fatalf("%d accepted, %d malformed (%q)", out.Events, out.MalformedN, out.Malformed)
	}
}
