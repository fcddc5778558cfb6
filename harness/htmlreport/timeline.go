package htmlreport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// eventView is one timeline row. Took is the time until the next event,
// which for a harness step is how long the step that follows it ran.
type eventView struct {
	Seq     int
	At      string // offset from the first event
	Took    string
	Type    string
	Kind    string // "harness", "case", "blocked", "finished"
	Summary string
	Slow    bool // took at least a tenth of the run
}

func timeline(events []ctoharness.Event, notes *[]string) []eventView {
	if len(events) == 0 {
		return nil
	}
	start, end := events[0].Time, events[len(events)-1].Time
	total := end.Sub(start)
	shown := events
	if len(shown) > maxEvents {
		*notes = append(*notes, fmt.Sprintf("the timeline shows the first %d of %d events", maxEvents, len(events)))
		shown = shown[:maxEvents]
	}
	out := make([]eventView, 0, len(shown))
	for i, e := range shown {
		v := eventView{Seq: e.Seq, At: "+" + dur(e.Time.Sub(start)), Type: string(e.Type), Kind: eventKind(e.Type), Summary: summary(e.Data)}
		if i+1 < len(events) {
			d := events[i+1].Time.Sub(e.Time)
			v.Took = dur(d)
			v.Slow = total > 0 && d*10 >= total
		}
		out = append(out, v)
	}
	return out
}

func eventKind(t ctoharness.EventType) string {
	switch {
	case t == ctoharness.EvRunBlocked:
		return "blocked"
	case t == ctoharness.EvRunFinished:
		return "finished"
	case strings.HasPrefix(string(t), "case."):
		return "case"
	}
	return "harness"
}

// summary prints an event's data as "key=value" pairs, keys sorted.
func summary(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return clip(string(raw))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+scalar(m[k]))
	}
	return clip(strings.Join(parts, " "))
}

// turnView is one entry of Case's conversation: what it said, called, ran,
// changed and got back, and what the harness refused it.
type turnView struct {
	Seq   int
	At    string // offset from the first event
	Role  string // "start", "assistant", "user", "tool", "result", "error", "refused", "file", "finish", "event"
	Title string
	Text  string
	Extra []kv
	// Refused: the harness refused a command of this call (a command_refused
	// event lies between the call and its result); Failed: its result is an
	// error.
	Refused, Failed bool
	Log             string // the file holding the untruncated content, when cut
	LogHere         bool   // the run directory holds Log (else it is named, not linked)
}

// The fields each Case event is known to carry as its main content; every
// other field is shown beside it, so adapters can add fields freely.
var mainFields = map[ctoharness.EventType][]string{
	ctoharness.EvCaseLog:         {"message", "text"},
	ctoharness.EvCaseCommand:     {"command"},
	ctoharness.EvCaseFileChanged: {"path"},
	ctoharness.EvCaseFinished:    {"status"},
}

// agentStream is where an agent's whole native stream is kept (the
// conversation events cap tool output).
const agentStream = "backend/agent.stream.jsonl"

// conversation is Case's events in order, with the harness's refusals of
// its commands among them. Tool results are paired with their calls by
// call_id: a call whose result is an error is marked failed, and one during
// which the harness refused a command is marked refused.
func conversation(events []ctoharness.Event) []turnView {
	var out []turnView
	calls := map[string]int{} // call_id -> index in out
	var start time.Time
	if len(events) > 0 {
		start = events[0].Time
	}
	for _, e := range events {
		if !strings.HasPrefix(string(e.Type), "case.") && e.Type != ctoharness.EvCommandRefused {
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(e.Data, &m)
		t := turnView{Seq: e.Seq, At: "+" + dur(e.Time.Sub(start))}
		used := map[string]bool{"call_id": true, "kind": true, "truncated": true}
		take := func(keys ...string) string {
			for _, k := range keys {
				if s, ok := m[k].(string); ok && s != "" {
					used[k] = true
					return s
				}
			}
			return ""
		}
		id, _ := m["call_id"].(string)
		switch e.Type {
		case ctoharness.EvCaseStarted:
			t.Role, t.Title = "start", "Case started"
		case ctoharness.EvCommandRefused:
			t.Role = "refused"
			t.Title = "REFUSED by the harness: " + take("reason")
			t.Text = take("command")
			used["argv"], used["path"], used["shell"] = true, true, true
			// The call in flight is the one the refusal hit.
			for i := len(out) - 1; i >= 0; i-- {
				if out[i].Role == "tool" || out[i].Role == "file" {
					out[i].Refused = true
					break
				}
				if out[i].Role == "result" || out[i].Role == "error" {
					break
				}
			}
		case ctoharness.EvCaseLog:
			switch m["kind"] {
			case "tool_call":
				tool := take("tool")
				t.Role, t.Title = "tool", "tool call: "+tool
				t.Text = take("arguments")
				used["message"] = true
			case "tool_result":
				tool := take("tool")
				t.Role, t.Title = "result", "result"
				if tool != "" {
					t.Title += " of " + tool
				}
				if m["is_error"] == true {
					t.Role, t.Title, t.Failed = "error", t.Title+": ERROR", true
				}
				used["is_error"] = true
				t.Text = take("message")
				if i, ok := calls[id]; ok && id != "" {
					out[i].Failed = out[i].Failed || t.Failed
					t.Refused = out[i].Refused
				}
			default:
				t.Role = "assistant"
				if r := take("role"); r != "" {
					t.Role = r
				}
				t.Title = t.Role
				t.Text = take(mainFields[e.Type]...)
			}
		case ctoharness.EvCaseCommand:
			t.Role, t.Title = "tool", "command"
			if tool := take("tool"); tool != "" {
				t.Title = "tool call: " + tool
			}
			t.Text = take(mainFields[e.Type]...)
		case ctoharness.EvCaseFileChanged:
			tool := take("tool")
			t.Role, t.Title = "file", "write "+take("path")
			if tool != "" {
				t.Title += " (tool call: " + tool + ")"
			}
			if m["outside_fixture"] == true {
				t.Title += ": OUTSIDE the fixture"
			}
			if m["source"] == "fixture_scan" {
				t.Title = "changed " + take("path") + " (found by the harness's scan of the fixture)"
				used["source"] = true
			}
		case ctoharness.EvCaseFinished:
			t.Role, t.Title = "finish", "Case finished: "+take("status")
		default:
			t.Role, t.Title = "event", string(e.Type)
		}
		if m["truncated"] == true {
			t.Log = agentStream
		}
		if r := []rune(t.Text); len(r) > maxCaseMessage {
			t.Text = string(r[:maxCaseMessage]) + fmt.Sprintf("\n… (%d more characters)", len(r)-maxCaseMessage)
			t.Log = agentStream
		}
		for _, row := range flatten(e.Data, "") {
			top, _, _ := strings.Cut(row.K, ".")
			if !used[top] && row.K != "" {
				t.Extra = append(t.Extra, row)
			}
		}
		if id != "" && (t.Role == "tool" || t.Role == "file") {
			calls[id] = len(out)
		}
		out = append(out, t)
	}
	// Only refusals and nothing of Case's: no conversation to show.
	for _, t := range out {
		if t.Role != "refused" {
			return out
		}
	}
	return nil
}
