package launch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// The secrets are named by what they are: a key reached through a symlink
// is masked at its real path, and every private key next to it is too,
// whatever its name; a file that is no key is left alone.
func TestSecretPaths(t *testing.T) {
	dir := t.TempDir()
	shown := filepath.Join(dir, "shown")
	if err := os.MkdirAll(shown, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	realKey := filepath.Join(shown, "real.key")
	write(realKey, "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n")
	rotated := filepath.Join(shown, "signing.2024")
	write(rotated, "-----BEGIN PRIVATE KEY-----\ny\n-----END PRIVATE KEY-----\n")
	notes := filepath.Join(shown, "notes.txt")
	write(notes, "nothing secret\n")
	realCfg := filepath.Join(shown, "cfg.json")
	write(realCfg, "{}")
	link := filepath.Join(dir, "keys", "signing.key")
	cfgLink := filepath.Join(dir, "cfg-link.json")
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(realKey, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(realCfg, cfgLink); err != nil {
		t.Fatal(err)
	}
	got := secretPaths(config.Config{Path: cfgLink, Signing: config.Signing{KeyFile: link}}, "", "")
	for _, want := range []string{link, realKey, rotated, cfgLink, realCfg} {
		if !slices.Contains(got, want) {
			t.Errorf("%s is not masked: %v", want, got)
		}
	}
	if slices.Contains(got, notes) {
		t.Errorf("a file that is no key is masked: %v", got)
	}
}

// exposedSecret reads the built view: a bind that holds the secret shows it
// unless a mask (or another mount) covers that spot; a bind on top of a mask
// shows it again.
func TestExposedSecret(t *testing.T) {
	root := sandbox.Mount{Path: "/", Kind: sandbox.MountTmpfs}
	etc := sandbox.Mount{Path: "/etc", Kind: sandbox.MountBind, Source: "/etc"}
	key := "/etc/ssl/private/k.pem"
	cases := []struct {
		name   string
		mounts []sandbox.Mount
		want   string
	}{
		{"bound directory shows it", []sandbox.Mount{root, etc}, key},
		{"masked file", []sandbox.Mount{root, etc, {Path: key, Kind: sandbox.MountMask, File: true}}, ""},
		{"masked directory", []sandbox.Mount{root, etc, {Path: "/etc/ssl", Kind: sandbox.MountMask}}, ""},
		{"bound again inside the mask", []sandbox.Mount{root, etc, {Path: "/etc/ssl", Kind: sandbox.MountMask},
			{Path: "/etc/ssl/private", Kind: sandbox.MountBind, Source: "/etc/ssl/private"}}, key},
		{"bound elsewhere", []sandbox.Mount{root, {Path: "/opt/x", Kind: sandbox.MountBind, Source: "/etc/ssl"}}, key},
		{"file bind of another file", []sandbox.Mount{root, {Path: "/etc/hosts", Kind: sandbox.MountBind, Source: "/etc/hosts", File: true}}, ""},
		{"not bound", []sandbox.Mount{root, {Path: "/usr", Kind: sandbox.MountBind, Source: "/usr"}}, ""},
	}
	for _, tc := range cases {
		if got := exposedSecret(tc.mounts, []string{key}); got != tc.want {
			t.Errorf("%s: exposed %q, want %q", tc.name, got, tc.want)
		}
	}
}
