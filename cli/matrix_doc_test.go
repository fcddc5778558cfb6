package cli_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/cli"
	"github.com/cto-harness/cto-harness/fixtures"
)

var update = flag.Bool("update", false, "rewrite docs/failure-matrix.md from fixtures/matrix.json")

const (
	docPath   = "../docs/failure-matrix.md"
	beginMark = "<!-- matrix:begin -->\n"
	endMark   = "<!-- matrix:end -->"
)

// docs/failure-matrix.md must list exactly the rows of fixtures/matrix.json.
func TestFailureMatrixDocMatchesData(t *testing.T) {
	rows, err := fixtures.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if err := cli.WriteMatrixMarkdown(&want, rows); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, beginMark), strings.Index(doc, endMark)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the matrix markers", docPath)
	}
	got := doc[i+len(beginMark) : j]
	if got == want.String() {
		return
	}
	if *update {
		doc = doc[:i+len(beginMark)] + want.String() + doc[j:]
		if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is out of date with fixtures/matrix.json; run: go test ./cli -run TestFailureMatrixDoc -update", docPath)
}
