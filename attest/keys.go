package attest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File names written by Generate, and the environment variable that names the
// signing key.
const (
	PrivateKeyFile    = "signing.key"
	PublicKeyFile     = "signing.pub"
	EnvSigningKeyFile = "CTO_HARNESS_SIGNING_KEY_FILE"
)

// Errors a caller tells apart with errors.Is.
var (
	ErrKeyExists  = errors.New("key file already exists")
	ErrKeyInvalid = errors.New("key file is not usable")
	ErrKeyExposed = errors.New("private key file is readable by group or others")
)

// PublicKey is a trusted ed25519 key with its short id.
type PublicKey struct {
	Key  ed25519.PublicKey
	ID   string
	Path string // where it was loaded from ("" when derived)
}

// Signer holds the private signing key.
type Signer struct {
	priv ed25519.PrivateKey
	pub  PublicKey
	file string
}

// Keys is what a command knows about signing: the key it signs with (nil:
// evidence is unsigned) and the public keys it trusts when verifying.
// Disabled is the user's stated reason for running without signatures
// (config signing.disabled); only then may a gate accept an unsigned
// previous-stage record.
type Keys struct {
	Signer   *Signer
	Trusted  []PublicKey
	Disabled string
	// Sources say where each trusted key came from, by key id, for health.
	Sources map[string]string
}

// KeyID is the first 16 hex digits of the sha256 of the key's PKIX (DER)
// encoding, so anyone can recompute it with openssl and sha256sum.
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "" // an ed25519.PublicKey of the right size always marshals
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

// Generate writes a new ed25519 key pair into dir: PrivateKeyFile (PKCS#8
// PEM, mode 0600) and PublicKeyFile (PKIX PEM). It refuses to replace either
// file, so an existing key is never lost.
func Generate(dir string) (PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return PublicKey{}, fmt.Errorf("generate an ed25519 key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return PublicKey{}, fmt.Errorf("encode the private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return PublicKey{}, fmt.Errorf("encode the public key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return PublicKey{}, fmt.Errorf("create key directory %s: %w", dir, err)
	}
	privPath, pubPath := filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, PublicKeyFile)
	for _, p := range []string{privPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return PublicKey{}, fmt.Errorf("%w: %s; move it away or choose another --out directory", ErrKeyExists, p)
		}
	}
	if err := writeExclusive(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return PublicKey{}, err
	}
	if err := writeExclusive(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return PublicKey{}, err
	}
	return PublicKey{Key: pub, ID: KeyID(pub), Path: pubPath}, nil
}

// writeExclusive creates p (never replacing it) with mode and writes data.
func writeExclusive(p string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %s", ErrKeyExists, p)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", p, werr)
	}
	return os.Chmod(p, mode) // the umask may have narrowed it; never widened
}

// LoadSigner reads a PKCS#8 PEM ed25519 private key. Like ssh, it refuses a
// key file that group or others can read.
func LoadSigner(p string) (*Signer, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKeyInvalid, p, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; run 'chmod 600 %s'", ErrKeyExposed, p, st.Mode().Perm(), p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKeyInvalid, p, err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: %s holds no PEM \"PRIVATE KEY\" block; create one with 'cto-harness keygen --out DIR'", ErrKeyInvalid, p)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKeyInvalid, p, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s is a %T, only ed25519 keys are used", ErrKeyInvalid, p, k)
	}
	pub := priv.Public().(ed25519.PublicKey)
	return &Signer{priv: priv, pub: PublicKey{Key: pub, ID: KeyID(pub)}, file: p}, nil
}

// Public returns the signer's public key.
func (s *Signer) Public() PublicKey { return s.pub }

// LoadPublicKey reads a PKIX PEM ed25519 public key.
func LoadPublicKey(p string) (PublicKey, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: %s: %v", ErrKeyInvalid, p, err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return PublicKey{}, fmt.Errorf("%w: %s holds no PEM \"PUBLIC KEY\" block", ErrKeyInvalid, p)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: %s: %v", ErrKeyInvalid, p, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return PublicKey{}, fmt.Errorf("%w: %s is a %T, only ed25519 keys are trusted", ErrKeyInvalid, p, k)
	}
	return PublicKey{Key: pub, ID: KeyID(pub), Path: p}, nil
}

// LoadPublicKeys loads every path; the first failure is returned.
func LoadPublicKeys(paths []string) ([]PublicKey, error) {
	var out []PublicKey
	for _, p := range paths {
		k, err := LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// File returns the path the signing key was loaded from ("" for an
// ephemeral key): the harness masks it, and its directory's other keys,
// from every sandbox view.
func (s *Signer) File() string { return s.file }

// Ephemeral returns keys that live only in memory: a fresh signer that is
// also the only trusted key. Tests and failure rows use it, so nothing they
// sign can be confused with the machine's evidence.
func Ephemeral() (Keys, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Keys{}, fmt.Errorf("generate an ed25519 key: %w", err)
	}
	pk := PublicKey{Key: pub, ID: KeyID(pub)}
	return Keys{Signer: &Signer{priv: priv, pub: pk}, Trusted: []PublicKey{pk}}, nil
}

// MachineKeyDir is where the machine key lives when no key is configured:
// $XDG_CONFIG_HOME/cto-harness, else $HOME/.config/cto-harness. Both are
// in the user's home or config tree, which no sandbox view shows. It fails
// when neither variable names an absolute directory.
func MachineKeyDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "cto-harness"), nil
	}
	if h := getenv("HOME"); filepath.IsAbs(h) && filepath.Clean(h) != "/" {
		return filepath.Join(h, ".config", "cto-harness"), nil
	}
	return "", fmt.Errorf("%w: neither XDG_CONFIG_HOME nor HOME names an absolute directory for the machine signing key; set one, or name a key with %s", ErrKeyInvalid, EnvSigningKeyFile)
}

// EnsureMachineKey loads dir's signing.key, creating the pair first when
// there is none (created is then true). Creation is atomic: the private key
// is written and synced under a temporary name and hard-linked into place,
// so two harnesses starting at once agree on one key and neither reads a
// half-written file.
func EnsureMachineKey(dir string) (s *Signer, created bool, err error) {
	p := filepath.Join(dir, PrivateKeyFile)
	if _, err := os.Lstat(p); err == nil {
		s, err := LoadSigner(p)
		return s, false, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("generate an ed25519 key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("%w: create the machine key directory %s: %v", ErrKeyInvalid, dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".signing.key.*")
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrKeyInvalid, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, false, fmt.Errorf("%w: write %s: %v", ErrKeyInvalid, tmp.Name(), werr)
	}
	lerr := os.Link(tmp.Name(), p)
	if lerr != nil && !errors.Is(lerr, os.ErrExist) {
		return nil, false, fmt.Errorf("%w: install %s: %v", ErrKeyInvalid, p, lerr)
	}
	created = lerr == nil
	if created {
		// The public half, for verifiers and the openssl recipe; a
		// concurrent creator that lost the race never writes it.
		if err := writeExclusive(filepath.Join(dir, PublicKeyFile), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil && !errors.Is(err, ErrKeyExists) {
			return nil, false, err
		}
		if d, err := os.Open(dir); err == nil {
			_ = d.Sync() // the new names survive a crash
			d.Close()
		}
	}
	s, err = LoadSigner(p)
	return s, created, err
}
