package htmlreport_test

import (
	"fmt"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
)

// The page lists at most ctoharness.MaxFilesShown changed files and
// summarises the rest, so its size does not follow how many files Case
// changed.
func TestPageBoundsTheFileList(t *testing.T) {
	page := func(n int) string {
		t.Helper()
		var changed []ctoharness.ChangedFile
		var p strings.Builder
		for i := range n {
			name := fmt.Sprintf("docs/f%06d.md", i)
			changed = append(changed, ctoharness.ChangedFile{Path: name, Change: ctoharness.ChangeAdded, Allowed: i%2 == 0, Reason: map[bool]string{true: "", false: "outside"}[i%2 == 0]})
			fmt.Fprintf(&p, "diff --git a/%s b/%s\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..ce013625030ba8dba906f756967f9e9ca394464a\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1 @@\n+hello\n", name, name, name)
		}
		raw, dir := writeRun(t, baseReport(ctoharness.StatusBlocked, nil, changed), map[string]string{"patch.diff": p.String()})
		out, err := htmlreport.Render(raw, dir)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	small := page(10)
	if strings.Contains(small, "more (") || strings.Count(small, `class="changed-file`) != 10 {
		t.Errorf("a page of 10 files is summarised")
	}
	const n = 5000
	big := page(n)
	if got := strings.Count(big, `class="changed-file`); got != ctoharness.MaxFilesShown {
		t.Errorf("%d files listed, want %d", got, ctoharness.MaxFilesShown)
	}
	if got := strings.Count(big, `<details open class="file`); got != ctoharness.MaxFilesShown {
		t.Errorf("%d file diffs shown, want %d", got, ctoharness.MaxFilesShown)
	}
	for _, want := range []string{
		fmt.Sprintf("Changed files (%d of %d)", ctoharness.MaxFilesShown, n),
		fmt.Sprintf("… and %d more (%d of them outside the allowed paths); see patch.diff", n-ctoharness.MaxFilesShown, (n-ctoharness.MaxFilesShown)/2),
	} {
		if !strings.Contains(big, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(big, fmt.Sprintf("docs/f%06d.md", ctoharness.MaxFilesShown)) {
		t.Error("a file past the cap is shown")
	}
	if !strings.Contains(big, "<style>") || strings.Contains(big, "<script") {
		t.Error("the page is no longer self-contained")
	}
}
