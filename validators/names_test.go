package validators_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"testing"

	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/validators"
)

// path_b64 is the authority on a name: one that does not decode to the name
// path shows, or names another file, is refused even with the run resealed.
func TestForgedPathB64IsRefused(t *testing.T) {
	for name, c := range map[string]struct{ b64, check string }{
		"another name": {base64.StdEncoding.EncodeToString([]byte("docs/other\xff.md")), "changed_files_allowed"},
		"not base64":   {"%%%", "report_schema"},
	} {
		t.Run(name, func(t *testing.T) {
			run, set, _ := passRun(t)
			editJSON(t, filepath.Join(run, evidence.ReportJSON), func(m map[string]any) {
				m["changed_files"].([]any)[0].(map[string]any)["path_b64"] = c.b64
			})
			resealRun(t, run, nil)
			wantCheck(t, validators.Run(context.Background(), run, set, validators.RunOptions{ExpectPass: true}), c.check)
		})
	}
}

// A patch header git quotes (a non-ASCII name) is read back exactly: a
// quoted header for a file the report does not list is caught.
func TestQuotedPatchHeaderIsRead(t *testing.T) {
	got := validators.PatchPaths([]byte("diff --git \"a/docs/caf\\303\\251.md\" \"b/docs/caf\\303\\251.md\"\n--- /dev/null\n+++ \"b/docs/caf\\303\\251.md\"\n" +
		"--- /dev/null\n+++ \"b/x\\377\"\n"))
	if len(got) != 2 || got[0] != "docs/café.md" || got[1] != "x\xff" {
		t.Fatalf("PatchPaths = %q", got)
	}
}
