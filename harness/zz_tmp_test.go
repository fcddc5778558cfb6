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

func BenchmarkTmpSecond(b *testing.B) {
	repo := goTreeRepo(b)
	o := stage3Options(b, repo, "test -f CASE_NOTES.md", 60*time.Second)
	pass := func() {
		rep, err := harness.Run(context.Background(), o)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("run: %v %v", err, rep.Blockers)
		}
	}
	pass()
	f, _ := os.Create("/tmp/second.cpu")
	pprof.StartCPUProfile(f)
	b.ResetTimer()
	for b.Loop() {
		pass()
	}
	pprof.StopCPUProfile()
	f.Close()
}
