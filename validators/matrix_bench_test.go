package validators_test

import (
	"cmp"
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/validators"
)

// BenchmarkFailureMatrix replays the whole failure matrix as
// validate-case-stage3 does, rows side by side, and reports its wall time
// beside the sum of the rows' own times (the time one row at a time would
// take) and their ratio, and logs the slowest rows (the ones the matrix
// should mark slow, so that the replay starts them first). The target is
// 30 s wall on a quiet 2-core machine.
func BenchmarkFailureMatrix(b *testing.B) {
	runs := b.TempDir()
	so, set := stageOpts(b, runs)
	if err := validators.EnsureStage2(context.Background(), so); err != nil {
		b.Fatal(err)
	}
	exe, _ := os.Executable()
	o := validators.ReplayOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: so.Signing}
	rows, err := fixtures.Matrix()
	if err != nil {
		b.Fatal(err)
	}
	var wall, sum time.Duration
	var last []validators.RowResult
	for b.Loop() {
		start := time.Now()
		last = validators.ReplayAll(context.Background(), rows, o, nil)
		for _, r := range last {
			if !r.OK {
				b.Fatalf("row %s: %v", r.Name, r.Errors)
			}
			sum += r.Took
		}
		wall += time.Since(start)
	}
	// The slowest rows of the last replay: where the wall time goes.
	slices.SortFunc(last, func(x, y validators.RowResult) int { return cmp.Compare(y.Took, x.Took) })
	for _, r := range last[:min(len(last), 15)] {
		b.Logf("%-40s %6.2f s", r.Name, r.Took.Seconds())
	}
	b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s")
	b.ReportMetric(sum.Seconds()/float64(b.N), "rows-sum-s")
	b.ReportMetric(wall.Seconds()/sum.Seconds(), "x-rows-sum")
	b.ReportMetric(float64(len(rows)), "rows")
}
