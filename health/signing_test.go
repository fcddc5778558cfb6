package health_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/health"
)

func signingCheck(t *testing.T, o health.Options) (health.Check, health.SigningFacts) {
	t.Helper()
	rep := health.Run(context.Background(), o)
	for _, c := range rep.Checks {
		if c.Name == "signing_key" {
			return c, rep.Signing
		}
	}
	t.Fatal("no signing_key check")
	return health.Check{}, health.SigningFacts{}
}

func TestHealthSigningKey(t *testing.T) {
	runs := t.TempDir()
	keys := filepath.Join(t.TempDir(), "keys")
	pub, err := attest.Generate(keys)
	if err != nil {
		t.Fatal(err)
	}
	s, err := attest.LoadSigner(filepath.Join(keys, attest.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	o := health.Options{RunsDir: runs, RecordsDir: filepath.Join(runs, "validation"), MaxAge: time.Hour, Now: time.Now()}
	// Signing is on by default: no signer and no opt-out is a failure.
	if c, f := signingCheck(t, o); c.OK || f.Configured || !strings.Contains(c.Detail, "explicit opt-out") {
		t.Errorf("no key and no opt-out passed: %+v %+v", c, f)
	}
	o.Signing = attest.Keys{Disabled: "an air-gapped demo"}
	if c, f := signingCheck(t, o); !c.OK || f.Disabled == "" || !strings.Contains(c.Detail, "an air-gapped demo") {
		t.Errorf("the opt-out with its reason: %+v %+v", c, f)
	}
	o.Signing = attest.Keys{Signer: s, Trusted: []attest.PublicKey{pub}, Sources: map[string]string{pub.ID: "machine key " + s.File()}}
	c, f := signingCheck(t, o)
	if !c.OK || !f.Usable || f.KeyID != pub.ID || !f.KeyTrusted || len(f.Trusted) != 1 || f.Trusted[0].ID != pub.ID ||
		!strings.Contains(c.Detail, "trusted: "+pub.ID+" (machine key ") {
		t.Errorf("a usable, trusted key and its trust set: %+v %+v", c, f)
	}
	// A signer that the trust set does not verify cannot sign evidence that validates.
	other, _ := attest.Ephemeral()
	o.Signing.Trusted = other.Trusted
	if c, _ := signingCheck(t, o); c.OK {
		t.Errorf("a signer outside the trust set passed: %+v", c)
	}
	o.Signing, o.SigningErr = attest.Keys{}, errors.New("signing key: mode 0640; run 'chmod 600'")
	if c, _ := signingCheck(t, o); c.OK || !strings.Contains(c.Detail, "chmod 600") {
		t.Errorf("a key the command could not load passed: %+v", c)
	}
}
