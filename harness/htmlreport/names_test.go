package htmlreport_test

import (
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
)

// A bidi override or an escape in a file name, a message or a diff line is
// marked where it stands, and C-quoted patch headers find their file.
func TestRenderMarksHiddenCharacters(t *testing.T) {
	bidi := "docs/\u202etxt.exe"
	rep := baseReport(ctoharness.StatusBlocked,
		[]ctoharness.Blocker{{Code: ctoharness.BlockUnsafeFileName, Step: ctoharness.StepCollect, Message: "names: " + bidi + " \x1b[32mPASS"}},
		[]ctoharness.ChangedFile{
			{Path: bidi, Change: ctoharness.ChangeAdded, Allowed: true},
			{Path: "docs/café.md", Change: ctoharness.ChangeAdded, Allowed: true},
			ctoharness.NewChangedFile("docs/x\xff.md", ctoharness.ChangeAdded, true, ""),
		})
	patch := "diff --git \"a/docs/\\342\\200\\256txt.exe\" \"b/docs/\\342\\200\\256txt.exe\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/docs/\\342\\200\\256txt.exe\"\n@@ -0,0 +1 @@\n+if ok \u2067// trojan\u2069 {\n" +
		"diff --git \"a/docs/caf\\303\\251.md\" \"b/docs/caf\\303\\251.md\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/docs/caf\\303\\251.md\"\n@@ -0,0 +1 @@\n+caf\n" +
		"diff --git \"a/docs/x\\377.md\" \"b/docs/x\\377.md\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/docs/x\\377.md\"\n@@ -0,0 +1 @@\n+x\n"
	raw, dir := writeRun(t, rep, map[string]string{"patch.diff": patch, "test.log": "ok\n"})
	page, err := htmlreport.Render(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, r := range s {
		if display.Hidden(r) && r != '\n' && r != '\t' && r != '\r' {
			t.Errorf("the page holds an unmarked %U", r)
		}
	}
	mark := `<span class="` + display.MarkClass + `" title="hidden character">`
	for _, want := range []string{
		"docs/" + mark + `\u202e</span>txt.exe`, // the name
		mark + `\x1b</span>[32mPASS`,            // the message
		mark + `\u2067</span>// trojan` + mark,  // the diff line
		`docs/café.md`, `docs/x\377.md`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(s, "in patch only") {
		t.Error("a quoted patch header was not matched to its changed file")
	}
}
