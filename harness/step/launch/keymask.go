package launch

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// maxKeyDirEntries bounds the scan of a key's directory for other keys.
const maxKeyDirEntries = 4096

// secretPaths are the files no view may show, named by what they are rather
// than how they were reached: the signing key and the config, each by the
// path given and by its real path (every symlink resolved), and every
// other private key next to the signing key (a rotated key keeps signing
// power). Public keys are masked too: they are harmless, but a view never
// needs them.
func (l *Launcher) secretPaths() []string {
	return secretPaths(l.in.Config, l.in.Getenv(attest.EnvSigningKeyFile), l.in.SignerFile)
}

// secretPaths are the secrets of config c, the signing key variable's
// value envKey and the signer's file signer ("" for none).
func secretPaths(c config.Config, envKey, signer string) []string {
	named := []string{c.Path, c.Signing.KeyFile, envKey}
	named = append(named, c.Signing.TrustedKeys...)
	if signer != "" {
		named = append(named, signer)
	}
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		if p != "/" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range named {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		add(abs)
		real := realPath(abs)
		add(real)
	}
	// Rotated keys: the signing key's directories, as named and as real.
	var keyDirs []string
	for _, p := range []string{c.Signing.KeyFile, envKey, signer} {
		if filepath.IsAbs(p) {
			keyDirs = append(keyDirs, filepath.Dir(p), filepath.Dir(realPath(p)))
		}
	}
	for _, d := range keyDirs {
		for _, k := range privateKeysIn(d) {
			add(k)
			add(realPath(k))
		}
	}
	return out
}

// privateKeysIn lists the regular files of dir that hold a PEM private key
// or are named like one (*.key, *.pem): rotated and backup keys.
func privateKeysIn(dir string) []string {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(maxKeyDirEntries)
	var out []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := os.Stat(p) // a link to a key is a key
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if strings.HasSuffix(n, ".key") || strings.HasSuffix(n, ".pem") || holdsPrivateKey(p) {
			out = append(out, p)
		}
	}
	return out
}

// holdsPrivateKey reads the start of p for a PEM private key header.
func holdsPrivateKey(p string) bool {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	return bytes.Contains(head[:n], []byte("PRIVATE KEY-----"))
}

// exposedSecret returns the first secret path that the built view shows
// (a bind whose source holds it, not covered there by a mask or another
// mount), or "". The masks should make this impossible; it is checked on
// the view the launcher actually built, so that a run whose command could
// read the key is never signed.
func exposedSecret(mounts []sandbox.Mount, secrets []string) string {
	for _, sec := range secrets {
		for _, m := range mounts {
			if m.Kind != sandbox.MountBind || !sandbox.Within(sec, m.Source) {
				continue
			}
			if m.File && m.Source != sec {
				continue
			}
			rel, err := filepath.Rel(m.Source, sec)
			if err != nil {
				continue
			}
			at := filepath.Join(m.Path, rel)
			// The deepest mount at or above at decides what is there.
			top := -1
			for i, o := range mounts {
				if sandbox.Within(at, o.Path) && (top < 0 || len(o.Path) > len(mounts[top].Path)) {
					top = i
				}
			}
			if top >= 0 && mounts[top].Path == m.Path {
				return sec
			}
		}
	}
	return ""
}
