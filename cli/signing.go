package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/config"
)

// signingFiles returns the configured signing key file
// ($CTO_HARNESS_SIGNING_KEY_FILE, else the config's signing.key_file; ""
// means the machine key) and the trusted public key files (the config's
// signing.trusted_keys plus every --pubkey).
func (g *Globals) signingFiles(env *Env, cfg config.Config) (string, []string) {
	key := env.Getenv(attest.EnvSigningKeyFile)
	if key == "" {
		key = cfg.Signing.KeyFile
	}
	trusted := append(append([]string{}, cfg.Signing.TrustedKeys...), g.PubKeys...)
	return key, trusted
}

// keys loads what a command signs with and trusts. Evidence is signed by
// default: with no key configured the machine key is used, and created on
// first use when withSigner (a command that only verifies never creates
// one). The signing key's own public half is always trusted, so the gate
// and validate accept this machine's evidence and nothing else unless
// more keys are listed. A key that is configured but unusable, or a
// machine key that cannot be created, is bad input: nothing runs unsigned
// by accident. Only the config's signing.disabled turns signing off.
func (g *Globals) keys(env *Env, cfg config.Config, withSigner bool) (attest.Keys, error) {
	keyFile, trustedFiles := g.signingFiles(env, cfg)
	k := attest.Keys{Sources: map[string]string{}}
	trusted, err := attest.LoadPublicKeys(trustedFiles)
	if err != nil {
		return k, usagef("trusted key: %v", err)
	}
	for i, t := range trusted {
		src := "config signing.trusted_keys"
		if i >= len(cfg.Signing.TrustedKeys) {
			src = "--pubkey"
		}
		k.Trusted = append(k.Trusted, t)
		k.Sources[t.ID] = src + " " + t.Path
	}
	if cfg.Signing.Disabled {
		if env.Getenv(attest.EnvSigningKeyFile) != "" {
			return k, usagef("%s is set but the config disables signing (signing.disabled); unset one of them", attest.EnvSigningKeyFile)
		}
		k.Disabled = cfg.Signing.DisabledReason
		return k, nil
	}
	var s *attest.Signer
	src := ""
	switch {
	case keyFile != "":
		if s, err = attest.LoadSigner(keyFile); err != nil {
			return k, usagef("signing key (from %s or the config's signing.key_file): %v", attest.EnvSigningKeyFile, err)
		}
		src = "signing key " + keyFile
	default:
		dir, err := attest.MachineKeyDir(env.Getenv)
		if err != nil {
			return k, usagef("machine signing key: %v; or set signing.disabled with a reason in the config", err)
		}
		p := filepath.Join(dir, attest.PrivateKeyFile)
		if !withSigner {
			if _, err := os.Lstat(p); err != nil {
				break // nothing to trust from this machine yet, and nothing to create
			}
		}
		var created bool
		if s, created, err = attest.EnsureMachineKey(dir); err != nil {
			return k, usagef("machine signing key %s: %v; fix it, name another key with %s, or set signing.disabled with a reason in the config", p, err, attest.EnvSigningKeyFile)
		}
		if created {
			fmt.Fprintf(env.Stderr, "cto-harness: created the machine signing key %s (key id %s); evidence is signed with it and it is trusted here; give verifiers %s\n",
				p, s.Public().ID, filepath.Join(dir, attest.PublicKeyFile))
		}
		src = "machine key " + p
	}
	if s != nil {
		if withSigner {
			k.Signer = s
		}
		if _, ok := k.Sources[s.Public().ID]; !ok {
			k.Trusted = append(k.Trusted, s.Public())
			k.Sources[s.Public().ID] = src
		}
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
public key's DER encoding). Without one the harness signs with its machine key, created on first use in
$XDG_CONFIG_HOME/cto-harness (else ~/.config/cto-harness). Point the harness at this key instead with the
config's signing.key_file or ` + attest.EnvSigningKeyFile + `; give verifiers the public key with
signing.trusted_keys or --pubkey FILE. Keep the private key off machines that only verify.
See docs/evidence.md (trust model).`
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
		return "signed: false (the evidence is only tamper-evident; the report says why)"
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
	return "signed: true, key " + keyID + ", signature NOT verified (no trusted key matched; pass the signer's public key with --pubkey FILE)"
}
