package caseevent

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// nested wraps a case.log event's "deep" field in n levels of arrays, so the
// event has n+1 levels.
func nested(n int) string {
	return `{"type":"case.log","message":"m","deep":` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}"
}

func TestParse(t *testing.T) {
	flat := `{"type":"case.log","message":"` + strings.Repeat("x", MaxLine-100) + `"}`
	var keys strings.Builder
	keys.WriteString(`{"type":"case.log","message":"m"`)
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&keys, `,"k%d":%d`, i, i)
	}
	keys.WriteString("}")
	tests := []struct {
		name string
		line string
		want ctoharness.EventType
		err  error
	}{
		{"plain", `{"type":"case.finished","status":"ok"}`, ctoharness.EvCaseFinished, nil},
		{"white space around", " \t{\"type\":\"case.started\"}\r\n", ctoharness.EvCaseStarted, nil},
		{"escaped key spelling type", `{"\u0074ype":"case.log","message":"m"}`, ctoharness.EvCaseLog, nil},
		{"large flat event", flat, ctoharness.EvCaseLog, nil},
		{"many keys", keys.String(), ctoharness.EvCaseLog, nil},
		{"depth exactly at the limit", nested(MaxDepth - 1), ctoharness.EvCaseLog, nil},
		{"depth one over the limit", nested(MaxDepth), "", ErrTooDeep},
		{"objects one over the limit", `{"type":"case.log","a":` + strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth) + "}", "", ErrTooDeep},
		{"depth 10000", nested(10000), "", ErrTooDeep},
		{"type in upper case only", `{"TYPE":"case.finished","status":"ok"}`, "", ErrNoType},
		{"type in mixed case only", `{"Type":"case.finished","status":"ok"}`, "", ErrNoType},
		{"type and a case variant", `{"type":"case.log","TYPE":"case.finished","message":"m"}`, "", ErrDuplicateKey},
		{"type with the Kelvin sign", `{"type":"case.log","message":"m","\u212Aey":1,"key":2}`, "", ErrDuplicateKey},
		{"duplicate type", `{"type":"case.log","type":"case.finished"}`, "", ErrDuplicateKey},
		{"duplicate through an escape", `{"type":"case.log","type\u0000":1,"t\u0079pe":"case.finished"}`, "", ErrDuplicateKey},
		{"duplicate nested", `{"type":"case.log","message":"m","a":[1,{"b":{"c":1,"c":2}}]}`, "", ErrDuplicateKey},
		{"same key in sibling objects", `{"type":"case.log","message":"m","a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}`, ctoharness.EvCaseLog, nil},
		{"nested type does not count", `{"message":"m","a":{"type":"case.log"}}`, "", ErrNoType},
		{"type not a string", `{"type":["case.log"]}`, "", ErrNoType},
		{"type null", `{"type":null}`, "", ErrNoType},
		{"unknown type", `{"type":"case.verdict","status":"pass"}`, "", ErrUnknownType},
		{"harness event type", `{"type":"run_finished","status":"pass"}`, "", ErrUnknownType},
		{"not an object", `["type","case.log"]`, "", ErrNotObject},
		{"a string", `"case.log"`, "", ErrNotObject},
		{"empty", "  ", "", ErrEmpty},
		{"too long", `{"type":"case.log","message":"` + strings.Repeat("x", MaxLine) + `"}`, "", ErrTooLarge},
		{"two objects", `{"type":"case.log"}{"type":"case.finished"}`, "", ErrSyntax},
		{"trailing garbage", `{"type":"case.log"} x`, "", ErrSyntax},
		{"cut short", `{"type":"case.log","message":"m"`, "", ErrSyntax},
		{"trailing comma", `{"type":"case.log",}`, "", ErrSyntax},
		{"huge number is still JSON", `{"type":"case.log","message":"m","n":1e99999}`, ctoharness.EvCaseLog, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.line))
			if tc.err == nil {
				if err != nil || got != tc.want {
					t.Fatalf("Parse = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.err) || got != "" {
				t.Fatalf("Parse = %q, %v; want error %v", got, err, tc.err)
			}
		})
	}
}

// A line nested far beyond the limit is refused after reading only the
// first levels: its cost does not grow with its depth.
func TestDeepLineIsCheap(t *testing.T) {
	deep := []byte(strings.Repeat("[", 10_000_000))
	start := time.Now()
	if err := Check(deep, MaxDepth); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("Check = %v, want %v", err, ErrTooDeep)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("refusing a deep line took %s", d)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		data  string
		depth int
		err   error
	}{
		{`{"seq":1,"data":{"a":[1]}}`, 3, nil},
		{`{"seq":1,"data":{"a":[1]}}`, 2, ErrTooDeep},
		{`1`, 0, nil},
		{`[]`, 0, ErrTooDeep},
		{`{"seq":1,"data":{"a":1,"A":2}}`, 3, ErrDuplicateKey},
		{`{"a":1} {}`, 3, ErrSyntax},
		{``, 3, ErrSyntax},
	}
	for _, tc := range tests {
		if err := Check([]byte(tc.data), tc.depth); !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("Check(%s, %d) = %v, want %v", tc.data, tc.depth, err, tc.err)
		}
	}
}

// No error quotes the line: a refused line's text must not reach a blocker
// message, and through it the report and the event log.
func TestErrorsDoNotQuoteTheLine(t *testing.T) {
	for _, line := range []string{
		`{"type":"case.log","MARKER":1,"marker":2}`,
		`{"type":"MARKER"}`,
		`{"TYPE":"MARKER"}`,
		`{"type":"case.log","MARKER":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "}",
		`{"type":"case.log"} MARKER`,
		`MARKER`,
		`{"type":"case.log","m":"` + strings.Repeat("MARKER", MaxLine/6) + `"}`,
	} {
		_, err := Parse([]byte(line))
		if err == nil || strings.Contains(strings.ToUpper(err.Error()), "MARKER") {
			t.Errorf("Parse(%.60s…) = %v; want an error that does not quote the line", line, err)
		}
	}
}

// Type is Parse without the size limit: an agent's translated event may be
// longer than a line of Case's stdout, but not deeper or ambiguous.
func TestType(t *testing.T) {
	long := []byte(`{"type":"case.command","command":"` + strings.Repeat("x", 2*MaxLine) + `"}`)
	if _, err := Parse(long); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Parse of a long event = %v, want %v", err, ErrTooLarge)
	}
	if got, err := Type(long); err != nil || got != ctoharness.EvCaseCommand {
		t.Fatalf("Type of a long event = %q, %v", got, err)
	}
	if _, err := Type([]byte(nested(MaxDepth))); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("Type of a deep event = %v, want %v", err, ErrTooDeep)
	}
	if _, err := Type([]byte(`{"type":"case.log","Message":"a","message":"b"}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("Type of an ambiguous event = %v, want %v", err, ErrDuplicateKey)
	}
}
