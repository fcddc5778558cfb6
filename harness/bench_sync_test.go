package harness_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// BenchmarkFsyncShareSample measures what making the evidence durable costs
// a stage 3 pass-route run on the embedded sample repository. Each synced
// run times its own fsync calls (an injected Syncer around fsync(2)), so
// the share is measured within the same run; runs whose Syncer does
// nothing are interleaved with them and the wall-time medians compared as
// well. The target is under 5 % of the run. The runs directory is in the
// test's temporary directory: on a tmpfs, fsync costs nothing and the
// number says nothing.
func BenchmarkFsyncShareSample(b *testing.B) {
	ctx := context.Background()
	keys, err := attest.Ephemeral() // signed, as every run is by default
	if err != nil {
		b.Fatal(err)
	}
	base, _ := sampleStage3(b, keys)
	// one returns a run's wall time and the wall time during which at
	// least one of its fsync calls was in flight (they run in parallel, so
	// their durations overlap).
	one := func(synced bool) (wall, synctime time.Duration) {
		var mu sync.Mutex
		var inFlight int
		var since time.Time
		o := base
		o.Sync = func(*os.File) error { return nil }
		if synced {
			o.Sync = func(f *os.File) error {
				mu.Lock()
				if inFlight == 0 {
					since = time.Now()
				}
				inFlight++
				mu.Unlock()
				err := evidence.Fsync(f)
				mu.Lock()
				if inFlight--; inFlight == 0 {
					synctime += time.Since(since)
				}
				mu.Unlock()
				return err
			}
		}
		start := time.Now()
		rep, err := harness.Run(ctx, o)
		wall = time.Since(start)
		if err != nil || rep.Status != ctoharness.StatusPass {
			b.Fatalf("run: %v %v", err, rep.Blockers)
		}
		return wall, synctime
	}
	one(true) // warm up
	one(false)
	var syncedWall, plainWall, shares []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < 10; k++ {
			for _, s := range []bool{(i+k)%2 == 0, (i+k)%2 != 0} {
				w, st := one(s)
				if s {
					syncedWall = append(syncedWall, w)
					// The share in parts per million, kept as a Duration for median.
					shares = append(shares, time.Duration(float64(st)/float64(w)*1e6))
				} else {
					plainWall = append(plainWall, w)
				}
			}
		}
	}
	b.StopTimer()
	share := float64(median(shares)) / 1e4
	b.ReportMetric(float64(median(syncedWall).Microseconds())/1000, "ms-wall-synced")
	b.ReportMetric(float64(median(plainWall).Microseconds())/1000, "ms-wall-unsynced")
	b.ReportMetric(float64(median(syncedWall)-median(plainWall))/float64(median(plainWall))*100, "%-wall-diff")
	b.ReportMetric(share, "%-fsync-in-run")
	b.Logf("median run %s synced, %s unsynced; fsync share %.1f %%", median(syncedWall), median(plainWall), share)
	if share > 5 {
		b.Errorf("fsync took %.1f %% of a stage 3 run (median); the target is under 5 %%", share)
	}
}
