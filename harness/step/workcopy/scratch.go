package workcopy

import (
	"fmt"
	"os"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// Scratch is Case's scratch directories (HOME, TMPDIR, caches), which Case
// and the verification command share. They are made on first need (Case's
// start, or the first view that shows them), and traced once.
type Scratch struct {
	dir  string
	tr   *evidence.Trace
	made bool
}

// NewScratch is the scratch below dir, not yet made.
func NewScratch(dir string, tr *evidence.Trace) *Scratch {
	return &Scratch{dir: dir, tr: tr}
}

// Make creates the scratch directories; only the first call traces them.
func (s *Scratch) Make() error {
	if s.made {
		return nil
	}
	for _, d := range backend.ScratchDirs(s.dir) {
		s.tr.Trace(ctoharness.TraceMkdir, d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	s.made = true
	return nil
}
