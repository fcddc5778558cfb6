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
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cto-harness/cto-harness/attest"
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

// RequestPredicateType is the predicate type of a signed trial request: an
// in-toto Statement whose one subject is the attempt id with the sha256 of
// the request's JSON, and whose predicate carries that JSON.
const RequestPredicateType = "https://cto-harness.invalid/attestation/trial-request/v1"

// DefaultRequestTTL is how long a published request may wait in the queue
// before a worker refuses it as expired.
const DefaultRequestTTL = 24 * time.Hour

// Request is one trial attempt. On the wire it is the predicate of a
// statement the coordinator signs (DSSE): a worker runs only requests a
// coordinator key of its own config signed, before Expires, once per nonce.
// The whole trial is under the signature: source and HEAD, task spec and
// digest, agent, profile, allowlists, repeat, spec digest.
type Request struct {
	RequestID string      `json:"request_id"` // one per publish; a result answers one
	Trial     batch.Trial `json:"trial"`
	Attempt   int         `json:"attempt"`
	AttemptID string      `json:"attempt_id"` // batch.AttemptID(trial id, attempt)
	// Nonce is fresh per request; the run records it in its trial binding,
	// so that a run made for one request answers no other.
	Nonce    string    `json:"nonce"`
	IssuedAt time.Time `json:"issued_at"`
	Expires  time.Time `json:"expires"`
	// Avoid lists workers (key ids) whose attempt at this trial failed for
	// infrastructure reasons; they leave it to others while others exist.
	Avoid []string `json:"avoid,omitempty"`
}

// ErrRequest marks a trial message a worker will not run.
var ErrRequest = errors.New("trial request refused")

var noncePattern = regexp.MustCompile(`^[0-9a-f]{32,128}$`)

// requestPredicate carries the request's exact JSON as a string: a JSON
// object would pass through the statement's protobuf form, which reorders
// keys and rewrites numbers, and the trial's task spec is digested byte for
// byte.
type requestPredicate struct {
	Request string `json:"request"`
}

// SignRequest is the message the coordinator publishes for req.
func SignRequest(ctx context.Context, s *attest.Signer, req Request) ([]byte, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	payload, err := attest.NewStatement([]attest.Subject{{Name: req.AttemptID, SHA256: hex.EncodeToString(sum[:])}}, RequestPredicateType,
		requestPredicate{Request: string(raw)})
	if err != nil {
		return nil, err
	}
	return attest.Sign(ctx, s, payload)
}

// OpenRequest verifies a trial message against the coordinator keys and
// returns the request and the key that signed it. Unsigned, unknown-key,
// malformed and expired requests, and requests whose subject is not their
// own trial, are refused (ErrRequest).
func OpenRequest(ctx context.Context, data []byte, coordinators []attest.PublicKey, now time.Time) (Request, string, error) {
	if len(coordinators) == 0 {
		return Request{}, "", fmt.Errorf("%w: this worker trusts no coordinator key (signing.coordinator_keys in its config, or --coordinator-key)", ErrRequest)
	}
	env, err := attest.ParseEnvelope(data)
	if err != nil {
		return Request{}, "", fmt.Errorf("%w: not a signed request: %v", ErrRequest, err)
	}
	key, err := env.Verify(ctx, coordinators)
	if err != nil {
		return Request{}, "", fmt.Errorf("%w: %v", ErrRequest, err)
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		return Request{}, key, fmt.Errorf("%w: %v", ErrRequest, err)
	}
	if st.PredicateType != RequestPredicateType {
		return Request{}, key, fmt.Errorf("%w: predicate type %q, want %q", ErrRequest, st.PredicateType, RequestPredicateType)
	}
	var pred requestPredicate
	dec := json.NewDecoder(bytes.NewReader(st.Predicate))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pred); err != nil {
		return Request{}, key, fmt.Errorf("%w: the predicate does not decode: %v", ErrRequest, err)
	}
	var req Request
	dec = json.NewDecoder(strings.NewReader(pred.Request))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return Request{}, key, fmt.Errorf("%w: the request does not decode: %v", ErrRequest, err)
	}
	sum := sha256.Sum256([]byte(pred.Request))
	switch {
	case req.RequestID == "" || req.Trial.ID == "":
		return req, key, fmt.Errorf("%w: it names no request or trial", ErrRequest)
	case req.AttemptID != batch.AttemptID(req.Trial.ID, req.Attempt):
		return req, key, fmt.Errorf("%w: its attempt id %q is not attempt %d of trial %s", ErrRequest, req.AttemptID, req.Attempt, req.Trial.ID)
	case len(st.Subjects) != 1 || st.Subjects[0].Name != req.AttemptID || st.Subjects[0].SHA256 != hex.EncodeToString(sum[:]):
		return req, key, fmt.Errorf("%w: its subject is not its own request", ErrRequest)
	case !noncePattern.MatchString(req.Nonce):
		return req, key, fmt.Errorf("%w: its nonce %q is not 32 to 128 hex digits", ErrRequest, req.Nonce)
	case !now.Before(req.Expires):
		return req, key, fmt.Errorf("%w: it expired at %s", ErrRequest, req.Expires.UTC().Format(time.RFC3339))
	case req.IssuedAt.After(now.Add(5 * time.Minute)):
		return req, key, fmt.Errorf("%w: it is issued in the future (%s); check the clocks", ErrRequest, req.IssuedAt.UTC().Format(time.RFC3339))
	}
	return req, key, nil
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
	// Refused says the worker would not run the request: its policy does
	// not allow what the request asks (Error says what).
	Refused bool `json:"refused,omitempty"`
	// Started is a progress message, not a result: the worker has taken
	// the request and its run begins. It moves the attempt from queued to
	// running on the coordinator's display, and nothing else.
	Started bool `json:"started,omitempty"`
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
