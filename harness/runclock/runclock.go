// Package runclock gives one run a single timeline. The wall clock is read
// once, when the run starts; every later time of the run is that start
// plus the time elapsed on the monotonic clock. Times so made never go
// backwards and always fall between the run's start and finish, whatever
// NTP or an operator does to the wall clock meanwhile, so a validator can
// hold the run to its window. The wall clock is still read at every step:
// where it has drifted from the run's timeline by more than Tolerance, the
// jump is recorded (in the report), not acted on.
package runclock

import (
	"sync"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Tolerance is how far the wall clock may drift from the run's timeline
// before the difference is recorded as a jump.
const Tolerance = time.Second

// maxJumps bounds the jumps kept: a wall clock that keeps jumping is
// recorded by its first few.
const maxJumps = 16

// Clock is one run's clock.
type Clock struct {
	wall  func() time.Time
	start time.Time // the wall clock at the start, without a monotonic reading
	mono  time.Time // time.Now() at the start: its monotonic reading

	mu     sync.Mutex
	offset time.Duration // the wall clock's offset at the last recorded jump
	jumps  []ctoharness.ClockJump
}

// New starts a run clock on wall (time.Now when nil).
func New(wall func() time.Time) *Clock {
	if wall == nil {
		wall = time.Now
	}
	return &Clock{wall: wall, start: wall().Round(0), mono: time.Now()}
}

// Now is the run's time: the start plus the monotonic time elapsed. It also
// reads the wall clock and records a jump when its offset from the run's
// time changed by more than Tolerance since the last one.
func (c *Clock) Now() time.Time {
	now := c.start.Add(time.Since(c.mono))
	off := c.wall().Round(0).Sub(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := off - c.offset; (d > Tolerance || d < -Tolerance) && len(c.jumps) < maxJumps {
		c.jumps = append(c.jumps, ctoharness.ClockJump{At: now.UTC(), Wall: now.Add(off).UTC(), OffsetMs: off.Milliseconds()})
		c.offset = off
	}
	return now
}

// Jumps are the wall-clock jumps seen so far, oldest first.
func (c *Clock) Jumps() []ctoharness.ClockJump {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ctoharness.ClockJump(nil), c.jumps...)
}
