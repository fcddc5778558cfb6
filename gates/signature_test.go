package gates_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/schemas"
)

func signer(t *testing.T) (*attest.Signer, attest.PublicKey) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "k")
	pub, err := attest.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := attest.LoadSigner(filepath.Join(dir, attest.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return s, pub
}

// signRun writes an attestation for a run directory that attests report
// with the given sha256, for run id, signed by s.
func signRun(t *testing.T, runDir, runID, reportSHA string, s *attest.Signer) {
	t.Helper()
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	payload, err := attest.NewStatement([]attest.Subject{{Name: "report.json", SHA256: reportSHA}}, attest.RunPredicateType, map[string]any{"run_id": runID})
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.Sign(context.Background(), s, payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "attestation.dsse.json"), env, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRecordSignature(t *testing.T) {
	ctx := context.Background()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	s, pub := signer(t)
	otherS, otherPub := signer(t)
	dir := t.TempDir()
	runDir := filepath.Join(t.TempDir(), "20260101T000000Z-s2-abcdef01")
	rec := gates.Record{SchemaVersion: ctoharness.SchemaVersion, Stage: 2, RunID: "20260101T000000Z-s2-abcdef01", RunDir: runDir,
		ReportSHA256: strings.Repeat("ab", 32), ValidatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), HarnessVersion: ctoharness.Version,
		Checked: []string{"pass_route"}}
	rec.Seal()
	raw, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(gates.RecordPath(dir, 2), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	untrusted := func(err error) bool {
		var be *ctoharness.BlockerError
		return errors.As(err, &be) && be.Blocker.Code == ctoharness.BlockStageRecordUntrusted
	}
	trusted := attest.Keys{Trusted: []attest.PublicKey{pub}}
	if err := gates.CheckRecordTrust(ctx, dir, &rec, trusted); !untrusted(err) {
		t.Fatalf("unsigned record: %v, want STAGE_RECORD_UNTRUSTED", err)
	}
	// Signed by default: no trusted key is no trust, not "anything goes".
	if err := gates.CheckRecordTrust(ctx, dir, &rec, attest.Keys{}); !untrusted(err) {
		t.Fatalf("no trusted keys: %v, want STAGE_RECORD_UNTRUSTED", err)
	}
	// Only the explicit opt-out accepts an unsigned record, and says so.
	if err := gates.CheckRecordTrust(ctx, dir, &rec, attest.Keys{Disabled: "air-gapped test rig"}); err != nil || rec.VerifiedBy != "" {
		t.Fatalf("signing disabled: %v (verified by %q)", err, rec.VerifiedBy)
	}
	if _, err := gates.SignRecord(ctx, dir, rec, raw, s, set.Validator(schemas.StageRecordPredicate)); err != nil {
		t.Fatal(err)
	}
	if id, err := gates.VerifyRecordSignature(ctx, dir, rec, []attest.PublicKey{otherPub, pub}); err != nil || id != pub.ID {
		t.Fatalf("signed record: %q %v", id, err)
	}
	// A signed record still needs its run signed.
	if err := gates.CheckRecordTrust(ctx, dir, &rec, trusted); !untrusted(err) || !strings.Contains(err.Error(), "unsigned") {
		t.Fatalf("signed record, unsigned run: %v", err)
	}
	signRun(t, runDir, rec.RunID, rec.ReportSHA256, otherS)
	if err := gates.CheckRecordTrust(ctx, dir, &rec, trusted); !untrusted(err) || !errors.Is(err, attest.ErrUnknownKey) {
		t.Fatalf("run signed by an unknown key: %v", err)
	}
	signRun(t, runDir, "20260101T000000Z-s2-00000000", rec.ReportSHA256, s)
	if err := gates.CheckRecordTrust(ctx, dir, &rec, trusted); !untrusted(err) || !strings.Contains(err.Error(), "signed for run") {
		t.Fatalf("run attestation of another run: %v", err)
	}
	signRun(t, runDir, rec.RunID, strings.Repeat("cd", 32), s)
	if err := gates.CheckRecordTrust(ctx, dir, &rec, trusted); !untrusted(err) || !strings.Contains(err.Error(), "the record pins") {
		t.Fatalf("run attestation of another report: %v", err)
	}
	signRun(t, runDir, rec.RunID, rec.ReportSHA256, s)
	if err := gates.CheckRecordTrust(ctx, dir, &rec, trusted); err != nil || rec.VerifiedBy != pub.ID {
		t.Fatalf("signed record and run: %v (verified by %q)", err, rec.VerifiedBy)
	}
	if err := gates.CheckRecordTrust(ctx, dir, &rec, attest.Keys{Trusted: []attest.PublicKey{otherPub}}); !untrusted(err) {
		t.Fatalf("unknown key: %v", err)
	}
	forged := rec
	forged.Checked = append(forged.Checked, "forged")
	forged.Seal()
	fraw, _ := json.MarshalIndent(forged, "", "  ")
	if err := os.WriteFile(gates.RecordPath(dir, 2), fraw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gates.CheckRecordTrust(ctx, dir, &forged, trusted); !untrusted(err) || !strings.Contains(err.Error(), "does not sign this record") {
		t.Fatalf("forged record: %v", err)
	}
	if err := os.WriteFile(gates.SignaturePath(dir, 2), []byte(`{"payloadType":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gates.CheckRecordTrust(ctx, dir, &rec, trusted); !untrusted(err) || !errors.Is(err, attest.ErrMalformed) {
		t.Fatalf("truncated signature: %v", err)
	}
}
