package batch

import (
	"encoding/json"

	"errors"
	"fmt"
	ctoharness "github.com/cto-harness/cto-harness"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Attempt is one run of a trial, kept whatever came of it.
type Attempt struct {
	ID            string    `json:"attempt_id"` // AttemptID(trial id, N)
	N             int       `json:"attempt"`
	RunID         string    `json:"run_id"`
	RunDir        string    `json:"run_dir"`
	Outcome       Outcome   `json:"outcome"`
	OutcomeSource string    `json:"outcome_source"`
	Status        string    `json:"status"`
	Blockers      []string  `json:"blockers"`
	StartedAt     time.Time `json:"started_at"`
	DurationMs    int64     `json:"duration_ms"` // the run's
	// QueueMs is the wait before a worker took the attempt and the
	// transfer of its run (NATS); 0 for a local run.
	QueueMs int64 `json:"queue_ms,omitempty"`
	// InputTokens and OutputTokens are what the harness's model meter
	// counted (every request, however the run ended); the agent's own
	// closing account is only its claim, kept beside.
	InputTokens int64 `json:"input_tokens"`
	// Tests are the run's listed tests as its grading judged them (none
	// when the task lists none, or the verification was not graded).
	Tests               []AttemptTest `json:"tests,omitempty"`
	OutputTokens        int64         `json:"output_tokens"`
	ClaimedInputTokens  int64         `json:"claimed_input_tokens"`
	ClaimedOutputTokens int64         `json:"claimed_output_tokens"`
	ReportedCost        *float64      `json:"reported_cost_usd"` // the agent's claim; nil: it reported none
	// MeteredCost is the meter's estimate from the config's price table
	// (nil: no price for the model).
	MeteredCost *float64 `json:"metered_cost_usd,omitempty"`
	// Nonce is the request nonce the attempt was made for, and Binding the
	// trial binding its run recorded (nil: none, or not read).
	Nonce          string                   `json:"request_nonce,omitempty"`
	Binding        *ctoharness.TrialBinding `json:"trial_binding,omitempty"`
	Signed         bool                     `json:"signed"`
	KeyID          string                   `json:"key_id"`
	EvidenceValid  bool                     `json:"evidence_valid"`
	EvidenceErrors []string                 `json:"evidence_errors"`
	Worker         string                   `json:"worker"` // "local", or the worker's key id on the NATS path
	Note           string                   `json:"note,omitempty"`
	// Refused are results an executor received for this attempt and would
	// not count; Execute moves them to the trial record.
	Refused []Refusal `json:"-"`
}

// Refusal is a result the coordinator would not count, and why.
type Refusal struct {
	Attempt int       `json:"attempt"`
	Worker  string    `json:"worker"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// TrialRecord is trials/<trial id>.json in the batch directory.
type TrialRecord struct {
	Trial    Trial     `json:"trial"`
	Attempts []Attempt `json:"attempts"`
	Refused  []Refusal `json:"refused"`
	// Interrupted are attempts the operator stopped: they count for
	// nothing but the model spend the meter recorded, which the totals
	// include.
	Interrupted []Attempt `json:"interrupted,omitempty"`
}

// Last is the latest attempt, or nil.
func (r *TrialRecord) Last() *Attempt {
	if len(r.Attempts) == 0 {
		return nil
	}
	return &r.Attempts[len(r.Attempts)-1]
}

// Final says the trial needs no further attempt: its last attempt has valid
// evidence and either is not retryable or was the last of maxAttempts
// attempts with valid evidence. An attempt without valid evidence never
// ends a trial (Execute bounds how often one invocation tries).
func (r *TrialRecord) Final(maxAttempts int) bool {
	l := r.Last()
	if l == nil || !l.EvidenceValid {
		return false
	}
	counted := 0
	for _, a := range r.Attempts {
		if a.EvidenceValid {
			counted++
		}
	}
	return !l.Outcome.Retryable() || counted >= maxAttempts
}

// Store is a batch's directory: RUNS_DIR/batches/<batch id>.
type Store struct{ Dir string }

// OpenStore makes (or reopens) the batch directory under runsDir.
func OpenStore(runsDir, batchID string) (Store, error) {
	s := Store{Dir: filepath.Join(runsDir, "batches", batchID)}
	if err := os.MkdirAll(filepath.Join(s.Dir, "trials"), 0o755); err != nil {
		return s, fmt.Errorf("batch directory: %w", err)
	}
	return s, nil
}

func (s Store) trialPath(id string) string { return filepath.Join(s.Dir, "trials", id+".json") }

// Load reads a trial's record; a trial never run has an empty one.
func (s Store) Load(t Trial) (TrialRecord, error) {
	rec := TrialRecord{Trial: t, Attempts: []Attempt{}, Refused: []Refusal{}}
	data, err := os.ReadFile(s.trialPath(t.ID))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("trial record %s is damaged (%v); move it away to run the trial again", s.trialPath(t.ID), err)
	}
	if rec.Trial.ID != t.ID {
		return rec, fmt.Errorf("trial record %s names trial %s", s.trialPath(t.ID), rec.Trial.ID)
	}
	rec.Trial = t // the plan's trial, not the stored copy, is what runs
	for i := range rec.Attempts {
		a := &rec.Attempts[i]
		want := AttemptID(t.ID, i+1)
		if a.N != i+1 || (a.ID != "" && a.ID != want) {
			return rec, fmt.Errorf("trial record %s is damaged: its attempt %d is numbered %d with id %q, not %d with id %s; move it away to run the trial again",
				s.trialPath(t.ID), i+1, a.N, a.ID, i+1, want)
		}
		a.ID = want // records written before attempts had ids
	}
	if rec.Attempts == nil {
		rec.Attempts = []Attempt{}
	}
	if rec.Refused == nil {
		rec.Refused = []Refusal{}
	}
	return rec, nil
}

// Save writes a trial's record atomically (a temporary file renamed), so an
// interrupted batch never leaves a half-written record.
func (s Store) Save(rec TrialRecord) error {
	return writeAtomic(s.trialPath(rec.Trial.ID), rec)
}

func writeAtomic(p string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(p, append(data, '\n'))
}

func writeFileAtomic(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), p)
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
