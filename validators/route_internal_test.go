package validators

import (
	"slices"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// Stage 3 with caches.go writes the kept build cache's warm-up log, which
// stage 2's artificial source never does: the route's artifacts leave it
// out, and only when the report records the kept cache.
func TestRouteArtifactsLeaveOutTheKeptCacheLog(t *testing.T) {
	rep := &ctoharness.Report{ArtifactDigests: map[string]string{evidence.TestLog: "a", evidence.WarmUpLog: "b"}}
	if got := routeArtifacts(rep); !slices.Contains(got, evidence.WarmUpLog) {
		t.Errorf("a warm-up log without a kept cache record is left out: %v", got)
	}
	rep.Sandbox.KeptBuildCache = &ctoharness.KeptCacheRecord{}
	if got := routeArtifacts(rep); !slices.Equal(got, []string{evidence.TestLog}) {
		t.Errorf("route artifacts %v", got)
	}
}
