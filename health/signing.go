package health

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cto-harness/cto-harness/attest"
)

// SigningFacts say whether evidence will be signed, by which key, and which
// keys this machine trusts (and where each came from).
type SigningFacts struct {
	Configured bool         `json:"configured"`
	Usable     bool         `json:"usable"`
	KeyID      string       `json:"key_id,omitempty"`
	KeySource  string       `json:"key_source,omitempty"`
	Disabled   string       `json:"disabled_reason,omitempty"`
	Trusted    []TrustedKey `json:"trusted"`
	KeyTrusted bool         `json:"signing_key_trusted"`
}

// TrustedKey is one key of the trust set.
type TrustedKey struct {
	ID     string `json:"key_id"`
	Source string `json:"source"`
}

// ErrSigningOff is a health failure: nothing would be signed and the config
// does not say signing is disabled on purpose.
var ErrSigningOff = errors.New("signing is off without an explicit opt-out")

// signing checks the signing key: it signs, and its signature verifies
// against the trust set. Signing is on by default, so no signer is a
// failure unless the config disables signing with a reason; a key the
// command could not load (o.SigningErr) is a failure too.
func signing(ctx context.Context, o Options) (SigningFacts, string, error) {
	k := o.Signing
	f := SigningFacts{Configured: k.Signer != nil, Disabled: k.Disabled, Trusted: []TrustedKey{}}
	for _, t := range k.Trusted {
		f.Trusted = append(f.Trusted, TrustedKey{ID: t.ID, Source: k.Sources[t.ID]})
	}
	sort.Slice(f.Trusted, func(i, j int) bool { return f.Trusted[i].ID < f.Trusted[j].ID })
	trust := trustLine(f.Trusted)
	if o.SigningErr != nil {
		return f, "", o.SigningErr
	}
	if k.Signer == nil {
		if k.Disabled != "" {
			return f, fmt.Sprintf("signing disabled by the config (%s): evidence is unsigned and gates accept unsigned records; %s", k.Disabled, trust), nil
		}
		return f, "", fmt.Errorf("%w: no signing key is loaded; let the harness create its machine key, name one with %s or signing.key_file, or set signing.disabled with a reason", ErrSigningOff, attest.EnvSigningKeyFile)
	}
	s := k.Signer
	f.KeyID, f.KeySource = s.Public().ID, k.Sources[s.Public().ID]
	payload, err := attest.NewStatement([]attest.Subject{{Name: "health", SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}},
		attest.RunPredicateType, map[string]any{"health": true})
	if err == nil {
		var env []byte
		if env, err = attest.Sign(ctx, s, payload); err == nil {
			var e *attest.Envelope
			if e, err = attest.ParseEnvelope(env); err == nil {
				_, err = e.Verify(ctx, k.Trusted)
			}
		}
	}
	if err != nil {
		return f, "", fmt.Errorf("signing key %s cannot sign evidence that this machine's trust set verifies: %w", s.Public().ID, err)
	}
	f.Usable, f.KeyTrusted = true, true
	if f.KeySource == "" {
		f.KeySource = s.File()
	}
	return f, fmt.Sprintf("key %s usable (%s); %s", f.KeyID, f.KeySource, trust), nil
}

func trustLine(ts []TrustedKey) string {
	if len(ts) == 0 {
		return "no trusted keys"
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.ID + " (" + t.Source + ")"
	}
	return "trusted: " + strings.Join(parts, ", ")
}
