package report

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/schemas"
)

// prepareSigning runs before the trace is flushed: the report records that
// an attestation follows, and the attestation's write is traced ahead. A run
// in which a command could have read the signing key (unsandboxed, or a view
// that showed it) is never signed, and the report says why; so is a run
// without a signer.
func prepareSigning(s *runsink.Sink, in Input) {
	switch {
	case s.Report.UnsignedReason != "":
	case in.Signing.Signer == nil && in.Signing.Disabled != "":
		s.Report.UnsignedReason = "signing is disabled in the config: " + in.Signing.Disabled
	case in.Signing.Signer == nil:
		s.Report.UnsignedReason = "the harness was given no signing key"
	case in.Unsandboxed:
		s.Report.UnsignedReason = "--unsandboxed: Case and the verification command ran without the sandbox's view and could read the signing key, so nothing they produced is signed"
	}
	if s.Report.UnsignedReason != "" {
		return
	}
	s.Report.Signed = true
	s.Report.SigningKeyID = in.Signing.Signer.Public().ID
	s.Trace.Trace(ctoharness.TraceWrite, s.Dir.Path(evidence.Attestation))
}

// sign writes attestation.dsse.json last: an in-toto statement whose subjects
// are every other file of the run directory with its sha256, and whose
// predicate repeats the verdict, signed in a DSSE envelope. A failure leaves
// a report that says "signed": true without its attestation, which no
// validator accepts.
func sign(ctx context.Context, s *runsink.Sink, in Input) error {
	if in.Signing.Signer == nil || !s.Report.Signed {
		return nil
	}
	names, err := evidence.ListArtifacts(s.Dir.Root())
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
		if sum, ok := s.Report.ArtifactDigests[n]; ok {
			subjects = append(subjects, attest.Subject{Name: n, SHA256: sum})
			continue
		}
		sum, err := evidence.FileSHA256(filepath.Join(s.Dir.Root(), filepath.FromSlash(n)))
		if err != nil {
			return fmt.Errorf("%w: attestation: digest %s: %v", evidence.ErrWrite, n, err)
		}
		subjects = append(subjects, attest.Subject{Name: n, SHA256: sum})
	}
	pred := predicate(s, in)
	if err := validatePredicate(in.Schemas, schemas.RunPredicate, pred); err != nil {
		return fmt.Errorf("%w: attestation: %v", evidence.ErrWrite, err)
	}
	payload, err := attest.NewStatement(subjects, attest.RunPredicateType, pred)
	if err != nil {
		return fmt.Errorf("%w: attestation: %v", evidence.ErrWrite, err)
	}
	env, err := attest.Sign(ctx, in.Signing.Signer, payload)
	if err != nil {
		return fmt.Errorf("%w: attestation: %v", evidence.ErrWrite, err)
	}
	return s.Dir.WriteAttestation(env)
}

func predicate(s *runsink.Sink, in Input) attest.RunPredicate {
	rep := s.Report
	mech := append([]string{}, rep.Sandbox.Mechanisms...)
	p := attest.RunPredicate{RunID: rep.RunID, Stage: rep.Stage, Status: rep.Status, Blockers: codes(rep), Nonce: rep.Freshness.Nonce,
		Commits: rep.Commits,
		Gate:    attest.GateValues{AllowCase: in.Getenv(gates.EnvAllowCase), CaseStage: in.Getenv(gates.EnvCaseStage)},
		Sandbox: attest.SandboxStrength{Enforced: rep.Sandbox.Enforced, Mechanisms: mech, LandlockABI: rep.Sandbox.LandlockABI,
			Unsandboxed: rep.Sandbox.Unsandboxed},
		Qualifies: rep.Qualifies,
		Harness: attest.HarnessIdentity{Version: ctoharness.Version, SchemaVersion: ctoharness.SchemaVersion,
			BinaryBuildID: attest.BuildID(in.SelfExe)},
		FinalEventHash: rep.Freshness.FinalEventHash, StartedAt: rep.Freshness.StartedAt, FinishedAt: rep.Freshness.FinishedAt,
		SignedAt: in.Clock().UTC(), Trial: rep.Trial, Task: rep.Criteria}
	if in.Previous != nil {
		p.Gate.PreviousRecord = &attest.PreviousStage{Stage: in.Previous.Stage, RunID: in.Previous.RunID, RecordDigest: in.Previous.RecordDigest,
			SignatureVerified: in.Previous.VerifiedBy != "", KeyID: in.Previous.VerifiedBy}
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
