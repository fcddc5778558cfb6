package harness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
)

// steppingClock is a wall clock that NTP steps by step after its first
// calls: every reading from the sixth on is off by step.
type steppingClock struct {
	mu    sync.Mutex
	calls int
	step  time.Duration
}

func (c *steppingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	t := time.Now().Round(0) // a wall reading only, as after a round trip through JSON
	if c.calls > 5 {
		t = t.Add(c.step)
	}
	return t
}

// The wall clock stepping back 2 s in the middle of a run (NTP) changes
// nothing: the run's times come from the monotonic clock, so the run passes
// and validates; the step is recorded. A forward jump is recorded too.
func TestWallClockStepsDuringARun(t *testing.T) {
	set := compile(t)
	for _, step := range []time.Duration{-2 * time.Second, 90 * time.Second} {
		c := &steppingClock{step: step}
		o := options(t, set, t.TempDir(), 1, env{})
		o.Clock = c.now
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != ctoharness.StatusPass {
			t.Fatalf("step %s: status %s: %v", step, rep.Status, rep.Blockers)
		}
		if c.calls <= 5 {
			t.Fatalf("the run read the clock %d times: the step never happened", c.calls)
		}
		mustValidate(t, set, rep, true)
		jumps := rep.Freshness.ClockJumps
		if len(jumps) == 0 {
			t.Errorf("step %s: no clock jump recorded", step)
			continue
		}
		if d := time.Duration(jumps[0].OffsetMs) * time.Millisecond; d > step+time.Second || d < step-time.Second {
			t.Errorf("step %s: recorded a jump of %s", step, d)
		}
	}
}
