package natsexec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
)

// Worker pulls trials and runs them with its own runs directory and key.
type Worker struct {
	URL  string
	Auth Auth // the worker's NATS identity (WorkerPermissions of its key)
	// Local runs a trial; its Base must carry a signing key: an unsigned
	// result is never counted.
	Local   batch.Local
	AckWait time.Duration // the in-progress ack period's base when the server's consumer info lacks one
	Log     io.Writer
	// Coordinators are the keys a request must be signed with to run
	// (the config's signing.coordinator_keys and --coordinator-key).
	Coordinators []attest.PublicKey
	Clock        func() time.Time // nil: time.Now
	// MaxHold caps how long in-progress acks keep one trial (0: the task's
	// timeouts and a margin, see maxHold).
	MaxHold time.Duration
	// Slots is how many trials the worker holds at once (0: SlotsFor's
	// default). It fetches only while a slot is free, so what it cannot
	// start stays on the server for other workers.
	Slots int
	// Fetched, when set, is told each time a verified trial is taken
	// (tests); Released each time a taken trial is let go (answered or
	// handed back); Dropped each time a message is dropped unrun.
	Fetched  func(Request)
	Released func(Request)
	Dropped  func(error)
}

// DefaultSlots is a worker's trials at once when neither --slots nor the
// config's worker.slots says: a coding agent's default max_in_flight, as
// the local executor runs, since such trials wait on a hosted model.
const DefaultSlots = batch.DefaultMaxInFlight

// SlotsFor is the trials at once of a worker asked for n: n itself when it
// is set (the operator sized it), else DefaultSlots bounded by memory, with
// why when memory is what bounded it ("" otherwise).
func SlotsFor(n int) (int, string) {
	if n > 0 {
		return n, ""
	}
	m, why := batch.MemoryBound(DefaultSlots)
	if why != "" {
		why += "; free memory, or give --slots (or the config's worker.slots) to change it"
	}
	return m, why
}

// Run takes trials until ctx is cancelled, up to Slots at once. Every
// trial in hand when ctx is cancelled is handed back (nak) for another
// worker before Run returns.
func (w Worker) Run(ctx context.Context) error {
	signer := w.Local.Base.Signing.Signer
	if signer == nil {
		return errors.New("a worker needs a signing key (CTO_HARNESS_SIGNING_KEY_FILE or the config's signing.key_file): the coordinator counts only signed runs")
	}
	if w.AckWait == 0 {
		w.AckWait = DefaultAckWait
	}
	if w.Log == nil {
		w.Log = io.Discard
	}
	if w.Clock == nil {
		w.Clock = time.Now
	}
	if len(w.Coordinators) == 0 {
		return errors.New("a worker runs only trial requests a coordinator signed, and no coordinator key is configured: list the coordinator's public key in the config's signing.coordinator_keys (or pass --coordinator-key FILE)")
	}
	keyID := signer.Public().ID
	w.Local.Worker = keyID
	w.Local.Unchecked = true // the coordinator validates the run it downloads
	slots, why := SlotsFor(w.Slots)
	if why != "" {
		fmt.Fprintf(w.Log, "worker %s: %s\n", keyID, why)
	}
	c, err := dial(w.URL, "cto-harness worker "+keyID, workerInbox(keyID), w.Auth)
	if err != nil {
		return err
	}
	defer c.close()
	cons, err := c.bindWorker(ctx, keyID, func(s string) { fmt.Fprintf(w.Log, "worker %s: %s\n", keyID, s) })
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	fmt.Fprintf(w.Log, "worker %s: waiting for trials at %s, %d at once\n", keyID, w.URL, slots)
	w.serve(ctx, c, cons, keyID, slots)
	// The naks and acks of the last trials go out before the connection
	// closes.
	_ = c.nc.FlushTimeout(5 * time.Second)
	return nil
}

// serve fetches one request whenever a slot is free and handles each in
// its own goroutine; it returns when ctx is cancelled and every trial in
// hand has been answered or handed back.
func (w Worker) serve(ctx context.Context, c *conn, cons jetstream.Consumer, keyID string, slots int) {
	free := make(chan struct{}, slots) // one token per trial in hand
	ran := &nonces{seen: map[string]*taking{}}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case free <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			return
		}
		msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			<-free
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(w.Log, "worker %s: fetch: %v\n", keyID, err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		msg, ok := <-msgs.Messages() // Fetch(1): one message at most
		if !ok || ctx.Err() != nil {
			if ok {
				_ = msg.Nak() // it came as the worker stopped: another worker takes it now
			}
			<-free
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-free }()
			w.handle(ctx, c, cons, msg, keyID, ran)
		}()
	}
}

// nonces are the request nonces this process has taken, each with the
// stream sequence of the message that brought it and whether its trial is
// still in hand. Taking one is a single step under the lock, so of two
// copies of a request handled at once only one runs.
type nonces struct {
	mu   sync.Mutex
	seen map[string]*taking
}

type taking struct {
	seq    uint64
	inHand bool
	said   bool // the worker's log said it was delivered again
}

// verdict is what a request's nonce says about running it here.
type verdict int

const (
	fresh    verdict = iota // never taken here: it may run
	replayed                // taken before: never runs again
	// running: the server delivered again the message of a trial still in
	// hand here (its in-progress acks stopped because the run outlived its
	// limits); it is left for another worker, neither run nor dropped.
	running
)

// check is the nonce's verdict for a message with stream sequence seq.
func (n *nonces) check(nonce string, seq uint64) verdict {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.verdictLocked(nonce, seq)
}

func (n *nonces) verdictLocked(nonce string, seq uint64) verdict {
	t, ok := n.seen[nonce]
	switch {
	case !ok:
		return fresh
	case t.inHand && seq != 0 && t.seq == seq:
		return running
	}
	return replayed
}

// take takes the nonce for the message with stream sequence seq when its
// verdict is fresh, and returns the verdict.
func (n *nonces) take(nonce string, seq uint64) verdict {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.verdictLocked(nonce, seq)
	if v == fresh {
		n.seen[nonce] = &taking{seq: seq, inHand: true}
	}
	return v
}

// firstAgain says whether this is the first time the nonce's message came
// back while its trial is in hand (the log says so once).
func (n *nonces) firstAgain(nonce string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.seen[nonce]
	if !ok || t.said {
		return false
	}
	t.said = true
	return true
}

// release says the nonce's trial is no longer in hand; the nonce stays
// taken.
func (n *nonces) release(nonce string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t, ok := n.seen[nonce]; ok {
		t.inHand = false
	}
}

func (w Worker) handle(ctx context.Context, c *conn, cons jetstream.Consumer, msg jetstream.Msg, keyID string, ran *nonces) {
	req, ok := w.admit(ctx, msg, keyID, ran)
	if !ok {
		return
	}
	defer ran.release(req.Nonce)
	if w.Fetched != nil {
		w.Fetched(req)
	}
	if w.Released != nil {
		defer w.Released(req)
	}
	fmt.Fprintf(w.Log, "worker %s: trial %s attempt %d started\n", keyID, req.Trial.ID, req.Attempt)
	if data, err := json.Marshal(Result{RequestID: req.RequestID, BatchID: req.Trial.BatchID, TrialID: req.Trial.ID, Attempt: req.Attempt,
		AttemptID: req.AttemptID, Worker: keyID, Started: true}); err == nil {
		// Progress only: a lost one costs the coordinator's display.
		_ = c.nc.Publish(ResultsPrefix+req.Trial.BatchID, data)
	}
	stop := w.holdWhileRunning(msg, cons, req, keyID)
	res := w.run(ctx, c, req, keyID)
	stop()
	if ctx.Err() != nil {
		_ = msg.Nak() // stopping: another worker takes it now
		return
	}
	data, err := json.Marshal(res)
	if err == nil {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_, err = c.js.Publish(pctx, ResultsPrefix+req.Trial.BatchID, data)
		cancel()
	}
	if err != nil {
		fmt.Fprintf(w.Log, "worker %s: publish the result of trial %s: %v; handing the trial back\n", keyID, req.Trial.ID, err)
		_ = msg.Nak()
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := msg.DoubleAck(actx); err != nil {
		fmt.Fprintf(w.Log, "worker %s: ack trial %s: %v (it may run again; it is counted once)\n", keyID, req.Trial.ID, err)
	}
	fmt.Fprintf(w.Log, "worker %s: trial %s attempt %d finished: %s\n", keyID, req.Trial.ID, req.Attempt, describeResult(res))
}

// admit decides whether a message is a trial this worker runs: signed by
// one of its coordinators, not expired, not taken here before (the nonce
// is taken as it is admitted), and not one it should leave to others.
// Anything else is dropped (never run, never answered) or handed back.
func (w Worker) admit(ctx context.Context, msg jetstream.Msg, keyID string, ran *nonces) (Request, bool) {
	req, _, err := OpenRequest(ctx, msg.Data(), w.Coordinators, w.Clock())
	var seq uint64
	meta, merr := msg.Metadata()
	if merr == nil {
		seq = meta.Sequence.Stream
	}
	v := fresh
	if err == nil {
		v = ran.check(req.Nonce, seq)
		if v == fresh && merr == nil && meta.NumDelivered < 5 && slices.Contains(req.Avoid, keyID) {
			_ = msg.NakWithDelay(500 * time.Millisecond) // let a worker that has not failed it take it
			return req, false
		}
		if v == fresh {
			v = ran.take(req.Nonce, seq) // a copy handled at the same time may have taken it first
		}
	}
	switch {
	case err == nil && v == running:
		if ran.firstAgain(req.Nonce) {
			fmt.Fprintf(w.Log, "worker %s: trial %s attempt %d was delivered again while it still runs here: left for another worker\n", keyID, req.Trial.ID, req.Attempt)
		}
		_ = msg.NakWithDelay(500 * time.Millisecond)
		return req, false
	case err == nil && v == replayed:
		err = fmt.Errorf("%w: request nonce %s was run here already (a replayed request)", ErrRequest, req.Nonce)
	}
	if err != nil {
		// Unsigned, signed by no coordinator of this worker's, expired,
		// malformed or replayed.
		fmt.Fprintf(w.Log, "worker %s: a trial message was dropped: %v\n", keyID, err)
		if w.Dropped != nil {
			w.Dropped(err)
		}
		_ = msg.Term()
		return req, false
	}
	return req, true
}

// holdWhileRunning keeps the trial this worker's while it runs: an
// in-progress ack resets the server's ack-wait timer. Should this process
// die, the acks stop and the trial is delivered to another worker after
// ack_wait. The extension is capped by what the trial's own limits allow:
// a run that outlives them is stuck, and its trial goes to another worker.
// The returned func stops the acks.
func (w Worker) holdWhileRunning(msg jetstream.Msg, cons jetstream.Consumer, req Request, keyID string) func() {
	ackWait := w.AckWait
	if info := cons.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		ackWait = info.Config.AckWait
	}
	hold := w.maxHold(req.Trial)
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(ackWait / 3)
		defer t.Stop()
		capped := time.NewTimer(hold)
		defer capped.Stop()
		for {
			select {
			case <-stop:
				return
			case <-capped.C:
				fmt.Fprintf(w.Log, "worker %s: trial %s attempt %d has run for %s, longer than its limits allow: no more in-progress acks, so the server may give it to another worker\n",
					keyID, req.Trial.ID, req.Attempt, hold)
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(stop) }
}

// holdMargin is the time a run may take beyond its task's own timeouts
// (copy, proofs, checkout, validation, upload).
const holdMargin = 15 * time.Minute

// maxHold is how long the worker keeps a trial with in-progress acks: the
// task's Case, setup and verification timeouts and holdMargin (or
// MaxHold, when set).
func (w Worker) maxHold(t batch.Trial) time.Duration {
	if w.MaxHold > 0 {
		return w.MaxHold
	}
	spec, err := t.Spec(w.Local.Base.Schemas)
	if err != nil {
		return holdMargin
	}
	secs := spec.CaseTimeoutSeconds + spec.Verification.TimeoutSeconds
	if spec.Setup != nil {
		secs += spec.Setup.TimeoutSeconds
	}
	return time.Duration(secs)*time.Second + holdMargin
}

func describeResult(r Result) string {
	if r.Error != "" {
		return "error: " + r.Error
	}
	return "uploaded " + r.Object
}

// run makes the run and uploads it; a failure is reported in the result.
func (w Worker) run(ctx context.Context, c *conn, req Request, keyID string) Result {
	res := Result{RequestID: req.RequestID, BatchID: req.Trial.BatchID, TrialID: req.Trial.ID, Attempt: req.Attempt, AttemptID: req.AttemptID, Worker: keyID}
	trial, why := w.policy(req.Trial)
	if why != "" {
		fmt.Fprintf(w.Log, "worker %s: trial %s attempt %d refused: %s\n", keyID, req.Trial.ID, req.Attempt, why)
		res.Error, res.Refused = "refused by the worker's policy: "+why, true
		return res
	}
	a, err := w.Local.RunBound(ctx, trial, req.Attempt, req.Nonce)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.RunID = a.RunID
	tmp, err := os.CreateTemp("", "cto-harness-result-*.tar")
	if err != nil {
		res.Error = "archive the run: " + err.Error()
		return res
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	if err := pack(io.MultiWriter(tmp, h), a.RunDir); err != nil {
		res.Error = "archive the run: " + err.Error()
		return res
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Object = ObjectName(req.AttemptID, keyID)
	if _, err := c.obj.Put(ctx, jetstream.ObjectMeta{Name: res.Object, Description: "run " + a.RunID}, tmp); err != nil {
		res.Error = "upload the run: " + err.Error()
		res.Object = ""
		return res
	}
	res.SHA256, res.Size = hex.EncodeToString(h.Sum(nil)), size
	return res
}

// policy applies the worker's own config to a verified request: every
// allowlist the trial names must be granted by the worker's config network
// lists (the trial's lists are the run's flags, so they must lie inside
// what the config grants), and a coding agent's endpoint and key variable
// come from the worker's config for that kind, never from the request. It
// returns the trial to run, or why the request is refused.
func (w Worker) policy(t batch.Trial) (batch.Trial, string) {
	var grant config.NetworkAllow
	if n := w.Local.Base.Config.Network; n != nil {
		grant = *n
	}
	for _, l := range []struct {
		name         string
		asked, given []string
	}{{"allow_net", t.AllowNet, grant.CaseAllow}, {"verify_allow_net", t.VerifyAllowNet, grant.VerifyAllow}, {"setup_allow_net", t.SetupAllowNet, grant.SetupAllow}} {
		asked, err := egress.ParseList(l.asked, egress.SourceFlag, nil)
		if err != nil {
			return t, fmt.Sprintf("its %s is invalid: %v", l.name, err)
		}
		given, err := egress.ParseList(l.given, egress.SourceConfig, nil)
		if err != nil {
			return t, fmt.Sprintf("this worker's config network list for %s is invalid: %v", l.name, err)
		}
		if _, refused := egress.Narrow(asked, given); len(refused) > 0 {
			return t, fmt.Sprintf("its %s names %s, which this worker's config network lists do not grant", l.name, strings.Join(refused, ", "))
		}
	}
	a := t.Agent
	if a.Kind == "" || a.Scripted != "" {
		if a.BaseURL != "" || a.APIKeyEnv != "" {
			return t, "it names a base_url or api_key_env for an agent that takes none (the fake Case or the scripted model server)"
		}
		return t, ""
	}
	var mine *config.WorkerAgent
	if wc := w.Local.Base.Config.Worker; wc != nil {
		for i := range wc.Agents {
			if wc.Agents[i].Kind == a.Kind {
				mine = &wc.Agents[i]
			}
		}
	}
	if mine == nil {
		return t, fmt.Sprintf("this worker has no endpoint for agent kind %q: list it in the config's worker.agents (kind, base_url, api_key_env)", a.Kind)
	}
	if (a.BaseURL != "" && a.BaseURL != mine.BaseURL) || (a.APIKeyEnv != "" && a.APIKeyEnv != mine.APIKeyEnv) {
		return t, fmt.Sprintf("it names base_url %q and api_key_env %q for %s; this worker gives that agent only its own (worker.agents in its config)", a.BaseURL, a.APIKeyEnv, a.Kind)
	}
	t.Agent.BaseURL, t.Agent.APIKeyEnv = mine.BaseURL, mine.APIKeyEnv
	return t, ""
}
