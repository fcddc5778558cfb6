package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Trial is what one trial launch of a policy established.
type Trial struct {
	View      []Mount       // the view as the launcher built it
	BuildTime time.Duration // how long building the view took inside the launcher
}

// Try establishes p once in a throwaway launcher, started in dir, without
// running any command. The harness calls it before it starts Case, so a view
// that cannot be built (a missing path, a refused mount) blocks the run
// before any Case process exists. The error is the launcher's own reason.
func Try(ctx context.Context, self string, p Policy, dir string) (Trial, error) {
	got, err := tryPolicy(ctx, self, p, dir)
	if err != nil {
		return Trial{}, err
	}
	if p.View != nil && len(got.View) == 0 {
		return Trial{}, fmt.Errorf("the launcher did not report the filesystem view it was asked to build")
	}
	return Trial{View: got.View, BuildTime: time.Duration(got.ViewBuildNs)}, nil
}

// Trials lets the runs of one batch skip most trial launches. A trial
// launch costs a namespaced process start, and a view is tried for every
// kind of command of every run, although the runs of a batch differ only
// in their own directories. Trials remembers the shapes of views (a key
// the caller makes, with everything run-specific taken out) whose plan,
// made here, was exactly the view a launcher built in a trial. A view of a
// remembered shape is planned here instead of tried. The launch that runs
// the command still builds the view and refuses one whose digest differs
// from the plan (View.Expect), so what is recorded is what is built either
// way; the trial is skipped only where a plan made here has shown that it
// agrees with the launcher's (a launcher in a user namespace can see less
// of the host than the harness: another user's private directory).
type Trials struct {
	mu      sync.Mutex
	matched map[string]bool
}

// NewTrials is an empty memo.
func NewTrials() *Trials {
	return &Trials{matched: map[string]bool{}}
}

// Try is sandbox.Try for p, planned here instead when a view of the same
// shape has been tried and planned alike before. A plan made here that
// fails is never trusted: the trial launch decides.
func (t *Trials) Try(ctx context.Context, self string, p Policy, dir, shape string) (Trial, error) {
	if shape == "" {
		return Try(ctx, self, p, dir)
	}
	key := self + "\x00" + shape
	var plan []Mount
	planErr := errNoView
	if p.View != nil {
		plan, planErr = p.View.Plan(p.Writable)
	}
	t.mu.Lock()
	known := t.matched[key]
	t.mu.Unlock()
	if known && planErr == nil {
		return Trial{View: plan}, nil
	}
	tr, err := Try(ctx, self, p, dir)
	if err != nil {
		return tr, err
	}
	if planErr == nil && Digest(plan) == Digest(tr.View) {
		t.mu.Lock()
		t.matched[key] = true
		t.mu.Unlock()
	}
	return tr, nil
}

var errNoView = errors.New("no view to plan")
