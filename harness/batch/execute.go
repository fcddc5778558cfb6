package batch

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Runner runs one attempt of a trial. The returned attempt is recorded as
// is; an error means the attempt could not be made at all (it is recorded as
// infra_failed). When ctx is cancelled the attempt is not recorded: the
// operator stopped the batch, which says nothing about the trial.
type Runner interface {
	RunTrial(ctx context.Context, t Trial, attempt int) (Attempt, error)
}

// QueueRunner is a Runner whose attempts wait in a queue before they run
// (NATS): it says where an attempt stands, so that a progress display
// counts what workers run apart from what waits for one and what is being
// checked.
type QueueRunner interface {
	RunTrialTracked(ctx context.Context, t Trial, attempt int, at func(AttemptState)) (Attempt, error)
}

// AttemptState is where an attempt of a QueueRunner stands.
type AttemptState int

// Attempt states: published and waiting for a worker; taken by a worker;
// answered, its result being checked.
const (
	Queued AttemptState = iota
	Running
	Checking
)

// Verifier re-checks a recorded attempt of a trial (on resume) and returns
// what is wrong with it; nothing means valid.
type Verifier func(ctx context.Context, t Trial, a Attempt) []string

// Event is one step of a batch, for a progress display.
type Event struct {
	Kind    string // "skip" (finished earlier), "start", "done", "retry"
	Trial   Trial
	Attempt *Attempt
	Counts  Counts
}

// Counts is where a batch stands.
type Counts struct {
	// Running are attempts being made; Queued are published attempts no
	// worker has taken yet (a QueueRunner only).
	Total, Done, Running, Queued, Failed, Skipped, Retries int
	Tokens                                                 int64
	CostUSD                                                float64 // reported or estimated costs so far
	CostUnknown                                            int     // finished trials whose cost is unknown
}

// Options configure Execute.
type Options struct {
	Concurrency int
	Verify      Verifier
	OnEvent     func(Event) // called from one goroutine at a time
}

// Execute runs every trial of the plan that is not already final in the
// store, Concurrency at a time, retrying infra and model failures up to the
// plan's attempt bound. It returns when all are final or ctx is cancelled
// (then the trials that finished are recorded and the rest are left for the
// next run).
func Execute(ctx context.Context, p Plan, st Store, r Runner, o Options) (Counts, error) {
	if o.Concurrency < 1 {
		o.Concurrency = 1
	}
	var mu sync.Mutex
	c := Counts{Total: len(p.Trials)}
	emit := func(kind string, t Trial, a *Attempt) {
		if o.OnEvent != nil {
			o.OnEvent(Event{Kind: kind, Trial: t, Attempt: a, Counts: c})
		}
	}
	var todo []TrialRecord
	for _, t := range p.Trials {
		rec, err := st.Load(t)
		if err != nil {
			return c, err
		}
		if rec.Final(p.MaxAttempts) {
			last := rec.Last()
			var bad []string
			if o.Verify != nil {
				bad = o.Verify(ctx, t, *last)
			}
			if len(bad) == 0 {
				c.Done++
				c.Skipped++
				addCost(&c, t, *last)
				if last.Outcome != OutcomePass {
					c.Failed++
				}
				emit("skip", t, last)
				continue
			}
			last.EvidenceValid = false
			last.EvidenceErrors = bad
			last.Note = strings.TrimSpace(last.Note + " evidence no longer verifies; the trial runs again")
			if err := st.Save(rec); err != nil {
				return c, err
			}
		}
		todo = append(todo, rec)
	}
	work := make(chan TrialRecord)
	var wg sync.WaitGroup
	var firstErr error
	inFlight := agentSlots(p)
	for i := 0; i < o.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rec := range work {
				slots := inFlight[rec.Trial.Agent.Name]
				if slots != nil {
					select {
					case slots <- struct{}{}:
					case <-ctx.Done():
						continue
					}
				}
				err := runTrial(ctx, p, st, r, rec, &mu, &c, emit)
				if slots != nil {
					<-slots
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for _, rec := range todo {
		select {
		case work <- rec:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return c, firstErr
}

// agentSlots bounds each coding agent's trials at once (its max_in_flight,
// else DefaultMaxInFlight); the fake Case's are bounded by the workers
// alone.
func agentSlots(p Plan) map[string]chan struct{} {
	out := map[string]chan struct{}{}
	for _, t := range p.Trials {
		if _, ok := out[t.Agent.Name]; ok {
			continue
		}
		n := t.Agent.MaxInFlight
		if n == 0 && t.Agent.Kind != "" {
			n = DefaultMaxInFlight
		}
		var slots chan struct{}
		if n > 0 {
			slots = make(chan struct{}, n)
		}
		out[t.Agent.Name] = slots
	}
	return out
}

// TrialMemory is what one trial is taken to need, for the bound on trials
// at once: the harness and a coding agent's own process (a Node program)
// with room to spare.
const TrialMemory = 768 << 20

// ConcurrencyFor is the trials at once for p when neither the flag nor the
// spec says: the sum of the coding agents' max_in_flight (their trials
// wait on their models), DefaultConcurrency for the fake Case's, never more than
// the trials, and bounded by memory (TrialMemory each); why says so when
// memory bounded it ("" otherwise).
func ConcurrencyFor(p Plan) (n int, why string) {
	seen := map[string]bool{}
	fake := false
	for _, t := range p.Trials {
		if seen[t.Agent.Name] {
			continue
		}
		seen[t.Agent.Name] = true
		switch {
		case t.Agent.MaxInFlight > 0:
			n += t.Agent.MaxInFlight
		case t.Agent.Kind != "":
			n += DefaultMaxInFlight
		default:
			fake = true
		}
	}
	if fake {
		n += DefaultConcurrency() // the fake Case's trials are the processor's
	}
	n = min(n, max(len(p.Trials), 1))
	if m, why := MemoryBound(n); why != "" {
		return m, why + "; free memory or give --concurrency to change it"
	}
	return max(n, 1), ""
}

// MemoryBound is n trials at once bounded by this machine's available
// memory at TrialMemory a trial (at least one), and why when memory is
// what bounded it ("" otherwise, or when the memory is unknown). Batch run
// and a NATS worker size their defaults with it alike.
func MemoryBound(n int) (int, string) {
	n = max(n, 1)
	mem := availableMemory()
	if mem == 0 {
		return n, ""
	}
	if m := max(int(mem/TrialMemory), 1); m < n {
		return m, fmt.Sprintf("%d trials at once, bounded by memory: %d MiB available, %d MiB per trial", m, mem>>20, TrialMemory>>20)
	}
	return n, ""
}

// runTrial makes the attempts one trial still needs.
func runTrial(ctx context.Context, p Plan, st Store, r Runner, rec TrialRecord, mu *sync.Mutex, c *Counts, emit func(string, Trial, *Attempt)) error {
	for made := 0; made < p.MaxAttempts && !rec.Final(p.MaxAttempts); made++ {
		if ctx.Err() != nil {
			return nil
		}
		n := len(rec.Attempts) + 1
		qr, queued := r.(QueueRunner)
		mu.Lock()
		if made > 0 || n > 1 {
			c.Retries++
			emit("retry", rec.Trial, rec.Last())
		}
		mu.Unlock()
		var a Attempt
		var err error
		if queued {
			state, ended := AttemptState(-1), false
			move := func(to AttemptState) {
				mu.Lock()
				defer mu.Unlock()
				if ended { // a late word on an attempt that ended changes nothing
					return
				}
				ended = to == -1
				if to == state {
					return
				}
				c.count(state, -1)
				c.count(to, 1)
				state = to
				if to == Running {
					emit("start", rec.Trial, nil)
				}
			}
			a, err = qr.RunTrialTracked(ctx, rec.Trial, n, move)
			move(-1)
		} else {
			mu.Lock()
			c.Running++
			emit("start", rec.Trial, nil)
			mu.Unlock()
			a, err = r.RunTrial(ctx, rec.Trial, n)
			mu.Lock()
			c.Running--
			mu.Unlock()
		}
		if ctx.Err() != nil {
			// Stopped by the operator: not an attempt of this trial, but
			// the model spend its meter recorded is kept for the totals.
			if err == nil && (a.InputTokens > 0 || a.OutputTokens > 0 || a.ReportedCost != nil) {
				a.N, a.ID = n, AttemptID(rec.Trial.ID, n)
				a.Refused = nil
				rec.Interrupted = append(rec.Interrupted, a)
				if err := st.Save(rec); err != nil {
					return fmt.Errorf("record trial %s: %w", rec.Trial.ID, err)
				}
			}
			return nil
		}
		if err != nil {
			a = Attempt{Outcome: OutcomeInfraFailed, OutcomeSource: "the harness could not make the run", Note: err.Error(),
				Blockers: []string{}, EvidenceErrors: []string{err.Error()}}
		}
		a.N, a.ID = n, AttemptID(rec.Trial.ID, n)
		for _, r := range a.Refused {
			r.Attempt = n
			rec.Refused = append(rec.Refused, r)
		}
		a.Refused = nil
		if a.Blockers == nil {
			a.Blockers = []string{}
		}
		if a.EvidenceErrors == nil {
			a.EvidenceErrors = []string{}
		}
		rec.Attempts = append(rec.Attempts, a)
		if err := st.Save(rec); err != nil {
			return fmt.Errorf("record trial %s: %w", rec.Trial.ID, err)
		}
		if rec.Final(p.MaxAttempts) {
			mu.Lock()
			c.Done++
			if a.Outcome != OutcomePass {
				c.Failed++
			}
			addCost(c, rec.Trial, a)
			emit("done", rec.Trial, &rec.Attempts[len(rec.Attempts)-1])
			mu.Unlock()
		}
	}
	return nil
}

// count adds d to the counter of state s (none for -1 and Checking).
func (c *Counts) count(s AttemptState, d int) {
	switch s {
	case Queued:
		c.Queued += d
	case Running:
		c.Running += d
	}
}

func addCost(c *Counts, t Trial, a Attempt) {
	c.Tokens += a.InputTokens + a.OutputTokens
	if cost, ok := Cost(t.Agent, a); ok {
		c.CostUSD += cost.USD
	} else {
		c.CostUnknown++
	}
}

// CostOf is a trial's cost and where the number comes from.
type CostOf struct {
	USD   float64
	Basis string // "reported", "estimated" or "none" (no model was called)
}

// Cost is an attempt's cost from what the harness metered: the metered
// tokens at the spec's price, else the meter's own estimate (the config's
// price table), else zero only when no paid model was used (the fake Case,
// the scripted model server). Only when nothing metered gives a cost does
// the agent's reported cost stand, as "reported". Otherwise it is unknown
// (ok false), never a made-up 0.
func Cost(a Agent, at Attempt) (CostOf, bool) {
	if est, ok := metered(a, at); ok {
		return est, true
	}
	switch {
	case a.Kind == "" || a.Scripted != "":
		return CostOf{0, "none"}, true // the fake Case or the scripted model server: no paid model
	case at.ReportedCost != nil:
		return CostOf{*at.ReportedCost, "reported"}, true
	}
	return CostOf{}, false
}

func metered(a Agent, at Attempt) (CostOf, bool) {
	switch {
	case a.Price != nil:
		return CostOf{(float64(at.InputTokens)*a.Price.InputPerMTok + float64(at.OutputTokens)*a.Price.OutputPerMTok) / 1e6, "estimated"}, true
	case at.MeteredCost != nil:
		return CostOf{*at.MeteredCost, "estimated"}, true
	}
	return CostOf{}, false
}

// UnderReported says the agent's reported cost is less than half of what
// the metered tokens cost: the page flags it, the totals use the estimate.
func UnderReported(a Agent, at Attempt) bool {
	est, ok := metered(a, at)
	return ok && at.ReportedCost != nil && *at.ReportedCost < est.USD/2
}

// DefaultConcurrency is how many trials this machine runs at once when the
// spec and the flags say nothing: one per core, at most one per 2 GiB of
// available memory, at least one.
func DefaultConcurrency() int {
	n := runtime.NumCPU()
	if mem := availableMemory(); mem > 0 {
		if m := int(mem / (2 << 30)); m < n {
			n = m
		}
	}
	if n < 1 {
		n = 1
	}
	return n
}

// availableMemory reads MemAvailable from /proc/meminfo (0 if unknown).
func availableMemory() uint64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
