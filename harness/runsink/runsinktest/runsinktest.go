// Package runsinktest makes a run's evidence sink for a step's tests: a
// real run directory (schema-checked writes, the event log open, the
// trace) in a test's temporary directory, with an empty report.
package runsinktest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/schemas"
)

// New is the sink of a run "run-1" whose directory is in t's temporary
// directory; rep is its report (nil: an empty one).
func New(t testing.TB, rep *ctoharness.Report) *runsink.Sink {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	tr := evidence.NewTrace("run-1")
	dir, err := evidence.Create(context.Background(), filepath.Join(t.TempDir(), "run-1"), set, tr)
	if err != nil {
		t.Fatal(err)
	}
	if rep == nil {
		rep = &ctoharness.Report{Blockers: []ctoharness.Blocker{}}
	}
	s := runsink.New("run-1", "n", dir, tr, rep, time.Now, nil)
	if s.Events, err = dir.OpenEvents("run-1", "n", time.Now); err != nil {
		t.Fatal(err)
	}
	return s
}
