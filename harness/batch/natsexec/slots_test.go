package natsexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/batch/natsexec"
)

// liveness bounds how long a test waits for what must happen; it is a
// bound on a hang, never a measurement.
const liveness = time.Minute

// inHand counts a worker's trials between Fetched and Released, and
// remembers the most it held at once. Fetched blocks until the first
// want trials are in hand together (a barrier), so a worker that took
// fewer at once never gets past it.
type inHand struct {
	t       *testing.T
	want    int
	mu      sync.Mutex
	now     int
	peak    int
	taken   []natsexec.Request
	full    chan struct{} // closed when want trials were in hand at once
	release chan natsexec.Request
}

func newInHand(t *testing.T, want int) *inHand {
	return &inHand{t: t, want: want, full: make(chan struct{}), release: make(chan natsexec.Request, 64)}
}

func (h *inHand) fetched(r natsexec.Request) {
	h.mu.Lock()
	h.now++
	h.peak = max(h.peak, h.now)
	h.taken = append(h.taken, r)
	full := h.now == h.want
	h.mu.Unlock()
	if full {
		h.open()
	}
	select {
	case <-h.full:
	case <-time.After(liveness):
		h.t.Errorf("trial %s waited %s for %d trials in hand at once; the worker held %d", r.Trial.ID, liveness, h.want, h.count())
		h.open() // one failure is enough: let the rest run
	}
}

// open lets every waiting trial go on.
func (h *inHand) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.full:
	default:
		close(h.full)
	}
}

func (h *inHand) released(r natsexec.Request) {
	h.mu.Lock()
	h.now--
	h.mu.Unlock()
	h.release <- r
}

func (h *inHand) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// A worker with three slots holds three trials at once, and never more:
// the first three wait for each other in Fetched, so a worker that took
// them one at a time would never finish the batch; the last two are
// fetched only as slots free.
func TestWorkerHoldsItsSlots(t *testing.T) {
	w := newWorld(t, 5)
	signer, pub, _ := w.key(t, "w")
	co := w.coordinator(t, 30*time.Second, pub)
	h := newInHand(t, 3)
	wk := w.worker(t, "w", signer)
	wk.Slots, wk.Fetched, wk.Released = 3, h.fetched, h.released
	w.start(t, "w", wk)
	c, err := batch.Execute(context.Background(), w.plan, w.store, co, batch.Options{Concurrency: len(w.plan.Trials)})
	if err != nil || c.Done != 5 || c.Failed != 0 {
		t.Fatalf("done %d, failed %d: %v", c.Done, c.Failed, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.peak != 3 || len(h.taken) != 5 {
		t.Errorf("the worker held at most %d trials at once and took %d; want 3 at once and all 5", h.peak, len(h.taken))
	}
	for _, rec := range w.records(t) {
		if a := rec.Last(); a == nil || a.Outcome != batch.OutcomePass || !a.EvidenceValid || a.Worker != pub.ID {
			t.Errorf("trial %s: %+v", rec.Trial.ID, a)
		}
	}
}

// replan makes the world's plan and store those of spec (over the world's
// source).
func (w *world) replan(t testing.TB, spec batch.Spec) {
	t.Helper()
	spec.Sources = []string{filepath.Join(w.owned, "a")}
	data, _ := json.Marshal(spec)
	bs, err := batch.ParseSpec(data, filepath.Join(w.dir, spec.Name+".json"), w.set)
	if err != nil {
		t.Fatal(err)
	}
	if w.plan, err = batch.MakePlan(context.Background(), bs, w.set); err != nil {
		t.Fatal(err)
	}
	if w.store, err = batch.OpenStore(filepath.Join(w.dir, "coordinator"), w.plan.BatchID); err != nil {
		t.Fatal(err)
	}
}

// signed is a request for trial tr the world's coordinator signed, with a
// fresh nonce, as the coordinator publishes one.
func (w *world) signed(t *testing.T, tr batch.Trial, id string) ([]byte, natsexec.Request) {
	t.Helper()
	now := time.Now()
	req := natsexec.Request{RequestID: id, Trial: tr, Attempt: 1, AttemptID: batch.AttemptID(tr.ID, 1), Nonce: batch.NewNonce(),
		IssuedAt: now, Expires: now.Add(time.Hour)}
	data, err := natsexec.SignRequest(context.Background(), w.coord, req)
	if err != nil {
		t.Fatal(err)
	}
	return data, req
}

// client is a plain connection to the world's server (which has no
// authentication), as any client's.
func (w *world) client(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(w.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// Two copies of one signed request, handled at once by a worker with two
// free slots: the first is taken and held in Fetched until the second has
// been dropped as a replay, so the second was judged while the first was
// in hand. Only one runs.
func TestParallelCopiesOfARequestRunOnce(t *testing.T) {
	w := newWorld(t, 1)
	signer, pub, _ := w.key(t, "w")
	w.coordinator(t, 30*time.Second, pub) // the streams and the workers' consumer; it publishes nothing here
	js := w.client(t)
	data, req := w.signed(t, w.plan.Trials[0], "twice")
	w.publishRequest(t, js, data)
	w.publishRequest(t, js, data)
	var mu sync.Mutex
	var taken []natsexec.Request
	var dropped []error
	droppedOne := make(chan struct{})
	done := make(chan natsexec.Request, 2)
	wk := w.worker(t, "w", signer)
	wk.Slots = 2
	wk.Fetched = func(r natsexec.Request) {
		mu.Lock()
		taken = append(taken, r)
		mu.Unlock()
		select {
		case <-droppedOne:
		case <-time.After(liveness):
			t.Errorf("the second copy was not judged while the first was in hand (%s)", liveness)
		}
	}
	wk.Dropped = func(err error) {
		mu.Lock()
		dropped = append(dropped, err)
		if len(dropped) == 1 {
			close(droppedOne)
		}
		mu.Unlock()
	}
	wk.Released = func(r natsexec.Request) { done <- r }
	stop := w.start(t, "w", wk)
	select {
	case <-done:
	case <-time.After(liveness):
		t.Fatal("the request never finished")
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(taken) != 1 || taken[0].Nonce != req.Nonce {
		t.Errorf("taken %d times, want once", len(taken))
	}
	if len(dropped) != 1 || !errors.Is(dropped[0], natsexec.ErrRequest) || !strings.Contains(dropped[0].Error(), "a replayed request") {
		t.Errorf("dropped %v, want the second copy as a replayed request", dropped)
	}
}

// A worker stopped with three trials in hand (a Case that never exits)
// hands all three back: with an ack wait of ten minutes, only a nak makes
// them deliverable again, and each comes back at once as its second
// delivery.
func TestCancelledWorkerHandsBackAllInHand(t *testing.T) {
	w := newWorld(t, 3)
	w.replan(t, batch.Spec{Name: "hangs", Tasks: []batch.TaskRef{{Name: "note"}}, Agents: []batch.Agent{{Name: "hangs", Scenario: "hang"}}, Repeats: 3})
	signer, pub, _ := w.key(t, "w")
	w.coordinator(t, 10*time.Minute, pub)
	js := w.client(t)
	nonces := map[string]bool{}
	for i, tr := range w.plan.Trials {
		data, req := w.signed(t, tr, fmt.Sprint("hang-", i))
		w.publishRequest(t, js, data)
		nonces[req.Nonce] = true
	}
	h := newInHand(t, 3)
	wk := w.worker(t, "w", signer)
	wk.Slots, wk.Fetched, wk.Released = 3, h.fetched, h.released
	stop := w.start(t, "w", wk)
	select {
	case <-h.full:
	case <-time.After(liveness):
		t.Fatalf("the worker held %d trials, want 3", h.count())
	}
	stop() // returns when Run has returned
	if n := h.count(); n != 0 || len(h.release) != 3 {
		t.Fatalf("%d trials still in hand, %d released after the worker stopped; want all 3 let go", n, len(h.release))
	}
	cons, err := js.Consumer(context.Background(), natsexec.TrialsStream, natsexec.WorkerConsumer)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := cons.Fetch(3, jetstream.FetchMaxWait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	back := 0
	for msg := range msgs.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		r := readUnverified(t, msg.Data())
		if !nonces[r.Nonce] || meta.NumDelivered != 2 {
			t.Errorf("request %s came back on delivery %d; want one of the three on its second", r.RequestID, meta.NumDelivered)
		}
		back++
		_ = msg.Term()
	}
	if back != 3 {
		t.Errorf("%d of 3 trials were handed back", back)
	}
}

// watchLog passes a worker's log to the test and closes seen at the first
// line containing want.
type watchLog struct {
	t    *testing.T
	want string
	once sync.Once
	seen chan struct{}
}

func (l *watchLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	if strings.Contains(string(p), l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

// A trial whose run outlives its limits stops holding its message, and
// the server delivers it again, here to the same worker (the only one,
// with a free slot). That copy is the message in hand, not a replay: it is
// neither run nor dropped, but handed back, and a worker started after
// that takes it.
func TestRedeliveryOfATrialInHandIsLeftForOthers(t *testing.T) {
	w := newWorld(t, 1)
	w.replan(t, batch.Spec{Name: "stuck-here", Tasks: []batch.TaskRef{{Name: "note"}}, Agents: []batch.Agent{{Name: "hangs", Scenario: "hang"}}, Repeats: 1})
	a, apub, _ := w.key(t, "a")
	b, bpub, _ := w.key(t, "b")
	w.coordinator(t, time.Second, apub, bpub)
	js := w.client(t)
	data, req := w.signed(t, w.plan.Trials[0], "stuck")
	w.publishRequest(t, js, data)
	again := &watchLog{t: t, want: "delivered again while it still runs here", seen: make(chan struct{})}
	var mu sync.Mutex
	took := map[string]int{}
	var dropped []error
	wa := w.worker(t, "a", a)
	wa.Slots, wa.MaxHold, wa.Log = 2, 300*time.Millisecond, again
	wa.Fetched = func(r natsexec.Request) { mu.Lock(); took["a"]++; mu.Unlock() }
	wa.Dropped = func(err error) { mu.Lock(); dropped = append(dropped, err); mu.Unlock() }
	w.start(t, "a", wa)
	select {
	case <-again.seen:
	case <-time.After(liveness):
		t.Fatal("the stuck trial's message never came back to its worker")
	}
	bTook := make(chan natsexec.Request, 1)
	wb := w.worker(t, "b", b)
	wb.Fetched = func(r natsexec.Request) {
		select {
		case bTook <- r:
		default:
		}
	}
	w.start(t, "b", wb)
	select {
	case r := <-bTook:
		if r.Nonce != req.Nonce {
			t.Errorf("worker b took request %s, want the stuck one", r.RequestID)
		}
	case <-time.After(liveness):
		t.Fatal("no other worker got the stuck trial")
	}
	mu.Lock()
	defer mu.Unlock()
	if took["a"] != 1 || len(dropped) != 0 {
		t.Errorf("worker a took the trial %d times and dropped %v; want it taken once and its copy handed back, not dropped", took["a"], dropped)
	}
}
