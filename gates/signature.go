package gates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// SignaturePath is where stage n's record attestation lives: a DSSE envelope
// next to the record, whose statement names the record file and the report
// of the run it validated.
func SignaturePath(dir string, n int) string {
	return filepath.Join(dir, fmt.Sprintf("stage-%d.dsse.json", n))
}

// RecordSubject is the subject name of stage n's record file in its
// attestation, and ReportSubject that of the validated run's report; both
// are relative to the runs directory.
func RecordSubject(n int) string { return fmt.Sprintf("validation/stage-%d.json", n) }

// ReportSubject names a run's report.json relative to the runs directory.
func ReportSubject(runID string) string { return runID + "/report.json" }

func (req Request) recordTrusted(ctx context.Context, rec *Record) error {
	if rec == nil {
		return nil
	}
	return checkRecordTrust(ctx, req.Records.Dir, rec, req.Signing, req.Records.Rerun(rec.Stage))
}

// CheckRecordTrust checks that an accepted record in dir, and the run it
// names, are signed by a trusted key: an unsigned, unknown-key or forged
// record or run blocks with STAGE_RECORD_UNTRUSTED, and so does having no
// trusted key at all. Only an explicit opt-out (keys.Disabled, the config's
// signing.disabled) accepts an unsigned record. On success rec.VerifiedBy
// names the key that signed. A nil record checks nothing.
func CheckRecordTrust(ctx context.Context, dir string, rec *Record, keys attest.Keys) error {
	if rec == nil {
		return nil
	}
	return checkRecordTrust(ctx, dir, rec, keys, StageCommand("", "", rec.Stage))
}

// checkRecordTrust is CheckRecordTrust whose refusal asks for rerun.
func checkRecordTrust(ctx context.Context, dir string, rec *Record, keys attest.Keys, rerun string) error {
	if len(keys.Trusted) == 0 && keys.Disabled != "" {
		return nil
	}
	id, err := VerifyRecordSignature(ctx, dir, *rec, keys.Trusted)
	if err == nil {
		err = VerifyRunSignature(ctx, *rec, keys.Trusted)
	}
	if err != nil {
		return ctoharness.Block(ctoharness.BlockStageRecordUntrusted, ctoharness.StepGate, err,
			"the stage %d validation record or its run is not signed by a trusted key; re-run '%s' (it signs with the machine key, or the configured signing.key_file)", rec.Stage, rerun)
	}
	rec.VerifiedBy = id
	return nil
}

// VerifyRunSignature checks the attestation of the run a record names: a
// trusted key signed it, for that run id, and its report.json subject is
// the report digest the record pins. The run's other subjects are the run
// validator's business (the record check re-validates the run).
func VerifyRunSignature(ctx context.Context, rec Record, trusted []attest.PublicKey) error {
	p := filepath.Join(rec.RunDir, "attestation.dsse.json")
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("run %s is unsigned (%s is missing)", rec.RunID, p)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	env, err := attest.ParseEnvelope(data)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if _, err := env.Verify(ctx, trusted); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if st.PredicateType != attest.RunPredicateType {
		return fmt.Errorf("%s: predicate type %q, want %q", p, st.PredicateType, attest.RunPredicateType)
	}
	var pred struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(st.Predicate, &pred); err != nil || pred.RunID != rec.RunID {
		return fmt.Errorf("%s is signed for run %q, the record names %s", p, pred.RunID, rec.RunID)
	}
	for _, sub := range st.Subjects {
		if sub.Name == "report.json" {
			if sub.SHA256 != rec.ReportSHA256 {
				return fmt.Errorf("%s signs report.json with sha256 %s, the record pins %s", p, sub.SHA256, rec.ReportSHA256)
			}
			return nil
		}
	}
	return fmt.Errorf("%s does not attest report.json", p)
}

// VerifyRecordSignature verifies stage rec.Stage's record attestation in dir
// against the trusted keys: the envelope, then that its statement names this
// record file's exact bytes and the report digest the record pins. It returns
// the id of the key that signed.
func VerifyRecordSignature(ctx context.Context, dir string, rec Record, trusted []attest.PublicKey) (string, error) {
	n := rec.Stage
	p := SignaturePath(dir, n)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s is missing: the record is unsigned", p)
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	env, err := attest.ParseEnvelope(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	keyID, err := env.Verify(ctx, trusted)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	if st.PredicateType != attest.StageRecordPredicateType {
		return "", fmt.Errorf("%s: predicate type %q, want %q", p, st.PredicateType, attest.StageRecordPredicateType)
	}
	raw, err := os.ReadFile(RecordPath(dir, n))
	if err != nil {
		return "", fmt.Errorf("read the record: %w", err)
	}
	sum := sha256.Sum256(raw)
	want := map[string]string{RecordSubject(n): hex.EncodeToString(sum[:]), ReportSubject(rec.RunID): rec.ReportSHA256}
	var problems []string
	for _, s := range st.Subjects {
		if w, ok := want[s.Name]; !ok {
			problems = append(problems, "unexpected subject "+s.Name)
		} else if w != s.SHA256 {
			problems = append(problems, fmt.Sprintf("subject %s has sha256 %s, the file has %s", s.Name, s.SHA256, w))
		}
		delete(want, s.Name)
	}
	for name := range want {
		problems = append(problems, "subject "+name+" is not attested")
	}
	var pred attest.StageRecordPredicate
	if err := json.Unmarshal(st.Predicate, &pred); err != nil {
		problems = append(problems, "predicate: "+err.Error())
	} else if pred.Stage != n || pred.RunID != rec.RunID || pred.RecordDigest != rec.RecordDigest || pred.ReportSHA256 != rec.ReportSHA256 {
		problems = append(problems, fmt.Sprintf("the signed predicate (stage %d, run %s, record digest %s) does not describe this record (stage %d, run %s, record digest %s)",
			pred.Stage, pred.RunID, pred.RecordDigest, n, rec.RunID, rec.RecordDigest))
	}
	if len(problems) > 0 {
		return keyID, fmt.Errorf("%s does not sign this record: %s", p, strings.Join(problems, "; "))
	}
	return keyID, nil
}

// SignRecord writes stage rec.Stage's record attestation into dir, signed by
// s. raw is the record file's exact bytes; validate checks the predicate
// against its schema before anything is signed.
func SignRecord(ctx context.Context, dir string, rec Record, raw []byte, s *attest.Signer, validate func([]byte) error) (string, error) {
	pred := attest.StageRecordPredicate{Stage: rec.Stage, RunID: rec.RunID, ReportSHA256: rec.ReportSHA256, RecordDigest: rec.RecordDigest,
		ValidatedAt: rec.ValidatedAt, HarnessVersion: rec.HarnessVersion}
	pb, err := json.Marshal(pred)
	if err != nil {
		return "", err
	}
	if err := validate(pb); err != nil {
		return "", fmt.Errorf("the stage record predicate would not match its schema: %w", err)
	}
	sum := sha256.Sum256(raw)
	payload, err := attest.NewStatement([]attest.Subject{
		{Name: RecordSubject(rec.Stage), SHA256: hex.EncodeToString(sum[:])},
		{Name: ReportSubject(rec.RunID), SHA256: rec.ReportSHA256},
	}, attest.StageRecordPredicateType, pred)
	if err != nil {
		return "", err
	}
	env, err := attest.Sign(ctx, s, payload)
	if err != nil {
		return "", err
	}
	p := SignaturePath(dir, rec.Stage)
	if err := evidence.WriteDurable(p, env, 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}
