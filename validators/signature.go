package validators

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// checkAttestation verifies attestation.dsse.json before anything else is
// believed: the envelope and its signature against the trusted keys, then
// that its subjects are exactly the run directory's other files with their
// current sha256, then that the signed predicate describes this run (its id,
// directory, verdict and event chain). The report's own "signed" claim must
// agree with the file being there, so removing the attestation is caught.
func checkAttestation(v *runView, c collector) {
	const chk = "attestation"
	present := v.files[evidence.Attestation]
	if v.report != nil && v.report.Signed && !present {
		c.fail(chk, evidence.Attestation, "missing although report.json says the run is signed (removed after the run, or signing failed)")
	}
	if v.report != nil && !v.report.Signed && present {
		c.fail(chk, evidence.Attestation, "present although report.json says the run is unsigned")
	}
	if v.report != nil && v.report.Signed && v.report.UnsignedReason != "" {
		c.fail(chk, evidence.ReportJSON, "report.json says the run is signed and also why it is unsigned (%q)", v.report.UnsignedReason)
	}
	if !present {
		if v.opts.RequireSignature {
			why := "no reason given"
			if v.report != nil && v.report.UnsignedReason != "" {
				why = v.report.UnsignedReason
			}
			c.fail(chk, evidence.Attestation, "the run is unsigned (%s); a signature by a trusted key is required (--allow-unsigned accepts unsigned evidence)", why)
		}
		return
	}
	c.res.Signed = true
	if v.report != nil && !v.traced(filepath.Join(v.report.RunArtifactDir, evidence.Attestation)) {
		c.fail(chk, evidence.TraceFile, "the write of %s is not traced", evidence.Attestation)
	}
	data, err := os.ReadFile(v.path(evidence.Attestation))
	if err != nil {
		c.fail(chk, evidence.Attestation, "%v", err)
		return
	}
	env, err := attest.ParseEnvelope(data)
	if err != nil {
		c.fail(chk, evidence.Attestation, "%v (truncated or edited?)", err)
		return
	}
	if len(env.KeyIDs) > 0 {
		c.res.KeyID = env.KeyIDs[0]
	}
	switch {
	case len(v.opts.Trusted) > 0:
		id, err := env.Verify(context.Background(), v.opts.Trusted)
		switch {
		case errors.Is(err, attest.ErrUnknownKey) && !v.opts.RequireSignature:
			// Signed, but by no key this verifier trusts: accepted as
			// unverified (signature_ok false) only when unsigned evidence
			// is. A bad signature by a trusted key is a forgery either way.
		case err != nil:
			c.fail(chk, evidence.Attestation, "signature: %v", err)
		default:
			c.res.KeyID, c.res.SignatureOK = id, true
		}
	case v.opts.RequireSignature:
		c.fail(chk, evidence.Attestation, "no trusted public key to verify the signature against; pass the signer's public key with --pubkey FILE or set signing.trusted_keys in the config (--allow-unsigned accepts it unverified)")
	}
	if v.report != nil && v.report.SigningKeyID != c.res.KeyID {
		c.fail(chk, evidence.ReportJSON, "signing_key_id %q differs from the envelope's key id %q", v.report.SigningKeyID, c.res.KeyID)
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		c.fail(chk, evidence.Attestation, "%v", err)
		return
	}
	if st.PredicateType != attest.RunPredicateType {
		c.fail(chk, evidence.Attestation, "predicate type %q, want %q", st.PredicateType, attest.RunPredicateType)
		return
	}
	checkSubjects(v, c, st.Subjects)
	checkRunPredicate(v, c, st.Predicate)
}

// checkSubjects requires the attested files to be exactly the run
// directory's files (the attestation and fixture/ aside), byte for byte.
func checkSubjects(v *runView, c collector, subjects []attest.Subject) {
	const chk = "attestation"
	listed := map[string]bool{}
	for _, s := range subjects {
		listed[s.Name] = true
		if !v.files[s.Name] {
			c.fail(chk, s.Name, "attested but missing from the run directory (the envelope belongs to another run, or the file was removed)")
			continue
		}
		got, err := v.sha256(s.Name)
		if err != nil {
			c.fail(chk, s.Name, "%v", err)
			continue
		}
		if got != s.SHA256 {
			c.fail(chk, s.Name, "sha256 %s does not match the signed %s (changed after signing, or the envelope belongs to another run)", got, s.SHA256)
		}
	}
	var extra []string
	for name := range v.files {
		if name != evidence.Attestation && !listed[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		c.fail(chk, name, "not covered by the attestation (added after signing)")
	}
}

// checkRunPredicate ties the signed predicate to this directory and report,
// so that a signed run replayed under another run id or directory is refused.
func checkRunPredicate(v *runView, c collector, raw []byte) {
	const chk = "attestation"
	if err := v.set.Validate(schemas.RunPredicate, raw); err != nil {
		c.fail(chk, evidence.Attestation, "predicate: %v", err)
		return
	}
	var p attest.RunPredicate
	if err := json.Unmarshal(raw, &p); err != nil {
		c.fail(chk, evidence.Attestation, "predicate: %v", err)
		return
	}
	if base := filepath.Base(filepath.Clean(v.dir)); p.RunID != base {
		c.fail(chk, evidence.Attestation, "signed for run %s but found in directory %s (replayed under another run id?)", p.RunID, base)
	}
	r := v.report
	if r == nil {
		return
	}
	if p.RunID != r.RunID || p.Stage != r.Stage || p.Status != r.Status || p.Nonce != r.Freshness.Nonce ||
		p.FinalEventHash != r.Freshness.FinalEventHash || p.Qualifies != r.Qualifies {
		c.fail(chk, evidence.ReportJSON, "the signed predicate (run %s, stage %d, %s, nonce %s) does not match report.json (run %s, stage %d, %s, nonce %s)",
			p.RunID, p.Stage, p.Status, p.Nonce, r.RunID, r.Stage, r.Status, r.Freshness.Nonce)
	}
	if !sameTrial(p.Trial, r.Trial) {
		c.fail(chk, evidence.ReportJSON, "the signed predicate binds the run to trial %s, report.json to trial %s", describeTrial(p.Trial), describeTrial(r.Trial))
	}
	if !reflect.DeepEqual(p.Task, r.Criteria) {
		c.fail(chk, evidence.ReportJSON, "the signed predicate's task criteria %+v are not report.json's %+v", p.Task, r.Criteria)
	}
}

func sameTrial(a, b *ctoharness.TrialBinding) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func describeTrial(t *ctoharness.TrialBinding) string {
	if t == nil {
		return "none"
	}
	return fmt.Sprintf("%s (attempt %s, request nonce %s)", t.TrialID, t.AttemptID, t.Nonce)
}

// runValidation is how a stage validation checks one of its runs.
func (s *stageRun) runValidation(expectPass bool) RunOptions {
	return RunOptions{ExpectPass: expectPass, Trusted: s.o.Signing.Trusted, RequireSignature: s.o.RequireSignature}
}

// signRecord signs the record just written at p, or, without a signing key,
// removes a signature left by an earlier validation (it could only mislead).
func (s *stageRun) signRecord(ctx context.Context, rec gates.Record, p string) {
	sig := gates.SignaturePath(filepath.Dir(p), rec.Stage)
	if s.o.Signing.Signer == nil {
		if err := os.Remove(sig); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.failf("record_signed", err)
		}
		if s.o.RequireSignature {
			s.fail("record_signed: no signing key is configured but signed evidence is required (set signing.key_file or %s, or pass --allow-unsigned)", attest.EnvSigningKeyFile)
		}
		return
	}
	s.check("record_signed")
	raw, err := os.ReadFile(p)
	if err != nil {
		s.failf("record_signed", err)
		return
	}
	if _, err := gates.SignRecord(ctx, filepath.Dir(p), rec, raw, s.o.Signing.Signer, s.o.Schemas.Validator(schemas.StageRecordPredicate)); err != nil {
		s.failf("record_signed", err)
		return
	}
	if len(s.o.Signing.Trusted) > 0 {
		if _, err := gates.VerifyRecordSignature(ctx, filepath.Dir(p), rec, s.o.Signing.Trusted); err != nil {
			s.signatureFailed(err)
		}
	}
}

// signatureFailed records that the freshly signed record does not verify
// against the trusted keys (the signing key is not among them).
func (s *stageRun) signatureFailed(err error) {
	s.res.SignatureOK = false
	s.fail("record_signed: the record's signature does not verify against the trusted keys (is the signing key's public key listed?): %v", err)
}

// rowSigning gives a failure row its keys: the stage's own, with the stage 2
// record's signature copied alongside the record, or, for a row that asks
// for it, an ephemeral key pair that signs the genuine record and is the
// only trusted key (so a forged record is refused whatever the user's
// configuration).
func rowSigning(ctx context.Context, st fixtures.Setup, o ReplayOptions, work, records string) (attest.Keys, error) {
	orig := gates.RecordPath(harness.RecordsDir(o.RunsDir), 2)
	switch st.Signing {
	case "":
		if st.Stage2Record == "missing" {
			return o.Signing, nil
		}
		data, err := os.ReadFile(gates.SignaturePath(filepath.Dir(orig), 2))
		if errors.Is(err, fs.ErrNotExist) {
			return o.Signing, nil
		}
		if err != nil {
			return attest.Keys{}, err
		}
		if data, err = damageEnvelope(data, st.Stage2Signature); err != nil {
			return attest.Keys{}, err
		}
		return o.Signing, os.WriteFile(gates.SignaturePath(records, 2), data, 0o644)
	case "ephemeral":
		pub, err := attest.Generate(filepath.Join(work, "keys"))
		if err != nil {
			return attest.Keys{}, err
		}
		signer, err := attest.LoadSigner(filepath.Join(work, "keys", attest.PrivateKeyFile))
		if err != nil {
			return attest.Keys{}, err
		}
		raw, err := os.ReadFile(orig)
		if err != nil {
			return attest.Keys{}, err
		}
		var rec gates.Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return attest.Keys{}, err
		}
		if _, err := gates.SignRecord(ctx, records, rec, raw, signer, o.Schemas.Validator(schemas.StageRecordPredicate)); err != nil {
			return attest.Keys{}, err
		}
		return attest.Keys{Signer: signer, Trusted: []attest.PublicKey{pub}}, nil
	}
	return attest.Keys{}, fmt.Errorf("unknown signing %q; use \"ephemeral\" or leave it out", st.Signing)
}

// traced reports whether the trace records a harness write of p.
func (v *runView) traced(p string) bool {
	for _, e := range v.trace {
		if e.Op == ctoharness.TraceWrite && e.Path == p {
			return true
		}
	}
	return false
}

// damageEnvelope rewrites a genuine DSSE envelope as a row asks. The
// duplicate and case-variant keys smuggle a forged payload (a statement
// whose record subject is changed) in front of the genuine one: a decoder
// that keeps the last key verifies the genuine signature, while a reader
// that takes the first, or matches case exactly (jq's .payload), reads the
// forgery. The extra signatures sit beside the genuine one.
func damageEnvelope(data []byte, how string) ([]byte, error) {
	if how == "" {
		return data, nil
	}
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(data, &env); err != nil || len(env.Signatures) == 0 {
		return nil, fmt.Errorf("the genuine stage 2 envelope does not decode: %v", err)
	}
	forged := base64.StdEncoding.EncodeToString([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"validation/stage-2.json","digest":{"sha256":"` +
		strings.Repeat("0", 64) + `"}}],"predicateType":"` + attest.StageRecordPredicateType + `","predicate":{}}`))
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	sig := `{"keyid":` + q(env.Signatures[0].KeyID) + `,"sig":` + q(env.Signatures[0].Sig) + `}`
	var out string
	switch how {
	case "duplicate-key":
		out = `{"payloadType":` + q(env.PayloadType) + `,"payload":` + q(forged) + `,"payload":` + q(env.Payload) + `,"signatures":[` + sig + `]}`
	case "case-variant-key":
		out = `{"payloadType":` + q(env.PayloadType) + `,"payload":` + q(forged) + `,"Payload":` + q(env.Payload) + `,"signatures":[` + sig + `]}`
	case "extra-bad-signature":
		bad := base64.StdEncoding.EncodeToString(make([]byte, 64))
		out = `{"payloadType":` + q(env.PayloadType) + `,"payload":` + q(env.Payload) + `,"signatures":[` + sig + `,{"keyid":` + q(env.Signatures[0].KeyID) + `,"sig":` + q(bad) + `}]}`
	case "extra-unknown-signature":
		other, err := attest.Ephemeral()
		if err != nil {
			return nil, err
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			return nil, err
		}
		signed, err := attest.Sign(context.Background(), other.Signer, payload)
		if err != nil {
			return nil, err
		}
		var o struct {
			Signatures []json.RawMessage `json:"signatures"`
		}
		if err := json.Unmarshal(signed, &o); err != nil {
			return nil, err
		}
		out = `{"payloadType":` + q(env.PayloadType) + `,"payload":` + q(env.Payload) + `,"signatures":[` + sig + `,` + string(o.Signatures[0]) + `]}`
	default:
		return nil, fmt.Errorf("unknown stage2_signature %q; use duplicate-key, case-variant-key, extra-bad-signature or extra-unknown-signature", how)
	}
	return []byte(out + "\n"), nil
}
