package validators_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/validators"
)

// The validator reads the event log and Case's raw events with the harness's
// strict event reading: a line nested deeper than the limit, or one with a
// duplicate or case-variant key, is refused (and cheaply: a line nested
// 9,000 deep once took the page check tens of seconds to render).
func TestValidateReadsEventsStrictly(t *testing.T) {
	run, set, _ := passRun(t)
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000) // within encoding/json's own limit of 10,000
	tests := []struct {
		name     string
		artifact string
		old, new string
		check    string
		want     string
	}{
		{"deep data in the event log", evidence.EventsFile, `"type":"case.finished"`, `"type":"case.finished","deep":` + deep, "event_chain", "nested too deep"},
		{"duplicate key in the event log", evidence.EventsFile, `"type":"case.finished"`, `"type":"case.log","type":"case.finished"`, "event_chain", "duplicate key"},
		{"case-variant key in the event log", evidence.EventsFile, `"type":"case.finished"`, `"type":"case.finished","TYPE":"case.log"`, "event_chain", "duplicate key"},
		{"deep raw Case event", evidence.CaseEvents, `"type":"case.finished"`, `"type":"case.finished","deep":` + deep, "artifact_schemas", "nested too deep"},
		{"raw Case event typed in upper case", evidence.CaseEvents, `"type":"case.finished"`, `"TYPE":"case.finished"`, "artifact_schemas", `no "type" key`},
		{"raw Case event of an unknown type", evidence.CaseEvents, `"type":"case.finished"`, `"type":"case.verdict"`, "artifact_schemas", "unknown event type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(run))
			copyTree(t, run, dir)
			p := filepath.Join(dir, filepath.FromSlash(tc.artifact))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tc.old) {
				t.Fatalf("%s has no %s", tc.artifact, tc.old)
			}
			if err := os.WriteFile(p, []byte(strings.Replace(string(data), tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res := validators.Run(context.Background(), dir, set, validators.RunOptions{})
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("validation took %s", d)
			}
			for _, f := range res.Errors {
				if f.Check == tc.check && f.Artifact == tc.artifact && strings.Contains(f.Message, tc.want) {
					return
				}
			}
			t.Fatalf("no %s finding on %s saying %q: %v", tc.check, tc.artifact, tc.want, res.Errors)
		})
	}
}
