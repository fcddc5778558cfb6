package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// VerifyOptions configure VerifyDir.
type VerifyOptions struct {
	// Trusted verify batch.dsse.json and every trial's attestation (the
	// coordinator's key, the local signing key, the worker keys).
	Trusted []attest.PublicKey
	// RequireSignature fails an unsigned summary or trial run.
	RequireSignature bool
}

// Verification is what VerifyDir found.
type Verification struct {
	OK       bool     `json:"ok"`
	BatchID  string   `json:"batch_id"`
	SignedBy string   `json:"signed_by"` // "" unsigned
	Trials   int      `json:"trials_checked"`
	Errors   []string `json:"errors"`
}

// VerifyDir checks a batch directory as a third party would: batch.json
// against its schema and its signature, every trial's run (found beside the
// batch through the trial's report link, so the directory may have been
// copied elsewhere) validated in full, the outcome batch.json gives each
// trial derived again from its run, and every count recounted from the
// trial list.
func VerifyDir(ctx context.Context, dir string, set *schemas.Set, o VerifyOptions) Verification {
	v := Verification{Errors: []string{}}
	fail := func(format string, args ...any) { v.Errors = append(v.Errors, fmt.Sprintf(format, args...)) }
	data, err := os.ReadFile(filepath.Join(dir, SummaryJSON))
	if err != nil {
		fail("%v", err)
		return v
	}
	if err := set.Validate(schemas.Batch, data); err != nil {
		fail("%s: %v", SummaryJSON, err)
		return v
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		fail("%s: %v", SummaryJSON, err)
		return v
	}
	v.BatchID = s.BatchID
	if _, err := os.Stat(filepath.Join(dir, SummarySignature)); err == nil {
		id, err := VerifySummary(ctx, dir, o.Trusted)
		if err != nil {
			fail("%s: %v", SummarySignature, err)
		}
		v.SignedBy = id
	} else if s.SigningKeyID != "" {
		fail("%s is missing: the summary is not signed, yet %s names signing key %s", SummarySignature, SummaryJSON, s.SigningKeyID)
	} else if o.RequireSignature {
		fail("%s is missing: the summary is not signed", SummarySignature)
	}
	cells := map[[2]string]*Totals{}
	finished := 0
	nonces := map[string]string{}
	for _, row := range s.TrialList {
		if !row.Final {
			continue
		}
		finished++
		t := cells[[2]string{row.Agent, row.Task}]
		if t == nil {
			t = &Totals{}
			cells[[2]string{row.Agent, row.Task}] = t
		}
		t.Finished++
		t.Outcomes.add(Outcome(row.Outcome))
		if Outcome(row.Outcome).Scored() {
			t.Scored++
		}
		if row.Outcome == string(OutcomePass) {
			t.Passes++
		}
		if row.AttemptID != AttemptID(row.TrialID, row.Attempts) {
			fail("trial %s: batch.json names attempt %q, its last attempt (of %d) is %s", row.TrialID, row.AttemptID, row.Attempts, AttemptID(row.TrialID, row.Attempts))
		}
		if row.ReportHTML == "" {
			fail("trial %s is final but names no run", row.TrialID)
			continue
		}
		v.Trials++
		runDir := filepath.Dir(filepath.Join(dir, filepath.FromSlash(row.ReportHTML)))
		a := DescribeWith(ctx, runDir, set, validators.RunOptions{Trusted: o.Trusted, RequireSignature: o.RequireSignature, Relocated: true})
		switch {
		case !a.EvidenceValid:
			fail("trial %s: its run %s does not validate: %v", row.TrialID, runDir, a.EvidenceErrors)
		case string(a.Outcome) != row.Outcome:
			fail("trial %s: batch.json says %s, its run says %s", row.TrialID, row.Outcome, a.Outcome)
		case a.RunID != row.RunID:
			fail("trial %s: batch.json names run %s, the directory holds %s", row.TrialID, row.RunID, a.RunID)
		case row.Worker != "local" && a.KeyID != row.Worker:
			fail("trial %s: batch.json credits worker %s, the run is signed by %q", row.TrialID, row.Worker, a.KeyID)
		}
		if a.EvidenceValid {
			if why := rowBinding(s, row, a); why != "" {
				fail("trial %s: %s", row.TrialID, why)
			}
		}
		if other, ok := nonces[row.RequestNonce]; ok {
			fail("trial %s: its run answers request nonce %s, which trial %s's run answers too (a replay)", row.TrialID, row.RequestNonce, other)
		}
		nonces[row.RequestNonce] = row.TrialID
	}
	if finished != s.Finished {
		fail("batch.json says %d trials finished, its trial list has %d", s.Finished, finished)
	}
	for _, c := range s.Cells {
		got := cells[[2]string{c.Agent, c.Task}]
		if got == nil {
			got = &Totals{}
		}
		if got.Finished != c.Finished || got.Scored != c.Scored || got.Passes != c.Passes || got.Outcomes != c.Outcomes {
			fail("%s/%s: batch.json counts %d passed of %d scored, %d finished (%+v), its trial list %d of %d scored, %d finished (%+v)", c.Agent, c.Task,
				c.Passes, c.Scored, c.Finished, c.Outcomes, got.Passes, got.Scored, got.Finished, got.Outcomes)
		}
		if !sameEstimates(c.PassAtK, passAtK(c.Trials, got.Scored, got.Passes)) || !sameEstimates(c.PassHatK, passHatK(c.Trials, got.Scored, got.Passes)) {
			fail("%s/%s: batch.json's pass@k or pass^k is not what %d passes of %d scored trials give", c.Agent, c.Task, got.Passes, got.Scored)
		}
		delete(cells, [2]string{c.Agent, c.Task})
	}
	for k := range cells {
		fail("%s/%s has finished trials but no row in cells", k[0], k[1])
	}
	v.OK = len(v.Errors) == 0
	return v
}

func sameEstimates(a, b []PassAtK) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].K != b[i].K || (a[i].Value == nil) != (b[i].Value == nil) || (a[i].Value != nil && *a[i].Value != *b[i].Value) {
			return false
		}
	}
	return true
}

// rowBinding says why the run a row names is not a run of that row's trial
// attempt (its recorded binding against what batch.json states).
func rowBinding(s Summary, row TrialRow, a Attempt) string {
	b := a.Binding
	if b == nil {
		return "its run records no trial binding: it was not made for this batch"
	}
	if b.BatchID != s.BatchID || b.SpecDigest != s.SpecDigest || b.TrialID != row.TrialID || b.AttemptID != row.AttemptID ||
		b.Nonce != row.RequestNonce || b.Source != row.Source || b.SourceHead != row.SourceHead || b.Agent != row.Agent || b.Repeat != row.Repeat {
		return fmt.Sprintf("its run is bound to batch %s, trial %s, attempt %s, request nonce %s, source %s at %s, agent %s, repeat %d; batch.json names batch %s, trial %s, attempt %s, nonce %s, source %s at %s, agent %s, repeat %d",
			b.BatchID, b.TrialID, b.AttemptID, b.Nonce, b.Source, b.SourceHead, b.Agent, b.Repeat,
			s.BatchID, row.TrialID, row.AttemptID, row.RequestNonce, row.Source, row.SourceHead, row.Agent, row.Repeat)
	}
	return ""
}
