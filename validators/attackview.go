package validators

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"golang.org/x/sys/unix"
)

// viewSecrets are the placeholders a view row may use. Each names a file the
// replay plants with a fresh random secret: in a home directory it sets as
// the harness's HOME, under a Target Repository root, in the source (an
// ignored file, so it is not in the fixture), in another run's fixture, and
// in the harness config file, and as the evidence signing key named in the
// config. The row is red when any secret turns up in
// any file of the run directory.
//
// The linked and rotated ones live in a directory the view shows (a
// configured read path): {linked_signing_key} is the real file behind a
// configured key_file that is a symlink, {linked_config} the real file
// behind a config path that is a symlink, {rotated_key} an older private
// key next to the configured one. Only masking by real path and by what
// the files are keeps them out. They may also appear in the verification
// command, whose output is evidence.
var viewSecrets = []string{"{home_secret}", "{target_secret}", "{source_secret}", "{source_secret_rel}", "{other_run_secret}", "{config}", "{signing_key}",
	"{linked_signing_key}", "{linked_config}", "{rotated_key}"}

// viewAttack is what plantView set up for one row.
type viewAttack struct {
	secrets []string
	meta    map[string]string // the source's metadata before the run
}

// plantView plants the secrets the row's scenario names, points the harness
// at the planted home and config, and fills the placeholders in.
func (a *attack) plantView(work, src string, opts *harness.Options) error {
	a.view = &viewAttack{}
	token := func() string {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		s := "cto-harness-secret-" + hex.EncodeToString(b)
		a.view.secrets = append(a.view.secrets, s)
		return s
	}
	var repl []string
	verify := ""
	if opts.Spec != nil {
		verify = opts.Spec.Verification.Command
	}
	// shared is a directory the view shows, as a configured read path.
	shared := filepath.Join(work, "shared")
	showShared := func() error {
		if err := os.MkdirAll(shared, 0o755); err != nil {
			return err
		}
		if opts.Config.Sandbox == nil {
			opts.Config.Sandbox = &config.Sandbox{}
		}
		if !slices.Contains(opts.Config.Sandbox.ReadPaths, shared) {
			opts.Config.Sandbox.ReadPaths = append(opts.Config.Sandbox.ReadPaths, shared)
		}
		return nil
	}
	link := func(target, at string) error {
		if err := os.MkdirAll(filepath.Dir(at), 0o700); err != nil {
			return err
		}
		return os.Symlink(target, at)
	}
	pemKey := func() string { return "-----BEGIN PRIVATE KEY-----\n" + token() + "\n-----END PRIVATE KEY-----\n" }
	for _, ph := range viewSecrets {
		if !strings.Contains(opts.Scenario, ph) && !strings.Contains(verify, ph) {
			continue
		}
		var p string
		switch ph {
		case "{linked_signing_key}":
			if err := showShared(); err != nil {
				return err
			}
			p = filepath.Join(shared, "real-signing.key")
			at := filepath.Join(work, "keys-linked", "signing.key")
			if err := link(p, at); err != nil {
				return err
			}
			opts.Config.Signing.KeyFile = at
		case "{rotated_key}":
			if err := showShared(); err != nil {
				return err
			}
			dir := filepath.Join(shared, "keys")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			current := filepath.Join(dir, "signing.key")
			if err := os.WriteFile(current, []byte(pemKey()), 0o600); err != nil {
				return err
			}
			opts.Config.Signing.KeyFile = current
			// Named like no key: only its content says what it is.
			p = filepath.Join(dir, "signing.2025-01.old")
			if err := os.WriteFile(p, []byte(pemKey()), 0o600); err != nil {
				return err
			}
			repl = append(repl, ph, p)
			continue
		case "{linked_config}":
			if err := showShared(); err != nil {
				return err
			}
			p = filepath.Join(shared, "real-config.json")
			at := filepath.Join(work, "config-linked", "cto-harness.json")
			if err := link(p, at); err != nil {
				return err
			}
			opts.Config.Path = at
			opts.Config.CaseCommand = []string{"/bin/true", token()} // never run on the fake lane
			data, _ := json.Marshal(opts.Config)
			if err := os.WriteFile(p, data, 0o600); err != nil {
				return err
			}
			repl = append(repl, ph, p)
			continue
		case "{home_secret}":
			home := filepath.Join(work, "home")
			p = filepath.Join(home, ".secret-token")
			getenv := opts.Getenv
			opts.Getenv = func(k string) string {
				if k == "HOME" {
					return home
				}
				return getenv(k)
			}
		case "{target_secret}":
			if len(opts.Config.TargetRoots) == 0 {
				return fmt.Errorf("%s needs a Target Repository root in the row's config", ph)
			}
			p = filepath.Join(opts.Config.TargetRoots[0], "other-project", "credentials.txt")
		case "{source_secret}", "{source_secret_rel}":
			p = filepath.Join(src, "build", "source-only.log") // ignored by the sample's .gitignore
			if ph == "{source_secret_rel}" {
				// The same file at its own path in the fixture, where an
				// overlay fixture would show it but for its whiteout.
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					return err
				}
				if err := os.WriteFile(p, []byte(token()+"\n"), 0o600); err != nil {
					return err
				}
				repl = append(repl, ph, "build/source-only.log")
				continue
			}
		case "{other_run_secret}":
			p = filepath.Join(opts.RunsDir, "20200101T000000Z-s3-0ther000", "fixture", "secret.txt")
		case "{signing_key}":
			p = filepath.Join(work, "keys", "signing.key") // never loaded: the row's runs are signed in memory
			opts.Config.Signing.KeyFile = p
		case "{config}":
			p = filepath.Join(work, "cto-harness.json")
			opts.Config.Path = p
			opts.Config.CaseCommand = []string{"/bin/true", token()} // never run on the fake lane
			data, _ := json.Marshal(opts.Config)
			if err := os.WriteFile(p, data, 0o600); err != nil {
				return err
			}
			repl = append(repl, ph, p)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(token()+"\n"), 0o600); err != nil {
			return err
		}
		repl = append(repl, ph, p)
	}
	if len(repl) > 0 {
		r := strings.NewReplacer(repl...)
		opts.Scenario = r.Replace(opts.Scenario)
		if opts.Spec != nil {
			opts.Spec.Verification.Command = r.Replace(opts.Spec.Verification.Command)
		}
	}
	if src != "" {
		m, err := sourceMeta(src)
		if err != nil {
			return fmt.Errorf("snapshot the source's metadata: %w", err)
		}
		a.view.meta = m
	}
	return nil
}

// checkView fails the row when a planted secret reached any file of the run
// directory, or when the source's bytes or metadata (mode, owner, mtime,
// ctime, extended attributes) changed.
func (a *attack) checkView(runDir, src string, res *RowResult) {
	if a.view == nil {
		return
	}
	if len(a.view.secrets) > 0 {
		_ = filepath.WalkDir(runDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				res.fail("cannot read evidence file %s to look for secrets: %v", p, err)
				return nil
			}
			for _, s := range a.view.secrets {
				if bytes.Contains(data, []byte(s)) {
					res.fail("a planted secret reached the evidence: %s", p)
				}
			}
			return nil
		})
	}
	if a.view.meta == nil {
		return
	}
	after, err := sourceMeta(src)
	if err != nil {
		res.fail("snapshot the source's metadata after the run: %v", err)
		return
	}
	for p, before := range a.view.meta {
		if after[p] != before {
			res.fail("the source's %s changed: %s -> %s", p, before, after[p])
		}
	}
	for p := range after {
		if _, ok := a.view.meta[p]; !ok {
			res.fail("the source gained %s", p)
		}
	}
}

// sourceMeta describes every entry under root and, when root's .git is a
// gitfile, under the git directory it names (keyed by absolute path): type
// and mode, owner, mtime and ctime, extended attributes, and a file's
// content digest.
func sourceMeta(root string) (map[string]string, error) {
	out, err := treeMeta(root, false)
	if err != nil {
		return nil, err
	}
	if gd := rowRepo(root).GitDir; gd != filepath.Join(root, ".git") {
		more, err := treeMeta(gd, true)
		if err != nil {
			return nil, err
		}
		for k, v := range more {
			out[k] = v
		}
	}
	return out, nil
}

// treeMeta is sourceMeta of one tree, keyed by path relative to root, or
// by absolute path.
func treeMeta(root string, abs bool) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d mtime=%d.%09d ctime=%d.%09d", st.Mode, st.Uid, st.Gid,
			st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		if x := xattrs(p); x != "" {
			desc += " xattrs=" + x
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			desc += " sha256=" + hex.EncodeToString(sum[:])
		}
		rel, _ := filepath.Rel(root, p)
		if abs {
			rel = p
		}
		out[rel] = desc
		return nil
	})
	return out, err
}

func xattrs(p string) string {
	buf := make([]byte, 64*1024)
	n, err := unix.Llistxattr(p, buf)
	if err != nil || n <= 0 {
		if err != nil && err != syscall.ENOTSUP && err != syscall.ENODATA {
			return "unreadable:" + err.Error()
		}
		return ""
	}
	names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
	sort.Strings(names)
	var parts []string
	for _, name := range names {
		v := make([]byte, 64*1024)
		m, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			parts = append(parts, name+"=?")
			continue
		}
		parts = append(parts, name+"="+hex.EncodeToString(v[:m]))
	}
	return strings.Join(parts, ",")
}
