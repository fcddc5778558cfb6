package cli

import (
	"fmt"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/config"
)

// signingFiles returns the configured signing key file
// ($CTO_HARNESS_SIGNING_KEY_FILE, else the config's signing.key_file) and
// the trusted public key files (the config's signing.trusted_keys plus every
// --pubkey).
func (g *Globals) signingFiles(env *Env, cfg config.Config) (string, []string) {
	key := env.Getenv(attest.EnvSigningKeyFile)
	if key == "" {
		key = cfg.Signing.KeyFile
	}
	trusted := append(append([]string{}, cfg.Signing.TrustedKeys...), g.PubKeys...)
	return key, trusted
}

// keys loads the trusted keys and, when withSigner, the signing key. A key
// that is configured but unusable is bad input: nothing runs unsigned by
// accident.
func (g *Globals) keys(env *Env, cfg config.Config, withSigner bool) (attest.Keys, error) {
	keyFile, trustedFiles := g.signingFiles(env, cfg)
	var k attest.Keys
	trusted, err := attest.LoadPublicKeys(trustedFiles)
	if err != nil {
		return k, usagef("trusted key: %v", err)
	}
	k.Trusted = trusted
	if withSigner && keyFile != "" {
		s, err := attest.LoadSigner(keyFile)
		if err != nil {
			return k, usagef("signing key (from %s or the config's signing.key_file): %v", attest.EnvSigningKeyFile, err)
		}
		k.Signer = s
	}
	return k, nil
}

// KeygenCmd is `cto-harness keygen`.
type KeygenCmd struct {
	Out string `name:"out" required:"" type:"path" placeholder:"DIR" help:"Directory for signing.key (private, mode 0600) and signing.pub (public, PEM/PKIX). Existing files are never replaced."`
}

// Help explains the key pair and how to use it.
func (KeygenCmd) Help() string {
	return `Writes a new ed25519 key pair and prints its key id (the first 16 hex digits of the sha256 of the
public key's DER encoding). Point the harness at the private key with the config's signing.key_file or
` + attest.EnvSigningKeyFile + `; give verifiers the public key with signing.trusted_keys or --pubkey FILE.
Keep the private key off machines that only verify. See docs/evidence.md (trust model).`
}

// Run executes the command.
func (c *KeygenCmd) Run(env *Env) error {
	pub, err := attest.Generate(c.Out)
	if err != nil {
		return usageError{err}
	}
	fmt.Fprintf(env.Stdout, "key id: %s\nprivate key: %s/%s (keep secret)\npublic key: %s\n", pub.ID, c.Out, attest.PrivateKeyFile, pub.Path)
	return nil
}

// signedLine says, for a person, whether a run was signed.
func signedLine(signed bool, keyID string) string {
	if !signed {
		return "signed: false (no signing key configured; the evidence is only tamper-evident)"
	}
	return "signed: true (key " + keyID + ", attestation.dsse.json)"
}

// verifiedLine says whether evidence was signed and whether the signature verified.
func verifiedLine(signed bool, keyID string, ok bool) string {
	switch {
	case !signed:
		return "signed: false"
	case ok:
		return "signed: true, key " + keyID + ", signature verified"
	}
	return "signed: true, key " + keyID + ", signature NOT verified (no trusted key matched; pass --pubkey FILE)"
}
