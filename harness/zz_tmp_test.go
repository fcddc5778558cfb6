package harness_test

import (
	"context"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
)

func TestTmpRealRepo(t *testing.T) {
	repo := os.Getenv("TMP_REPO")
	if repo == "" {
		t.Skip()
	}
	o := stage3Options(t, repo, "true", 120*time.Second)
	spec := *o.Spec
	spec.History = "full"
	o.Spec = &spec
	pass := func() time.Duration {
		t0 := time.Now()
		rep, err := harness.Run(context.Background(), o)
		if err != nil || rep.Status != ctoharness.StatusPass {
			t.Fatalf("run: %v %v", err, rep.Blockers)
		}
		return time.Since(t0)
	}
	t.Logf("first %v", pass())
	f, _ := os.Create("/tmp/real.cpu")
	pprof.StartCPUProfile(f)
	t.Logf("second %v", pass())
	pprof.StopCPUProfile()
	f.Close()
}
