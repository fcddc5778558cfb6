package natsexec

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// CoordinatorOptions configure a coordinator.
type CoordinatorOptions struct {
	URL     string
	Auth    Auth // the coordinator's NATS identity (CoordinatorPermissions)
	Store   batch.Store
	BatchID string
	Schemas *schemas.Set
	// Workers are the keys a result must be signed with to count.
	Workers []attest.PublicKey
	// Signer signs every request; workers list its public key.
	Signer *attest.Signer
	// RequestTTL bounds how long a request may wait for a worker (0:
	// DefaultRequestTTL).
	RequestTTL time.Duration
	AckWait    time.Duration // 0: DefaultAckWait
	// MaxRefusals is how many refused results one attempt tolerates before
	// it gives up (0: 3); the trial then has no counted attempt.
	MaxRefusals int
	Log         io.Writer // nil: quiet
	Clock       func() time.Time
	NewID       func() string // request ids (default: 24 random hex digits)
	NewNonce    func() string // request nonces (default: batch.NewNonce)
}

// Coordinator is a batch.Runner that hands trials to workers.
type Coordinator struct {
	o    CoordinatorOptions
	c    *conn
	sub  jetstream.ConsumeContext
	mu   sync.Mutex
	wait map[string]chan Result // by request id
	// ats tell the executor where each request waited for stands. They
	// are called as its messages are delivered, in their order, so that a
	// worker's answer to one trial is counted before its word that it took
	// the next.
	ats map[string]func(batch.AttemptState)
	// avoid is, per trial, the workers whose attempt failed for the
	// machine's reasons.
	avoid map[string][]string
}

// NewCoordinator connects, makes sure the streams exist, sets the workers'
// ack wait, and starts listening for the batch's results.
func NewCoordinator(ctx context.Context, o CoordinatorOptions) (*Coordinator, error) {
	if o.AckWait == 0 {
		o.AckWait = DefaultAckWait
	}
	if o.MaxRefusals == 0 {
		o.MaxRefusals = 3
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.NewID == nil {
		o.NewID = newID
	}
	if o.NewNonce == nil {
		o.NewNonce = batch.NewNonce
	}
	if o.RequestTTL == 0 {
		o.RequestTTL = DefaultRequestTTL
	}
	if o.Signer == nil {
		return nil, fmt.Errorf("no signing key: a coordinator signs every trial request and workers run only signed ones; configure a key (%s or the config's signing.key_file) and list its public key in each worker's signing.coordinator_keys", attest.EnvSigningKeyFile)
	}
	if len(o.Workers) == 0 {
		return nil, fmt.Errorf("no worker keys: a result is counted only when a configured worker key signed it")
	}
	c, err := dial(o.URL, "cto-harness coordinator "+o.BatchID, coordinatorInbox, o.Auth)
	if err != nil {
		return nil, err
	}
	if err := c.createStreams(ctx, o.AckWait); err != nil {
		c.close()
		return nil, err
	}
	co := &Coordinator{o: o, c: c, wait: map[string]chan Result{}, ats: map[string]func(batch.AttemptState){}, avoid: map[string][]string{}}
	// An ordered consumer of this batch's results, from now on: a request
	// made before this coordinator started is made again, not awaited.
	cons, err := c.js.OrderedConsumer(ctx, ResultsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ResultsPrefix + o.BatchID}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		c.close()
		return nil, fmt.Errorf("results consumer: %w", err)
	}
	if co.sub, err = cons.Consume(co.deliver); err != nil {
		c.close()
		return nil, err
	}
	return co, nil
}

// Close stops listening, withdraws the batch's requests no worker has
// finished (a stopped batch leaves no work behind; its next run publishes
// them again), and disconnects.
func (co *Coordinator) Close() {
	co.sub.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s, err := co.c.js.Stream(ctx, TrialsStream); err == nil {
		if err := s.Purge(ctx, jetstream.WithPurgeSubject(TrialsPrefix+co.o.BatchID)); err != nil {
			fmt.Fprintf(co.o.Log, "coordinator: could not withdraw the batch's open requests: %v\n", err)
		}
	}
	co.c.close()
}

func (co *Coordinator) deliver(msg jetstream.Msg) {
	var r Result
	if err := json.Unmarshal(msg.Data(), &r); err != nil {
		fmt.Fprintf(co.o.Log, "coordinator: a result that does not decode was ignored: %v\n", err)
		return
	}
	if r.Started {
		co.mu.Lock()
		at := co.ats[r.RequestID]
		co.mu.Unlock()
		if at != nil {
			at(batch.Running)
		}
		return
	}
	co.mu.Lock()
	ch, at := co.wait[r.RequestID], co.ats[r.RequestID]
	delete(co.wait, r.RequestID)
	delete(co.ats, r.RequestID)
	co.mu.Unlock()
	if ch != nil && at != nil {
		at(batch.Checking)
	}
	if ch == nil {
		// A second answer to one request (the trial was redelivered and two
		// workers finished it), or one to a request of an earlier run.
		fmt.Fprintf(co.o.Log, "coordinator: result of attempt %s from worker %s not counted: its request was answered already or is not this run's\n",
			r.AttemptID, r.Worker)
		return
	}
	ch <- r
}

// RunTrial publishes one attempt and waits for a result it can count.
func (co *Coordinator) RunTrial(ctx context.Context, t batch.Trial, attempt int) (batch.Attempt, error) {
	return co.RunTrialTracked(ctx, t, attempt, func(batch.AttemptState) {})
}

// RunTrialTracked is RunTrial telling at where the attempt stands: queued
// when published, running when a worker says it took it, checking when a
// worker's answer arrived.
func (co *Coordinator) RunTrialTracked(ctx context.Context, t batch.Trial, attempt int, at func(batch.AttemptState)) (batch.Attempt, error) {
	var refused []batch.Refusal
	for len(refused) < co.o.MaxRefusals {
		co.mu.Lock()
		now := co.o.Clock().UTC()
		req := Request{RequestID: co.o.NewID(), Trial: t, Attempt: attempt, AttemptID: batch.AttemptID(t.ID, attempt), Nonce: co.o.NewNonce(),
			IssuedAt: now, Expires: now.Add(co.o.RequestTTL), Avoid: append([]string(nil), co.avoid[t.ID]...)}
		ch := make(chan Result, 1)
		co.wait[req.RequestID] = ch
		co.ats[req.RequestID] = at
		co.mu.Unlock()
		at(batch.Queued)
		data, err := SignRequest(ctx, co.o.Signer, req)
		if err != nil {
			co.forget(req.RequestID)
			return batch.Attempt{}, fmt.Errorf("sign the request of trial %s: %w", t.ID, err)
		}
		if _, err := co.c.js.Publish(ctx, TrialsPrefix+t.BatchID, data); err != nil {
			co.forget(req.RequestID)
			return batch.Attempt{}, fmt.Errorf("publish trial %s: %w", t.ID, err)
		}
		sent := co.o.Clock()
		var res Result
		select {
		case res = <-ch:
			at(batch.Checking)
		case <-ctx.Done():
			co.forget(req.RequestID)
			return batch.Attempt{}, ctx.Err()
		}
		if res.Error != "" {
			co.avoidWorker(t.ID, res.Worker)
			src := "the worker could not make the run"
			if res.Refused {
				src = "the worker's policy refused the request"
			}
			return batch.Attempt{Outcome: batch.OutcomeInfraFailed, OutcomeSource: src, Worker: res.Worker, Nonce: req.Nonce,
				Note: "worker " + res.Worker + ": " + res.Error, Refused: refused}, nil
		}
		a, why := co.fetch(ctx, req, res)
		if why != "" {
			fmt.Fprintf(co.o.Log, "coordinator: refused the result of attempt %s from worker %s: %s\n", req.AttemptID, res.Worker, why)
			refused = append(refused, batch.Refusal{Worker: res.Worker, Reason: why, At: co.o.Clock().UTC()})
			continue
		}
		if a.Outcome == batch.OutcomeInfraFailed {
			co.avoidWorker(t.ID, a.Worker)
		}
		a.Refused = refused
		// The time is the run's own (its report's start and finish); the
		// rest of the wall time from publishing to a counted result is
		// queue wait and transfer.
		wall := co.o.Clock().Sub(sent).Milliseconds()
		if a.StartedAt.IsZero() {
			a.StartedAt, a.DurationMs = sent.UTC(), wall
		}
		a.QueueMs = max(0, wall-a.DurationMs)
		return a, nil
	}
	return batch.Attempt{Outcome: batch.OutcomeInfraFailed, OutcomeSource: "every result was refused",
		Note: fmt.Sprintf("%d results were refused; none counted", len(refused)), Refused: refused}, nil
}

func (co *Coordinator) forget(id string) {
	co.mu.Lock()
	delete(co.wait, id)
	delete(co.ats, id)
	co.mu.Unlock()
}

func (co *Coordinator) avoidWorker(trial, worker string) {
	co.mu.Lock()
	defer co.mu.Unlock()
	for _, w := range co.avoid[trial] {
		if w == worker {
			return
		}
	}
	co.avoid[trial] = append(co.avoid[trial], worker)
}

// fetch downloads and checks one result; a non-empty reason refuses it.
func (co *Coordinator) fetch(ctx context.Context, req Request, res Result) (batch.Attempt, string) {
	if res.BatchID != req.Trial.BatchID || res.TrialID != req.Trial.ID || res.Attempt != req.Attempt || res.AttemptID != req.AttemptID {
		return batch.Attempt{}, fmt.Sprintf("it answers attempt %q (trial %s attempt %d) of batch %s, not the request's %s", res.AttemptID, res.TrialID, res.Attempt, res.BatchID, req.AttemptID)
	}
	if res.Object != ObjectName(req.AttemptID, res.Worker) {
		return batch.Attempt{}, fmt.Sprintf("object name %q is not the trial's", res.Object)
	}
	// Each worker writes its own bucket only (WorkerPermissions): the run
	// is read from the bucket of the worker the result names.
	if !keyIDPattern.MatchString(res.Worker) {
		return batch.Attempt{}, fmt.Sprintf("it names worker %q, which is not a key id", res.Worker)
	}
	store, err := co.c.js.ObjectStore(ctx, WorkerBucket(res.Worker))
	if err != nil {
		return batch.Attempt{}, fmt.Sprintf("worker %s's bucket %s: %v", res.Worker, WorkerBucket(res.Worker), err)
	}
	obj, err := store.Get(ctx, res.Object)
	if err != nil {
		return batch.Attempt{}, fmt.Sprintf("download %s: %v", res.Object, err)
	}
	defer obj.Close()
	dest := filepath.Join(co.o.Store.Dir, "remote", req.RequestID)
	a, why := co.check(ctx, obj, dest, req, res)
	if why != "" {
		// Nothing of a refused archive stays: its digest and the reason
		// are in the trial record's refusal.
		if err := os.RemoveAll(dest); err != nil {
			fmt.Fprintf(co.o.Log, "coordinator: could not remove the refused archive at %s: %v\n", dest, err)
		}
	}
	return a, why
}

// check unpacks and checks one downloaded archive under dest.
func (co *Coordinator) check(ctx context.Context, obj io.Reader, dest string, req Request, res Result) (batch.Attempt, string) {
	// The object store checks its own SHA-256 digest as the download ends
	// (a mismatch fails the read); the archive's digest is checked against
	// what the worker published too.
	runDir, sum, err := unpack(ctx, obj, dest, res.RunID)
	if err != nil {
		return batch.Attempt{}, fmt.Sprintf("unpack %s (sha256 %s as published): %v", res.Object, res.SHA256, err)
	}
	if sum != res.SHA256 {
		return batch.Attempt{}, fmt.Sprintf("archive digest %s, the worker published %s", sum, res.SHA256)
	}
	a := batch.DescribeWith(ctx, runDir, co.o.Schemas, validators.RunOptions{Trusted: co.o.Workers, RequireSignature: true, Relocated: true})
	if !a.EvidenceValid {
		errs := a.EvidenceErrors
		if len(errs) > 3 {
			errs = append(errs[:3:3], fmt.Sprintf("and %d more", len(a.EvidenceErrors)-3))
		}
		return batch.Attempt{}, "its evidence did not validate against the worker keys: " + strings.Join(errs, "; ")
	}
	if a.KeyID != res.Worker {
		return batch.Attempt{}, fmt.Sprintf("it claims worker %s but the run is signed by %s", res.Worker, a.KeyID)
	}
	if why := batch.CheckBinding(req.Trial, req.Attempt, req.Nonce, a.Binding); why != "" {
		return batch.Attempt{}, why
	}
	a.Worker = a.KeyID
	a.Nonce = req.Nonce
	return a, ""
}
