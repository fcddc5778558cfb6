package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
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
}

// ParseEnvelope decodes envelope JSON strictly: one JSON object, the in-toto
// payload type, at least one signature, a base64 payload. A truncated or
// edited file fails here.
func ParseEnvelope(data []byte) (*Envelope, error) {
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
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	e := &Envelope{raw: env, Payload: payload}
	for _, s := range env.Signatures {
		e.KeyIDs = append(e.KeyIDs, s.KeyID)
	}
	return e, nil
}

// Verify checks the envelope's signatures against the trusted keys with the
// DSSE library's verifier and returns the id of the key that verified. A
// signature whose key id names a trusted key but does not verify is a
// forgery (ErrBadSignature); no signature by a trusted key is ErrUnknownKey.
func (e *Envelope) Verify(ctx context.Context, trusted []PublicKey) (string, error) {
	if len(trusted) == 0 {
		return "", ErrNoTrust
	}
	named := false
	for _, k := range trusted {
		for _, id := range e.KeyIDs {
			if id != k.ID {
				continue
			}
			named = true
			ev, err := dsse.NewEnvelopeVerifier(dsseVerifier{k})
			if err != nil {
				return "", err
			}
			if _, err := ev.Verify(ctx, &e.raw); err == nil {
				return k.ID, nil
			}
		}
	}
	if named {
		return "", fmt.Errorf("%w: key id %v is trusted but the signature over this payload is not its", ErrBadSignature, e.KeyIDs)
	}
	return "", fmt.Errorf("%w: signed by key id %v, trusted are %v", ErrUnknownKey, e.KeyIDs, idsOf(trusted))
}

func idsOf(ks []PublicKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.ID
	}
	return out
}
