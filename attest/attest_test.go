package attest_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/cto-harness/cto-harness/attest"
)

func keyPair(t *testing.T) (*attest.Signer, attest.PublicKey, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	pub, err := attest.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := attest.LoadSigner(filepath.Join(dir, attest.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return s, pub, dir
}

func TestGenerate(t *testing.T) {
	s, pub, dir := keyPair(t)
	st, err := os.Stat(filepath.Join(dir, attest.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %04o, want 0600", st.Mode().Perm())
	}
	if s.Public().ID != pub.ID || len(pub.ID) != 16 {
		t.Errorf("key ids %q / %q", s.Public().ID, pub.ID)
	}
	loaded, err := attest.LoadPublicKey(filepath.Join(dir, attest.PublicKeyFile))
	if err != nil || loaded.ID != pub.ID {
		t.Fatalf("reload public key: %v (%q vs %q)", err, loaded.ID, pub.ID)
	}
	before, _ := os.ReadFile(filepath.Join(dir, attest.PrivateKeyFile))
	if _, err := attest.Generate(dir); !errors.Is(err, attest.ErrKeyExists) {
		t.Errorf("second Generate into the same directory: %v, want ErrKeyExists", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, attest.PrivateKeyFile))
	if !bytes.Equal(before, after) {
		t.Error("an existing private key was overwritten")
	}
}

func TestLoadSignerRefusals(t *testing.T) {
	_, _, dir := keyPair(t)
	priv := filepath.Join(dir, attest.PrivateKeyFile)
	if err := os.Chmod(priv, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := attest.LoadSigner(priv); !errors.Is(err, attest.ErrKeyExposed) {
		t.Errorf("world-readable key: %v, want ErrKeyExposed", err)
	}
	if _, err := attest.LoadSigner(filepath.Join(dir, attest.PublicKeyFile)); err == nil {
		t.Error("a public key file was accepted as a signing key")
	}
	if _, err := attest.LoadPublicKey(priv); !errors.Is(err, attest.ErrKeyInvalid) {
		t.Errorf("a private key as public key: %v", err)
	}
	if _, err := attest.LoadSigner(filepath.Join(dir, "absent")); !errors.Is(err, attest.ErrKeyInvalid) {
		t.Errorf("missing key: %v", err)
	}
}

func statement(t *testing.T) []byte {
	t.Helper()
	sum := sha256.Sum256([]byte("hello"))
	payload, err := attest.NewStatement([]attest.Subject{{Name: "b.txt", SHA256: hex.EncodeToString(sum[:])}, {Name: "a.txt", SHA256: hex.EncodeToString(sum[:])}},
		attest.RunPredicateType, map[string]any{"run_id": "r1", "stage": 3})
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

func TestSignVerifyRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, pub, _ := keyPair(t)
	_, other, _ := keyPair(t)
	payload := statement(t)
	env, err := attest.Sign(ctx, s, payload)
	if err != nil {
		t.Fatal(err)
	}
	e, err := attest.ParseEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := e.Verify(ctx, []attest.PublicKey{other, pub}); err != nil || id != pub.ID {
		t.Fatalf("verify with the key among several trusted: %q %v", id, err)
	}
	st, err := attest.ParseStatement(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Subjects) != 2 || st.Subjects[0].Name != "a.txt" || st.PredicateType != attest.RunPredicateType {
		t.Errorf("statement %+v", st)
	}
	var pred map[string]any
	if err := json.Unmarshal(st.Predicate, &pred); err != nil || pred["run_id"] != "r1" {
		t.Errorf("predicate %s: %v", st.Predicate, err)
	}
}

func TestVerifyRefusals(t *testing.T) {
	ctx := context.Background()
	s, pub, _ := keyPair(t)
	_, other, _ := keyPair(t)
	env, err := attest.Sign(ctx, s, statement(t))
	if err != nil {
		t.Fatal(err)
	}
	var raw dsse.Envelope
	if err := json.Unmarshal(env, &raw); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*dsse.Envelope)) []byte {
		c := raw
		c.Signatures = append([]dsse.Signature(nil), raw.Signatures...)
		f(&c)
		b, _ := json.Marshal(c)
		return b
	}
	forgedPayload := edit(func(e *dsse.Envelope) {
		p, _ := base64.StdEncoding.DecodeString(e.Payload)
		p = bytes.Replace(p, []byte(`"r1"`), []byte(`"r2"`), 1)
		e.Payload = base64.StdEncoding.EncodeToString(p)
	})
	cases := []struct {
		name      string
		env       []byte
		trusted   []attest.PublicKey
		parseErr  error
		verifyErr error
	}{
		{"truncated", env[:len(env)/2], []attest.PublicKey{pub}, attest.ErrMalformed, nil},
		{"empty", nil, []attest.PublicKey{pub}, attest.ErrMalformed, nil},
		{"no signatures", edit(func(e *dsse.Envelope) { e.Signatures = nil }), []attest.PublicKey{pub}, attest.ErrMalformed, nil},
		{"other payload type", edit(func(e *dsse.Envelope) { e.PayloadType = "text/plain" }), []attest.PublicKey{pub}, attest.ErrMalformed, nil},
		{"unknown key", env, []attest.PublicKey{other}, nil, attest.ErrUnknownKey},
		{"no trusted keys", env, nil, nil, attest.ErrNoTrust},
		{"payload edited", forgedPayload, []attest.PublicKey{pub}, nil, attest.ErrBadSignature},
		{"key id relabelled", edit(func(e *dsse.Envelope) { e.Signatures[0].KeyID = other.ID }), []attest.PublicKey{other}, nil, attest.ErrBadSignature},
		// An extra signature must verify too: one good signature does not
		// carry a bad or unknown one.
		{"extra bad signature", edit(func(e *dsse.Envelope) {
			e.Signatures = append(e.Signatures, dsse.Signature{KeyID: pub.ID, Sig: base64.StdEncoding.EncodeToString(make([]byte, 64))})
		}), []attest.PublicKey{pub}, nil, attest.ErrBadSignature},
		{"extra unknown-key signature", edit(func(e *dsse.Envelope) {
			e.Signatures = append(e.Signatures, dsse.Signature{KeyID: other.ID, Sig: e.Signatures[0].Sig})
		}), []attest.PublicKey{pub}, nil, attest.ErrUnknownKey},
		// Go's decoder matches keys case-insensitively and keeps the last
		// duplicate; jq reads another one. Both are refused.
		{"duplicate payload key", dupKey(env, `"payload":`, `"payload": "e30=", "payload":`), []attest.PublicKey{pub}, attest.ErrMalformed, nil},
		{"case-variant payload key", dupKey(env, `"payload":`, `"Payload": "e30=", "payload":`), []attest.PublicKey{pub}, attest.ErrMalformed, nil},
		{"case-variant key alone", dupKey(env, `"payload":`, `"PAYLOAD":`), []attest.PublicKey{pub}, attest.ErrMalformed, nil},
		{"duplicate sig key", dupKey(env, `"sig":`, `"sig": "AAAA", "sig":`), []attest.PublicKey{pub}, attest.ErrMalformed, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := attest.ParseEnvelope(tc.env)
			if tc.parseErr != nil {
				if !errors.Is(err, tc.parseErr) {
					t.Fatalf("parse: %v, want %v", err, tc.parseErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Verify(ctx, tc.trusted); !errors.Is(err, tc.verifyErr) {
				t.Fatalf("verify: %v, want %v", err, tc.verifyErr)
			}
		})
	}
}

// dupKey rewrites the first occurrence of old in an envelope's JSON,
// failing the test when old is not there (the case would test nothing).
func dupKey(env []byte, old, new string) []byte {
	if !bytes.Contains(env, []byte(old)) {
		panic("dupKey: " + old + " not in the envelope")
	}
	return bytes.Replace(env, []byte(old), []byte(new), 1)
}

// The machine key is created once, private and 0600, and reused after;
// two harnesses creating it at once end with one key.
func TestEnsureMachineKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg", "cto-harness")
	var ids = make(chan string, 4)
	var created = make(chan bool, 4)
	for range 4 {
		go func() {
			s, c, err := attest.EnsureMachineKey(dir)
			if err != nil {
				t.Error(err)
				ids <- ""
				created <- false
				return
			}
			ids <- s.Public().ID
			created <- c
		}()
	}
	first, n := "", 0
	for range 4 {
		id := <-ids
		if first == "" {
			first = id
		}
		if id != first || id == "" {
			t.Fatalf("concurrent creators disagree: %s vs %s", id, first)
		}
		if <-created {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d creators say they created the key, want 1", n)
	}
	st, err := os.Stat(filepath.Join(dir, attest.PrivateKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v %v", st, err)
	}
	pub, err := attest.LoadPublicKey(filepath.Join(dir, attest.PublicKeyFile))
	if err != nil || pub.ID != first {
		t.Fatalf("public key %v %v, want id %s", pub.ID, err, first)
	}
	s, c, err := attest.EnsureMachineKey(dir)
	if err != nil || c || s.Public().ID != first || s.File() != filepath.Join(dir, attest.PrivateKeyFile) {
		t.Fatalf("second use: created=%v err=%v", c, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".signing.key.*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestMachineKeyDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if d, _ := attest.MachineKeyDir(env(map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"})); d != "/x/cto-harness" {
		t.Errorf("with XDG_CONFIG_HOME: %s", d)
	}
	if d, _ := attest.MachineKeyDir(env(map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": "/h"})); d != "/h/.config/cto-harness" {
		t.Errorf("relative XDG_CONFIG_HOME is ignored (XDG spec): %s", d)
	}
	if _, err := attest.MachineKeyDir(env(map[string]string{"HOME": "/"})); !errors.Is(err, attest.ErrKeyInvalid) {
		t.Errorf("no usable directory: %v", err)
	}
}

// TestInteropOpenSSL checks the envelope the way a consumer with standard
// tools would: recompute the DSSE pre-authentication encoding by hand, and
// verify the ed25519 signature over it with openssl and the PEM public key.
func TestInteropOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed; the standard-tool interoperability check needs it")
	}
	ctx := context.Background()
	s, _, dir := keyPair(t)
	envJSON, err := attest.Sign(ctx, s, statement(t))
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(envJSON, &env); err != nil {
		t.Fatal(err)
	}
	// The DSSE library's own verifier, with a verifier built here from the
	// PEM file (not the package's adapter).
	var libEnv dsse.Envelope
	if err := json.Unmarshal(envJSON, &libEnv); err != nil {
		t.Fatal(err)
	}
	pemPub, err := attest.LoadPublicKey(filepath.Join(dir, attest.PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := dsse.NewEnvelopeVerifier(pemVerifier{pemPub.Key, env.Signatures[0].KeyID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Verify(context.Background(), &libEnv); err != nil {
		t.Fatalf("the DSSE library's verifier refused the envelope: %v", err)
	}
	body, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	// PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
	pae := []byte("DSSEv1 " + strconv.Itoa(len(env.PayloadType)) + " " + env.PayloadType + " " + strconv.Itoa(len(body)) + " ")
	pae = append(pae, body...)
	if !bytes.Equal(pae, dsse.PAE(env.PayloadType, body)) {
		t.Fatal("the hand-built PAE differs from the DSSE library's")
	}
	work := t.TempDir()
	paeFile, sigFile := filepath.Join(work, "pae.bin"), filepath.Join(work, "sig.bin")
	if err := os.WriteFile(paeFile, pae, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sigFile, sig, 0o644); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, attest.PublicKeyFile)
	verify := func(data string) ([]byte, error) {
		return exec.Command(openssl, "pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", data, "-sigfile", sigFile).CombinedOutput()
	}
	if out, err := verify(paeFile); err != nil {
		t.Fatalf("openssl refused the signature: %v\n%s", err, out)
	}
	// The same check must fail for a changed payload, or it proves nothing.
	pae[len(pae)-2] ^= 1
	if err := os.WriteFile(paeFile, pae, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(paeFile); err == nil {
		t.Fatalf("openssl accepted a signature over changed bytes:\n%s", out)
	}
	// The key id is recomputable from the PEM with openssl and sha256.
	der, err := exec.Command(openssl, "pkey", "-pubin", "-in", pub, "-outform", "DER").Output()
	if err != nil {
		t.Fatalf("openssl pkey: %v", err)
	}
	sum := sha256.Sum256(der)
	if id := hex.EncodeToString(sum[:8]); id != env.Signatures[0].KeyID {
		t.Errorf("key id %s, recomputed from the PEM %s", env.Signatures[0].KeyID, id)
	}
}

// TestBuildIDMatchesGoTool checks BuildID against 'go tool buildid', which a
// consumer uses to tie a predicate to a binary.
func TestBuildIDMatchesGoTool(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Skipf("go tool buildid is not available: %v", err)
	}
	if got, want := attest.BuildID(exe), string(bytes.TrimSpace(out)); got == "" || got != want {
		t.Errorf("BuildID = %q, go tool buildid says %q", got, want)
	}
	if attest.BuildID("/nonexistent") != "" {
		t.Error("a missing file has a build id")
	}
}

// pemVerifier is a plain dsse.Verifier over an ed25519 key.
type pemVerifier struct {
	key ed25519.PublicKey
	id  string
}

func (p pemVerifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(p.key, data, sig) {
		return errors.New("bad signature")
	}
	return nil
}
func (p pemVerifier) KeyID() (string, error)   { return p.id, nil }
func (p pemVerifier) Public() crypto.PublicKey { return p.key }
