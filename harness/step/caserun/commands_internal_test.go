package caserun

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	ctoharness "github.com/cto-harness/cto-harness"
)

// A refused command longer than the bound keeps its start and its end, stays
// valid UTF-8 and within the bound, and names the whole by its SHA-256; a
// short one is kept as it is.
func TestClipCommandKeepsBothEnds(t *testing.T) {
	if got := clipCommand("go test ./..."); got != "go test ./..." {
		t.Fatalf("a short command was changed: %q", got)
	}
	long := "bash -c " + strings.Repeat("é", 40_000) + " && exec npm test"
	got := clipCommand(long)
	if len(got) > ctoharness.MaxRefusedCommandBytes || !utf8.ValidString(got) {
		t.Fatalf("clipped to %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
	if !strings.HasPrefix(got, "bash -c é") || !strings.HasSuffix(got, "é && exec npm test") {
		t.Errorf("the start or the end is lost: %q … %q", got[:20], got[len(got)-30:])
	}
	if want := fmt.Sprintf("sha256 %x", sha256.Sum256([]byte(long))); !strings.Contains(got, want) {
		t.Errorf("the whole command's digest is not named")
	}
	argv := []string{"/bin/true", strings.Repeat("a", 200<<10), "b", "c"}
	clipped := clipArgv(argv)
	total := 0
	for _, a := range clipped {
		total += len(a)
	}
	if total > ctoharness.MaxRefusedCommandBytes || clipped[0] != "/bin/true" || clipped[len(clipped)-1] != "…[2 more arguments left out]" {
		t.Errorf("argv clipped to %d bytes: %d entries, last %q", total, len(clipped), clipped[len(clipped)-1])
	}
	if short := clipArgv([]string{"go", "test"}); len(short) != 2 {
		t.Errorf("a short argv was changed: %q", short)
	}
}
