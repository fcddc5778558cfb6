package workcopy

import (
	"fmt"
	"strings"
	"testing"
)

// TestListSomeIsBounded: a blocker message names at most 20 of the paths
// Case chose, however many there are.
func TestListSomeIsBounded(t *testing.T) {
	var many []string
	for i := range 100000 {
		many = append(many, fmt.Sprintf("docs/f%06d.md", i))
	}
	got := listSome(many)
	if !strings.HasSuffix(got, " and 99980 more") || strings.Count(got, "docs/") != 20 {
		t.Fatalf("listSome(100000 paths) = %.200q…", got)
	}
	if got := listSome(many[:3]); got != "docs/f000000.md, docs/f000001.md, docs/f000002.md" {
		t.Fatalf("listSome(3 paths) = %q", got)
	}
}
