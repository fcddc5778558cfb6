package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// prepareSigning runs before the trace is flushed: the report records that
// an attestation follows, and the attestation's write is traced ahead. A run
// in which a command could have read the signing key (unsandboxed, or a view
// that showed it) is never signed, and the report says why; so is a run
// without a signer.
func (r *run) prepareSigning() {
	switch {
	case r.Report.UnsignedReason != "":
	case r.o.Signing.Signer == nil && r.o.Signing.Disabled != "":
		r.Report.UnsignedReason = "signing is disabled in the config: " + r.o.Signing.Disabled
	case r.o.Signing.Signer == nil:
		r.Report.UnsignedReason = "the harness was given no signing key"
	case r.o.Unsandboxed:
		r.Report.UnsignedReason = "--unsandboxed: Case and the verification command ran without the sandbox's view and could read the signing key, so nothing they produced is signed"
	}
	if r.Report.UnsignedReason != "" {
		return
	}
	r.Report.Signed = true
	r.Report.SigningKeyID = r.o.Signing.Signer.Public().ID
	r.Trace.Trace(ctoharness.TraceWrite, r.Dir.Path(evidence.Attestation))
}

// sign writes attestation.dsse.json last: an in-toto statement whose subjects
// are every other file of the run directory with its sha256, and whose
// predicate repeats the verdict, signed in a DSSE envelope. A failure leaves
// a report that says "signed": true without its attestation, which no
// validator accepts.
func (r *run) sign(ctx context.Context) error {
	if r.o.Signing.Signer == nil || !r.Report.Signed {
		return nil
	}
	names, err := evidence.ListArtifacts(r.Dir.Root())
	if err != nil {
		return fmt.Errorf("%w: attestation: %v", evidence.ErrWrite, err)
	}
	var subjects []attest.Subject
	for _, n := range names {
		if n == evidence.Attestation {
			continue
		}
		// The report's digests were computed just before, by this process,
		// after the last write to those files; only the rest is hashed here.
		if sum, ok := r.Report.ArtifactDigests[n]; ok {
			subjects = append(subjects, attest.Subject{Name: n, SHA256: sum})
			continue
		}
		sum, err := evidence.FileSHA256(filepath.Join(r.Dir.Root(), filepath.FromSlash(n)))
		if err != nil {
			return fmt.Errorf("%w: attestation: digest %s: %v", evidence.ErrWrite, n, err)
		}
		subjects = append(subjects, attest.Subject{Name: n, SHA256: sum})
	}
	pred := r.predicate()
	if err := validatePredicate(r.o.Schemas, schemas.RunPredicate, pred); err != nil {
		return fmt.Errorf("%w: attestation: %v", evidence.ErrWrite, err)
	}
	payload, err := attest.NewStatement(subjects, attest.RunPredicateType, pred)
	if err != nil {
		return fmt.Errorf("%w: attestation: %v", evidence.ErrWrite, err)
	}
	env, err := attest.Sign(ctx, r.o.Signing.Signer, payload)
	if err != nil {
		return fmt.Errorf("%w: attestation: %v", evidence.ErrWrite, err)
	}
	return r.Dir.WriteAttestation(env)
}

func (r *run) predicate() attest.RunPredicate {
	rep := r.Report
	codes := []string{}
	for _, b := range rep.Blockers {
		codes = append(codes, string(b.Code))
	}
	mech := append([]string{}, rep.Sandbox.Mechanisms...)
	p := attest.RunPredicate{RunID: rep.RunID, Stage: rep.Stage, Status: rep.Status, Blockers: codes, Nonce: rep.Freshness.Nonce,
		Commits: rep.Commits,
		Gate:    attest.GateValues{AllowCase: r.o.Getenv(gates.EnvAllowCase), CaseStage: r.o.Getenv(gates.EnvCaseStage)},
		Sandbox: attest.SandboxStrength{Enforced: rep.Sandbox.Enforced, Mechanisms: mech, LandlockABI: rep.Sandbox.LandlockABI,
			Unsandboxed: rep.Sandbox.Unsandboxed},
		Qualifies: rep.Qualifies,
		Harness: attest.HarnessIdentity{Version: ctoharness.Version, SchemaVersion: ctoharness.SchemaVersion,
			BinaryBuildID: attest.BuildID(r.o.SelfExe)},
		FinalEventHash: rep.Freshness.FinalEventHash, StartedAt: rep.Freshness.StartedAt, FinishedAt: rep.Freshness.FinishedAt,
		SignedAt: r.o.Clock().UTC(), Trial: rep.Trial, Task: rep.Criteria}
	if r.prev != nil {
		p.Gate.PreviousRecord = &attest.PreviousStage{Stage: r.prev.Stage, RunID: r.prev.RunID, RecordDigest: r.prev.RecordDigest,
			SignatureVerified: r.prev.VerifiedBy != "", KeyID: r.prev.VerifiedBy}
	}
	return p
}

// validatePredicate checks a predicate against its schema before it is
// signed: malformed evidence is never written, signed or not.
func validatePredicate(set *schemas.Set, kind schemas.Kind, pred any) error {
	b, err := json.Marshal(pred)
	if err != nil {
		return err
	}
	return set.Validate(kind, b)
}
