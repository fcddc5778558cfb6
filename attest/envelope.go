package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// PayloadType is the DSSE payload type of an in-toto Statement.
const PayloadType = "application/vnd.in-toto+json"

// Verification failures, told apart with errors.Is.
var (
	ErrMalformed    = errors.New("the envelope is malformed")
	ErrUnknownKey   = errors.New("the envelope is signed by no trusted key")
	ErrBadSignature = errors.New("the signature does not verify")
	ErrNoTrust      = errors.New("no trusted public key is configured")
)

// dsseSigner adapts Signer to dsse.Signer.
type dsseSigner struct{ s *Signer }

func (d dsseSigner) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(d.s.priv, data), nil
}
func (d dsseSigner) KeyID() (string, error) { return d.s.pub.ID, nil }

// dsseVerifier adapts PublicKey to dsse.Verifier.
type dsseVerifier struct{ k PublicKey }

func (d dsseVerifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(d.k.Key, data, sig) {
		return ErrBadSignature
	}
	return nil
}
func (d dsseVerifier) KeyID() (string, error)   { return d.k.ID, nil }
func (d dsseVerifier) Public() crypto.PublicKey { return d.k.Key }

// Sign wraps payload (an in-toto Statement) in a DSSE envelope signed by s
// and returns the envelope's JSON.
func Sign(ctx context.Context, s *Signer, payload []byte) ([]byte, error) {
	es, err := dsse.NewEnvelopeSigner(dsseSigner{s})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	out, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Envelope is a parsed DSSE envelope, not yet verified.
type Envelope struct {
	raw     dsse.Envelope
	Payload []byte
	KeyIDs  []string
	sigs    [][]byte
}

// ParseEnvelope decodes envelope JSON strictly: one JSON object whose keys
// are exactly the DSSE names (no duplicates, no case variants), the in-toto
// payload type, at least one signature, standard base64 everywhere. A
// truncated or edited file fails here, and so does one that a lenient
// decoder and the jq recipe in docs/evidence.md would read differently.
// The payload's own objects may not repeat a key either.
func ParseEnvelope(data []byte) (*Envelope, error) {
	if err := checkKeys(data, envelopeKeys); err != nil {
		return nil, err
	}
	var env dsse.Envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the envelope object", ErrMalformed)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("%w: payload type %q, want %q", ErrMalformed, env.PayloadType, PayloadType)
	}
	if len(env.Signatures) == 0 {
		return nil, fmt.Errorf("%w: no signatures", ErrMalformed)
	}
	payload, err := base64.StdEncoding.Strict().DecodeString(env.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: payload is not standard base64: %v", ErrMalformed, err)
	}
	if err := checkKeys(payload, nil); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	e := &Envelope{raw: env, Payload: payload}
	for i, s := range env.Signatures {
		sig, err := base64.StdEncoding.Strict().DecodeString(s.Sig)
		if err != nil {
			return nil, fmt.Errorf("%w: signature %d is not standard base64: %v", ErrMalformed, i, err)
		}
		e.KeyIDs = append(e.KeyIDs, s.KeyID)
		e.sigs = append(e.sigs, sig)
	}
	return e, nil
}

// Verify checks every signature of the envelope: each must name a trusted
// key by its key id and verify over the DSSE pre-authentication encoding
// with that key. One signature that does not (an unknown key, a forgery, an
// extra signature added next to a good one) refuses the whole envelope, so
// that what validate accepts is exactly what the per-signature openssl
// recipe accepts. It returns the id of the first signature's key.
func (e *Envelope) Verify(ctx context.Context, trusted []PublicKey) (string, error) {
	if len(trusted) == 0 {
		return "", ErrNoTrust
	}
	pae := dsse.PAE(e.raw.PayloadType, e.Payload)
	for i, id := range e.KeyIDs {
		var key *PublicKey
		for j := range trusted {
			if trusted[j].ID == id {
				key = &trusted[j]
				break
			}
		}
		if key == nil {
			return "", fmt.Errorf("%w: signature %d is by key id %q, trusted are %v", ErrUnknownKey, i, id, idsOf(trusted))
		}
		if !ed25519.Verify(key.Key, pae, e.sigs[i]) {
			return "", fmt.Errorf("%w: signature %d names trusted key id %s but is not its signature over this payload", ErrBadSignature, i, id)
		}
	}
	// The DSSE library's verifier agrees on the first signature: a second,
	// independent reading of the same envelope.
	ev, err := dsse.NewEnvelopeVerifier(dsseVerifier{keyByID(trusted, e.KeyIDs[0])})
	if err != nil {
		return "", err
	}
	if _, err := ev.Verify(ctx, &e.raw); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	return e.KeyIDs[0], nil
}

func keyByID(ks []PublicKey, id string) PublicKey {
	for _, k := range ks {
		if k.ID == id {
			return k
		}
	}
	return PublicKey{}
}

func idsOf(ks []PublicKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.ID
	}
	return out
}
