package task_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/task"
)

// The source path counts as named only where it is that path (or one below
// it), never where it is the beginning or the end of another name.
func TestNamesPathAtPathBoundaries(t *testing.T) {
	const src = "/tmp/uuid"
	for _, tc := range []struct {
		text  string
		names bool
	}{
		{"/tmp/uuid", true},
		{"work in /tmp/uuid/pkg please", true},
		{`{"fixture":"/tmp/uuid"}`, true},
		{"cd /tmp/uuid.", true},
		{"cd /tmp/uuid. Then", true},
		{"(/tmp/uuid)", true},
		{"//tmp/uuid/x", true},
		{"git -C /tmp/uuid status", true},
		{"/tmp/uuid-runs/work/x/fixture", false},
		{"/tmp/uuid_old", false},
		{"/tmp/uuid2", false},
		{"/tmp/uuid.bak", false},
		{"/tmp/uuid..x", false},
		{"/tmp/uuidé", false},
		{"/var/tmp/uuid/x", false},
		{"/tmp/uuid-runs and /tmp/uuid", true},
		{"nothing here", false},
	} {
		if got := task.NamesPath(tc.text, src); got != tc.names {
			t.Errorf("NamesPath(%q, %q) = %v, want %v", tc.text, src, got, tc.names)
		}
	}
}

// A source path with bytes the JSON encoder escapes is still found in the
// encoded contract.
func TestRevealsPathSeesTheEncodedForm(t *testing.T) {
	const src = "/tmp/a&b<c>"
	data, err := json.Marshal(map[string]string{"prompt": "look at " + src + "/main.go"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), src) {
		t.Fatalf("the encoder no longer escapes %q: %s", src, data)
	}
	if !task.RevealsPath(data, src) {
		t.Fatalf("RevealsPath(%s, %q) = false", data, src)
	}
	beside, _ := json.Marshal(map[string]string{"fixture": src + "-runs/work/x/fixture"})
	if task.RevealsPath(beside, src) {
		t.Fatalf("RevealsPath(%s, %q) = true for a sibling", beside, src)
	}
}
