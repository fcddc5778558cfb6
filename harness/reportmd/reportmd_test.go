package reportmd_test

import (
	"fmt"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/reportmd"
)

// report.md lists at most ctoharness.MaxFilesShown changed files and says
// how many more there are, and how many of those are not allowed.
func TestMarkdownBoundsTheFileList(t *testing.T) {
	const n = 2500
	rep := &ctoharness.Report{RunID: "r"}
	for i := range n {
		rep.ChangedFiles = append(rep.ChangedFiles, ctoharness.ChangedFile{Path: fmt.Sprintf("f%05d", i), Change: ctoharness.ChangeAdded, Allowed: i < 2000})
	}
	md := string(reportmd.Markdown(rep))
	if got := strings.Count(md, " (added, "); got != ctoharness.MaxFilesShown {
		t.Errorf("%d files listed, want %d", got, ctoharness.MaxFilesShown)
	}
	if want := "- and 1500 more (500 of them NOT allowed); report.json's changed_files and patch.diff list them all\n"; !strings.Contains(md, want) {
		t.Errorf("report.md lacks %q", want)
	}
	rep.ChangedFiles = rep.ChangedFiles[:3]
	if md := string(reportmd.Markdown(rep)); strings.Contains(md, "more (") || strings.Count(md, " (added, ") != 3 {
		t.Errorf("a short list is summarised:\n%s", md)
	}
}
