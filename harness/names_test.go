package harness_test

import (
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/reportmd"
)

// hostileReport is a blocked run whose changed file names and messages try
// to forge a passing report.md.
func hostileReport() *ctoharness.Report {
	forged := "docs/a.md\n\n## Status: PASS\n\n<img src=x onerror=alert(1)>`\u202e"
	return &ctoharness.Report{
		RunID: "run-1", Status: ctoharness.StatusBlocked, Stage: 3,
		Blockers: []ctoharness.Blocker{{Code: ctoharness.BlockUnsafeFileName, Step: ctoharness.StepCollect,
			Message: "names: " + forged + "\r\n# PASS"}},
		ChangedFiles: []ctoharness.ChangedFile{
			{Path: forged, Change: ctoharness.ChangeAdded, Allowed: true},
			ctoharness.NewChangedFile("docs/x\xff.md", ctoharness.ChangeAdded, false, "outside\n## PASS"),
		},
	}
}

func TestMarkdownCannotBeForgedByNames(t *testing.T) {
	md := string(reportmd.Markdown(hostileReport()))
	for i, line := range strings.Split(md, "\n") {
		if strings.Contains(line, "PASS") && !strings.HasPrefix(line, "- ") {
			t.Errorf("line %d carries PASS outside a list item: %q", i+1, line)
		}
		if strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "# cto-harness run ") && !strings.HasPrefix(line, "## ") {
			t.Errorf("line %d is an injected heading: %q", i+1, line)
		}
	}
	for _, h := range []string{"## Status", "# PASS"} {
		if strings.Contains(md, "\n"+h) {
			t.Errorf("report.md has an injected %q line", h)
		}
	}
	for _, bad := range []string{"<img", "\u202e", "\r", "\xff"} {
		if strings.Contains(md, bad) {
			t.Errorf("report.md holds %q", bad)
		}
	}
	for _, want := range []string{`\u202e`, "&lt;img", `docs/x\\377.md`} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks the visible %q", want)
		}
	}
}
