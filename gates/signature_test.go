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

func TestRecordSignature(t *testing.T) {
	ctx := context.Background()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	s, pub := signer(t)
	_, otherPub := signer(t)
	dir := t.TempDir()
	rec := gates.Record{SchemaVersion: ctoharness.SchemaVersion, Stage: 2, RunID: "20260101T000000Z-s2-abcdef01", RunDir: "/runs/x",
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
	if err := gates.CheckRecordTrust(ctx, dir, &rec, []attest.PublicKey{pub}); !untrusted(err) {
		t.Fatalf("unsigned record: %v, want STAGE_RECORD_UNTRUSTED", err)
	}
	if err := gates.CheckRecordTrust(ctx, dir, &rec, nil); err != nil {
		t.Fatalf("no trusted keys must keep today's behaviour: %v", err)
	}
	if _, err := gates.SignRecord(ctx, dir, rec, raw, s, set.Validator(schemas.StageRecordPredicate)); err != nil {
		t.Fatal(err)
	}
	if id, err := gates.VerifyRecordSignature(ctx, dir, rec, []attest.PublicKey{otherPub, pub}); err != nil || id != pub.ID {
		t.Fatalf("signed record: %q %v", id, err)
	}
	if err := gates.CheckRecordTrust(ctx, dir, &rec, []attest.PublicKey{otherPub}); !untrusted(err) {
		t.Fatalf("unknown key: %v", err)
	}
	forged := rec
	forged.Checked = append(forged.Checked, "forged")
	forged.Seal()
	fraw, _ := json.MarshalIndent(forged, "", "  ")
	if err := os.WriteFile(gates.RecordPath(dir, 2), fraw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gates.CheckRecordTrust(ctx, dir, &forged, []attest.PublicKey{pub}); !untrusted(err) || !strings.Contains(err.Error(), "does not sign this record") {
		t.Fatalf("forged record: %v", err)
	}
	if err := os.WriteFile(gates.SignaturePath(dir, 2), []byte(`{"payloadType":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gates.CheckRecordTrust(ctx, dir, &rec, []attest.PublicKey{pub}); !untrusted(err) || !errors.Is(err, attest.ErrMalformed) {
		t.Fatalf("truncated signature: %v", err)
	}
}
