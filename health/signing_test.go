package health_test

import (
	"context"
	"os"
	"path/filepath"
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
	o := health.Options{RunsDir: runs, RecordsDir: filepath.Join(runs, "validation"), MaxAge: time.Hour, Now: time.Now()}
	if c, f := signingCheck(t, o); !c.OK || f.Configured {
		t.Errorf("no key configured is healthy and unsigned: %+v %+v", c, f)
	}
	o.SigningKeyFile = filepath.Join(keys, attest.PrivateKeyFile)
	o.TrustedKeyFiles = []string{filepath.Join(keys, attest.PublicKeyFile)}
	if c, f := signingCheck(t, o); !c.OK || !f.Usable || f.KeyID != pub.ID || !f.KeyTrusted {
		t.Errorf("a usable, trusted key: %+v %+v", c, f)
	}
	if err := os.Chmod(o.SigningKeyFile, 0o640); err != nil {
		t.Fatal(err)
	}
	if c, f := signingCheck(t, o); c.OK || f.Usable {
		t.Errorf("a group-readable key passed: %+v %+v", c, f)
	}
	o.SigningKeyFile = filepath.Join(keys, "missing.key")
	if c, _ := signingCheck(t, o); c.OK {
		t.Errorf("a missing key passed: %+v", c)
	}
}
