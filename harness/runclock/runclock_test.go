package runclock_test

import (
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/runclock"
)

// The run's time follows the monotonic clock: a wall clock stepped back or
// forward moves nothing, and each step beyond the tolerance is recorded
// once, with its offset.
func TestStepsAreRecordedNotFollowed(t *testing.T) {
	var step time.Duration
	wall := func() time.Time { return time.Now().Round(0).Add(step) }
	c := runclock.New(wall)
	prev := c.Now()
	for _, s := range []time.Duration{-2 * time.Second, -2 * time.Second, 500 * time.Millisecond, 90 * time.Second} {
		step = s
		now := c.Now()
		if now.Before(prev) {
			t.Fatalf("after a step to %s the run's time went back from %s to %s", s, prev, now)
		}
		prev = now
	}
	j := c.Jumps()
	// -2 s is recorded; -2 s again is no change; +0.5 s is 2.5 s away from
	// the last offset, recorded; +90 s is recorded.
	want := []int64{-2000, 500, 90000}
	if len(j) != len(want) {
		t.Fatalf("jumps %+v, want offsets %v", j, want)
	}
	for i, w := range want {
		if d := j[i].OffsetMs - w; d > 100 || d < -100 {
			t.Errorf("jump %d offset %d ms, want about %d", i, j[i].OffsetMs, w)
		}
		if got := j[i].Wall.Sub(j[i].At).Milliseconds(); got != j[i].OffsetMs {
			t.Errorf("jump %d: wall - at = %d ms, offset %d ms", i, got, j[i].OffsetMs)
		}
	}
}

// Without a step, nothing is recorded.
func TestSteadyClockRecordsNothing(t *testing.T) {
	c := runclock.New(nil)
	for range 100 {
		c.Now()
	}
	if j := c.Jumps(); len(j) != 0 {
		t.Errorf("jumps %+v on a steady clock", j)
	}
}
