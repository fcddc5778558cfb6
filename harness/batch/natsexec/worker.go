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
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cto-harness/cto-harness/harness/batch"
)

// Worker pulls trials and runs them with its own runs directory and key.
type Worker struct {
	URL string
	// Local runs a trial; its Base must carry a signing key: an unsigned
	// result is never counted.
	Local   batch.Local
	AckWait time.Duration // used only when the consumer does not exist yet
	Log     io.Writer
	// Fetched, when set, is told each time a trial is taken (tests).
	Fetched func(Request)
}

// Run takes trials until ctx is cancelled. A trial in hand when ctx is
// cancelled is handed back (nak) for another worker.
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
	keyID := signer.Public().ID
	w.Local.Worker = keyID
	w.Local.Unchecked = true // the coordinator validates the run it downloads
	c, err := dial(ctx, w.URL, "cto-harness worker "+keyID)
	if err != nil {
		return err
	}
	defer c.close()
	cons, err := c.workerConsumer(ctx, w.AckWait, false)
	if err != nil {
		return fmt.Errorf("the workers' consumer: %w", err)
	}
	fmt.Fprintf(w.Log, "worker %s: waiting for trials at %s\n", keyID, w.URL)
	for ctx.Err() == nil {
		msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(w.Log, "worker %s: fetch: %v\n", keyID, err)
			time.Sleep(time.Second)
			continue
		}
		for msg := range msgs.Messages() {
			w.handle(ctx, c, cons, msg, keyID)
		}
	}
	return nil
}

func (w Worker) handle(ctx context.Context, c *conn, cons jetstream.Consumer, msg jetstream.Msg, keyID string) {
	var req Request
	err := json.Unmarshal(msg.Data(), &req)
	if err == nil && (req.RequestID == "" || req.Trial.ID == "") {
		err = errors.New("it names no request or trial")
	}
	if err == nil && req.AttemptID != batch.AttemptID(req.Trial.ID, req.Attempt) {
		// A coordinator of another version, or a forged request.
		err = fmt.Errorf("its attempt id %q is not attempt %d of trial %s", req.AttemptID, req.Attempt, req.Trial.ID)
	}
	if err != nil {
		fmt.Fprintf(w.Log, "worker %s: a trial message was dropped: %v\n", keyID, err)
		_ = msg.Term()
		return
	}
	if meta, err := msg.Metadata(); err == nil && meta.NumDelivered < 5 {
		for _, a := range req.Avoid {
			if a == keyID {
				_ = msg.NakWithDelay(500 * time.Millisecond) // let a worker that has not failed it take it
				return
			}
		}
	}
	if w.Fetched != nil {
		w.Fetched(req)
	}
	fmt.Fprintf(w.Log, "worker %s: trial %s attempt %d started\n", keyID, req.Trial.ID, req.Attempt)
	// Keep the trial ours while it runs: an in-progress ack resets the
	// server's ack-wait timer. Should this process die, the acks stop and
	// the trial is delivered to another worker after ack_wait.
	ackWait := w.AckWait
	if info := cons.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		ackWait = info.Config.AckWait
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	res := w.run(ctx, c, req, keyID)
	close(stop)
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

func describeResult(r Result) string {
	if r.Error != "" {
		return "error: " + r.Error
	}
	return "uploaded " + r.Object
}

// run makes the run and uploads it; a failure is reported in the result.
func (w Worker) run(ctx context.Context, c *conn, req Request, keyID string) Result {
	res := Result{RequestID: req.RequestID, BatchID: req.Trial.BatchID, TrialID: req.Trial.ID, Attempt: req.Attempt, AttemptID: req.AttemptID, Worker: keyID}
	a, err := w.Local.RunTrial(ctx, req.Trial, req.Attempt)
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
