package health

import (
	"context"
	"fmt"

	"github.com/cto-harness/cto-harness/attest"
)

// SigningFacts say whether evidence will be signed, and by which key.
type SigningFacts struct {
	Configured  bool   `json:"configured"`
	Usable      bool   `json:"usable"`
	KeyID       string `json:"key_id,omitempty"`
	TrustedKeys int    `json:"trusted_keys"`
	KeyTrusted  bool   `json:"signing_key_trusted"`
}

// signing checks the configured signing key: it loads, it signs, and its
// signature verifies. No key configured is healthy (evidence then says
// "signed": false); a configured key that cannot be used is a failure.
func signing(ctx context.Context, o Options) (SigningFacts, string, error) {
	f := SigningFacts{Configured: o.SigningKeyFile != "", TrustedKeys: len(o.TrustedKeyFiles)}
	trusted, terr := attest.LoadPublicKeys(o.TrustedKeyFiles)
	if terr != nil {
		return f, "", fmt.Errorf("a trusted key cannot be loaded: %w", terr)
	}
	if !f.Configured {
		return f, fmt.Sprintf("no signing key configured: evidence is unsigned (\"signed\": false); %d trusted key(s)", len(trusted)), nil
	}
	s, err := attest.LoadSigner(o.SigningKeyFile)
	if err != nil {
		return f, "", err
	}
	f.KeyID = s.Public().ID
	payload, err := attest.NewStatement([]attest.Subject{{Name: "health", SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}},
		attest.RunPredicateType, map[string]any{"health": true})
	if err == nil {
		var env []byte
		if env, err = attest.Sign(ctx, s, payload); err == nil {
			var e *attest.Envelope
			if e, err = attest.ParseEnvelope(env); err == nil {
				_, err = e.Verify(ctx, []attest.PublicKey{s.Public()})
			}
		}
	}
	if err != nil {
		return f, "", fmt.Errorf("signing key %s cannot sign: %w", o.SigningKeyFile, err)
	}
	f.Usable = true
	for _, k := range trusted {
		if k.ID == f.KeyID {
			f.KeyTrusted = true
		}
	}
	detail := fmt.Sprintf("key %s usable (%s); %d trusted key(s)", f.KeyID, o.SigningKeyFile, len(trusted))
	if len(trusted) > 0 && !f.KeyTrusted {
		detail += "; the signing key is not among them, so this machine's evidence will not verify here"
	}
	return f, detail, nil
}

// trustedKeys loads the trusted keys for the record checks; a key that
// cannot be loaded is already a failed signing_key check.
func trustedKeys(o Options) []attest.PublicKey {
	k, _ := attest.LoadPublicKeys(o.TrustedKeyFiles)
	return k
}
