package verify

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors from Budget.Reserve.
var (
	ErrGovernance      = errors.New("governance unavailable")
	ErrBudgetExhausted = errors.New("test budget exhausted")
)

// Budget is the cumulative verification allowance of one harness run: total
// wall-clock time and number of runs (reruns included). It is checked before
// each execution, and each execution is charged afterwards.
type Budget struct {
	mu      sync.Mutex
	total   time.Duration
	maxRuns int
	used    time.Duration
	runs    int
}

// NewBudget allows total time over at most maxRuns runs. A budget with a
// non-positive total or run count cannot be tracked: Reserve then fails with
// ErrGovernance rather than running unbounded.
func NewBudget(total time.Duration, maxRuns int) *Budget {
	return &Budget{total: total, maxRuns: maxRuns}
}

// Reserve is called before each run with the per-run timeout. It returns the
// timeout the run actually gets: never more than what is left of the budget.
func (b *Budget) Reserve(timeout time.Duration) (time.Duration, error) {
	if b == nil {
		return 0, fmt.Errorf("%w: no test budget to track", ErrGovernance)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.total <= 0 || b.maxRuns <= 0:
		return 0, fmt.Errorf("%w: the test budget (%s over %d runs) cannot be enforced", ErrGovernance, b.total, b.maxRuns)
	case timeout <= 0:
		return 0, fmt.Errorf("%w: the per-run timeout must be positive, got %s", ErrGovernance, timeout)
	case b.runs >= b.maxRuns:
		return 0, fmt.Errorf("%w: %d of %d test runs used", ErrBudgetExhausted, b.runs, b.maxRuns)
	case b.used >= b.total:
		return 0, fmt.Errorf("%w: %s of %s test time used", ErrBudgetExhausted, b.used.Round(time.Millisecond), b.total)
	}
	b.runs++
	return min(timeout, b.total-b.used), nil
}

// Charge records how long a run took.
func (b *Budget) Charge(d time.Duration) {
	if b == nil || d < 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += d
}

// BudgetUsage is a snapshot, for the report.
type BudgetUsage struct {
	TotalMs     int64 `json:"total_ms"`
	UsedMs      int64 `json:"used_ms"`
	RemainingMs int64 `json:"remaining_ms"`
	Runs        int   `json:"runs"`
	MaxRuns     int   `json:"max_runs"`
}

// Usage returns what has been spent.
func (b *Budget) Usage() BudgetUsage {
	if b == nil {
		return BudgetUsage{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return BudgetUsage{TotalMs: b.total.Milliseconds(), UsedMs: b.used.Milliseconds(),
		RemainingMs: max(b.total-b.used, 0).Milliseconds(), Runs: b.runs, MaxRuns: b.maxRuns}
}
