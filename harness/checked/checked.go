// Package checked holds a run to the task check it requires (run
// --require-task-check): the record must be valid and be of this task, its
// hidden tests and its base, so an agent is only graded by a task whose
// reference was shown to pass it and whose tests were shown to tell a fix
// from no change. The harness holds the record before Case starts; validate
// holds the copy the run keeps (task-check.json) again.
package checked

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Artifact is the run's copy of the record, byte for byte as given.
const Artifact = "task-check.json"

// Record is a task check record as given: its bytes, decoded, and the key
// whose signature over it verified ("" when unsigned).
type Record struct {
	Raw   []byte
	Check ctoharness.TaskCheck
	KeyID string
}

// Parse decodes a record's bytes (already checked against its schema).
func Parse(raw []byte, keyID string) (Record, error) {
	var c ctoharness.TaskCheck
	if err := json.Unmarshal(raw, &c); err != nil {
		return Record{}, fmt.Errorf("the task check record is not JSON: %w", err)
	}
	return Record{Raw: raw, Check: c, KeyID: keyID}, nil
}

// Ref is what the report records of the record.
func (r Record) Ref() *ctoharness.TaskCheckRef {
	sum := sha256.Sum256(r.Raw)
	return &ctoharness.TaskCheckRef{Artifact: Artifact, Digest: hex.EncodeToString(sum[:]), Valid: r.Check.Valid,
		Repeats: r.Check.Repeats, CheckedAt: r.Check.CheckedAt, KeyID: r.KeyID}
}

// Hold says why the record does not cover a run judged by crit from base
// (nil when it does).
func Hold(c ctoharness.TaskCheck, crit ctoharness.TaskCriteria, base string) error {
	switch {
	case !c.Valid:
		return fmt.Errorf("the task check found the task invalid (%d problems, first: %s); fix the task and check it again", len(c.Problems), first(c.Problems))
	case c.TaskDigest != crit.SpecDigest:
		return fmt.Errorf("the task check is of task %s, this run's task is %s; check this task (cto-harness task check)", short(c.TaskDigest), short(crit.SpecDigest))
	case c.HiddenTestsDigest != crit.HiddenTestsDigest:
		return fmt.Errorf("the task check ran hidden tests %q, this run's are %q; check the task again", short(c.HiddenTestsDigest), short(crit.HiddenTestsDigest))
	case c.BaseCommit != base:
		return fmt.Errorf("the task check is of base %s, this run starts from %s; check the task at this base", short(c.BaseCommit), short(base))
	}
	return nil
}

func first(xs []string) string {
	if len(xs) == 0 {
		return "none listed"
	}
	return xs[0]
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
