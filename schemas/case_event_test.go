package schemas_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/schemas"
)

// The Case event schema's type enum is exactly the case.* event types.
func TestCaseEventEnum(t *testing.T) {
	src, err := schemas.Source(schemas.CaseEvent)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Type struct {
				Enum []string `json:"enum"`
			} `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range ctoharness.AllEventTypes() {
		if strings.HasPrefix(string(e), "case.") {
			want = append(want, string(e))
		}
	}
	got := doc.Properties.Type.Enum
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("case-event type enum %v, Go has %v", got, want)
	}
}

// Each Case event type refuses a wrongly typed or missing field.
func TestCaseEventFieldsTyped(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"type":"case.file_changed","path":123}`,
		`{"type":"case.file_changed"}`,
		`{"type":"case.file_changed","path":""}`,
		`{"type":"case.command","command":["rm","-rf"]}`,
		`{"type":"case.log"}`,
		`{"type":"case.finished"}`,
		`{"type":"case.finished","status":true}`,
		`{"type":"case.started","model":7}`,
		`{"type":"case.other"}`,
		`{"path":"x"}`,
	} {
		if err := set.Validate(schemas.CaseEvent, []byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
