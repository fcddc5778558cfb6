package htmlreport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

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

// turnView is one entry of Case's conversation: what it said, ran, changed.
type turnView struct {
	Seq   int
	Role  string // "start", "assistant", "user", "tool", "file", "finish", "event"
	Title string
	Text  string
	Extra []kv
}

// The fields each Case event is known to carry as its main content; every
// other field is shown beside it, so adapters can add fields freely.
var mainFields = map[ctoharness.EventType][]string{
	ctoharness.EvCaseLog:         {"message", "text"},
	ctoharness.EvCaseCommand:     {"command"},
	ctoharness.EvCaseFileChanged: {"path"},
	ctoharness.EvCaseFinished:    {"status"},
}

func conversation(events []ctoharness.Event) []turnView {
	var out []turnView
	for _, e := range events {
		if !strings.HasPrefix(string(e.Type), "case.") {
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(e.Data, &m)
		t := turnView{Seq: e.Seq}
		used := map[string]bool{}
		take := func(keys ...string) string {
			for _, k := range keys {
				if s, ok := m[k].(string); ok && s != "" {
					used[k] = true
					return s
				}
			}
			return ""
		}
		switch e.Type {
		case ctoharness.EvCaseStarted:
			t.Role, t.Title = "start", "Case started"
		case ctoharness.EvCaseLog:
			t.Role = "assistant"
			if r := take("role"); r != "" {
				t.Role = r
			}
			t.Title = t.Role
			t.Text = take(mainFields[e.Type]...)
		case ctoharness.EvCaseCommand:
			t.Role, t.Title = "tool", "command"
			if tool := take("tool"); tool != "" {
				t.Title = "tool call: " + tool
			}
			t.Text = take(mainFields[e.Type]...)
		case ctoharness.EvCaseFileChanged:
			t.Role, t.Title = "file", "changed "+take("path")
		case ctoharness.EvCaseFinished:
			t.Role, t.Title = "finish", "Case finished: "+take("status")
		default:
			t.Role, t.Title = "event", string(e.Type)
		}
		if r := []rune(t.Text); len(r) > maxCaseMessage {
			t.Text = string(r[:maxCaseMessage]) + fmt.Sprintf("\n… (%d more characters)", len(r)-maxCaseMessage)
		}
		for _, row := range flatten(e.Data, "") {
			top, _, _ := strings.Cut(row.K, ".")
			if !used[top] && row.K != "" {
				t.Extra = append(t.Extra, row)
			}
		}
		out = append(out, t)
	}
	return out
}
