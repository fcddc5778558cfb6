package validators

import (
	"os"
	"path/filepath"
	"testing"
)

// The built-in governance documents pass the same check as the files, and
// equal them, so a binary installed anywhere validates stage 3 on what the
// repository holds.
func TestEmbeddedGovernanceDocs(t *testing.T) {
	for _, doc := range GovernanceDocs() {
		if err := checkEmbeddedDoc(doc); err != nil {
			t.Errorf("built-in %s: %v", doc, err)
		}
		if err := CheckGovernanceDoc(filepath.Join("..", doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	if err := checkEmbeddedDoc("docs/prd/missing.md"); err == nil {
		t.Error("a missing built-in document passed")
	}
	if _, err := os.Stat(filepath.Join("..", "docs", "embed.go")); err != nil {
		t.Fatal(err)
	}
}
