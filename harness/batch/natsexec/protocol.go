// Package natsexec runs a batch's trials on worker machines through NATS
// JetStream: the coordinator publishes each trial to a work-queue stream,
// workers pull them with explicit acks (keeping a long trial alive with
// in-progress acks), upload the finished run directory to an object store
// under a key made from the trial id, and publish a result. The coordinator
// downloads the run, checks the archive digest, re-validates the whole run
// against the configured worker keys and only then counts it. Delivery is at
// least once; counting is once per request, so a redelivered trial that two
// workers both finish is counted once.
package natsexec

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/cto-harness/cto-harness/harness/batch"
)

// Names on the JetStream server. They are shared by every batch: a trial
// carries its batch id, and results go to a subject per batch.
const (
	TrialsStream   = "CTO_HARNESS_TRIALS"
	TrialsPrefix   = "cto-harness.trials." // + batch id; work-queue: each trial goes to one worker
	ResultsStream  = "CTO_HARNESS_RESULTS"
	ResultsPrefix  = "cto-harness.results." // + batch id
	WorkerConsumer = "cto-harness-workers"
	RunsBucket     = "cto-harness-runs"
)

// DefaultAckWait is how long a worker may be silent before its trial is
// delivered to another worker.
const DefaultAckWait = 2 * time.Minute

// Request is one trial attempt on the wire.
type Request struct {
	RequestID string      `json:"request_id"` // one per publish; a result answers one
	Trial     batch.Trial `json:"trial"`
	Attempt   int         `json:"attempt"`
	AttemptID string      `json:"attempt_id"` // batch.AttemptID(trial id, attempt)
	// Avoid lists workers (key ids) whose attempt at this trial failed for
	// infrastructure reasons; they leave it to others while others exist.
	Avoid []string `json:"avoid,omitempty"`
}

// Result is a worker's answer. Nothing in it is believed: the coordinator
// reads outcome, tokens and signature from the run it downloads.
type Result struct {
	RequestID string `json:"request_id"`
	BatchID   string `json:"batch_id"`
	TrialID   string `json:"trial_id"`
	Attempt   int    `json:"attempt"`
	AttemptID string `json:"attempt_id"`
	Worker    string `json:"worker"` // the worker's key id, as it claims
	RunID     string `json:"run_id"`
	Object    string `json:"object"` // object store key; "" when Error is set
	SHA256    string `json:"sha256"` // of the archive
	Size      int64  `json:"size"`
	Error     string `json:"error,omitempty"` // the worker could not make the run
}

// ObjectName is a result archive's key: the attempt id (the trial id and
// the attempt's index) and the worker, so that two workers finishing one
// redelivered attempt do not overwrite each other.
func ObjectName(attemptID, worker string) string {
	return fmt.Sprintf("%s.%s.tar", attemptID, worker)
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
