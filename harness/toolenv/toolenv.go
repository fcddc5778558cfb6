// Package toolenv turns the config's toolchains and named variables into
// what one sandboxed command gets: read-only paths for its view, PATH
// entries and variables. Toolchains installed in a home directory (rustup,
// pyenv, nvm) are invisible by default, because the view hides every home
// directory; declaring them is how a verification finds its program
// instead of exiting 127. It also finds the common ones on the host, for
// --dry-run to offer, and says whether a program resolves inside a view.
package toolenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// Commands a variable or a toolchain can be for.
const (
	ForCase         = "case"
	ForSetup        = "setup"
	ForVerification = "verification"
)

// ErrInvalid marks a toolchain or variable that cannot be used.
var ErrInvalid = errors.New("invalid toolchain or environment configuration")

// reserved are variables the harness sets itself for every command: a
// configured value would undo the scratch HOME, the proxy or the warm
// caches' read-only guarantees.
var reserved = []string{"PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "GOCACHE", "GOPATH", "GOMODCACHE", "GOFLAGS",
	"GOPROXY", "GONOSUMDB", "GOSUMDB", "GOTOOLCHAIN", "LANG", "CASE_TASK_FILE", "NO_PROXY", "no_proxy",
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
	"npm_config_cache", "npm_config_offline", "PIP_FIND_LINKS", "PIP_NO_INDEX", "CARGO_NET_OFFLINE"}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// secretNames are files a toolchain directory may hold that are
// credentials, not toolchain: they stay hidden even when the directory is
// shown (~/.cargo/credentials.toml holds a crates.io token).
var secretNames = []string{"credentials", "credentials.toml", ".credentials.toml", ".npmrc", ".pypirc", ".netrc", ".git-credentials"}

// Set is what one command gets.
type Set struct {
	// Read are host paths bound read-only into the command's view.
	Read []string
	// Hide are credential files inside Read that stay hidden.
	Hide []string
	// Path are entries put before the command's PATH.
	Path []string
	// Env are KEY=VALUE pairs, sorted by key.
	Env []string
}

// For is the set of cmd (ForCase, ForSetup or ForVerification): every
// toolchain, and the variables that name cmd. getenv reads the harness's
// own environment, for variables without a value.
func For(c config.Config, cmd string, getenv func(string) string) (Set, error) {
	var s Set
	vars := map[string]string{}
	set := func(name, value, where string) error {
		if err := checkName(name); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
		}
		if prev, ok := vars[name]; ok && prev != value {
			return fmt.Errorf("%w: %s: %s is set twice, to %q and %q", ErrInvalid, where, name, prev, value)
		}
		vars[name] = value
		return nil
	}
	for i, tc := range c.Toolchains {
		where := fmt.Sprintf("toolchain %d (%s)", i+1, tc.Name)
		if len(tc.Paths) == 0 {
			return Set{}, fmt.Errorf("%w: %s lists no paths", ErrInvalid, where)
		}
		for _, p := range tc.Paths {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
				return Set{}, fmt.Errorf("%w: %s: path %q must be absolute, clean and not /", ErrInvalid, where, p)
			}
			if _, err := os.Stat(p); err != nil {
				return Set{}, fmt.Errorf("%w: %s: path %s: %v (remove it from the config, or install the toolchain)", ErrInvalid, where, p, err)
			}
			s.Read = appendNew(s.Read, p)
			for _, n := range secretNames {
				if _, err := os.Lstat(filepath.Join(p, n)); err == nil {
					s.Hide = appendNew(s.Hide, filepath.Join(p, n))
				}
			}
		}
		for _, p := range tc.Path {
			if !filepath.IsAbs(p) || !sandbox.WithinAny(p, tc.Paths) {
				return Set{}, fmt.Errorf("%w: %s: PATH entry %q must be absolute and inside one of its paths", ErrInvalid, where, p)
			}
			s.Path = appendNew(s.Path, filepath.Clean(p))
		}
		for _, k := range sortedKeys(tc.Env) {
			if err := set(k, tc.Env[k], where); err != nil {
				return Set{}, err
			}
		}
	}
	for i, v := range c.Env {
		where := fmt.Sprintf("env entry %d (%s)", i+1, v.Name)
		if len(v.For) == 0 {
			return Set{}, fmt.Errorf("%w: %s names no command (for: case, setup, verification)", ErrInvalid, where)
		}
		for _, f := range v.For {
			if f != ForCase && f != ForSetup && f != ForVerification {
				return Set{}, fmt.Errorf("%w: %s: unknown command %q (want case, setup or verification)", ErrInvalid, where, f)
			}
		}
		if !slices.Contains(v.For, cmd) {
			continue
		}
		value := ""
		if v.Value != nil {
			value = *v.Value
		} else {
			host, ok := lookup(getenv, v.Name)
			if !ok {
				return Set{}, fmt.Errorf("%w: %s is to be copied from the harness's environment, where it is not set: set it, or give a value in the config", ErrInvalid, where)
			}
			value = host
		}
		if err := set(v.Name, value, where); err != nil {
			return Set{}, err
		}
	}
	for _, k := range sortedKeys(vars) {
		s.Env = append(s.Env, k+"="+vars[k])
	}
	return s, nil
}

// lookup tells an unset variable from an empty one where getenv is
// os.Getenv; an injected getenv that returns "" counts as unset.
func lookup(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	if v != "" {
		return v, true
	}
	return "", false
}

func checkName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%q is not a variable name", name)
	}
	if slices.Contains(reserved, name) || strings.HasPrefix(name, "CTO_") {
		return fmt.Errorf("%s is set by the harness itself and cannot be configured (PATH entries go in a toolchain's \"path\")", name)
	}
	return nil
}

// Apply puts s into env (KEY=VALUE pairs from backend.Env): s.Path before
// PATH, s.Env added. Names are never reserved ones (For refuses them), so
// nothing the harness set is replaced.
func (s Set) Apply(env []string) []string {
	out := make([]string, 0, len(env)+len(s.Env))
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && len(s.Path) > 0 {
			parts := append(append([]string{}, s.Path...), filepath.SplitList(v)...)
			kv = "PATH=" + strings.Join(parts, string(filepath.ListSeparator))
		}
		out = append(out, kv)
	}
	out = append(out, s.Env...)
	sort.Strings(out)
	return out
}

// Resolve finds program the way the shell would on path, looking only
// where visible says the command can see. It returns the path found, or
// "" when the program does not resolve inside the view; a program with a
// slash is checked as given.
func Resolve(program, path string, visible func(string) bool) string {
	if program == "" {
		return ""
	}
	if strings.Contains(program, "/") {
		if visible(program) && executable(program) {
			return program
		}
		return ""
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, program)
		if visible(p) && executable(p) {
			return p
		}
	}
	return ""
}

func executable(p string) bool {
	_, err := exec.LookPath(p)
	return err == nil
}

// Detect finds the common toolchains installed under home that the config
// does not declare yet, ready to be pasted into it.
func Detect(home string, have []config.Toolchain) []config.Toolchain {
	if !filepath.IsAbs(home) || filepath.Clean(home) == "/" {
		return []config.Toolchain{}
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	declared := func(p string) bool {
		for _, tc := range have {
			if slices.Contains(tc.Paths, p) {
				return true
			}
		}
		return false
	}
	out := []config.Toolchain{}
	add := func(tc config.Toolchain) {
		for _, p := range tc.Paths {
			if !exists(p) || declared(p) {
				return
			}
		}
		out = append(out, tc)
	}
	j := func(rel string) string { return filepath.Join(home, rel) }
	// Only cargo's bin: CARGO_HOME stays in the command's scratch HOME,
	// where cargo may write its registry and locks.
	add(config.Toolchain{Name: "rust", Paths: []string{j(".cargo/bin"), j(".rustup")}, Path: []string{j(".cargo/bin")},
		Env: map[string]string{"RUSTUP_HOME": j(".rustup")}})
	add(config.Toolchain{Name: "pyenv", Paths: []string{j(".pyenv")}, Path: []string{j(".pyenv/shims"), j(".pyenv/bin")},
		Env: map[string]string{"PYENV_ROOT": j(".pyenv")}})
	if exists(j(".nvm")) && !declared(j(".nvm")) {
		tc := config.Toolchain{Name: "nvm", Paths: []string{j(".nvm")}, Env: map[string]string{"NVM_DIR": j(".nvm")}}
		// nvm's node is chosen by a shell function; the newest installed
		// version goes on PATH.
		if vs, _ := filepath.Glob(j(".nvm/versions/node/*/bin")); len(vs) > 0 {
			sort.Slice(vs, func(a, b int) bool { return versionLess(vs[a], vs[b]) })
			tc.Path = []string{vs[len(vs)-1]}
		}
		out = append(out, tc)
	}
	add(config.Toolchain{Name: "go", Paths: []string{j("go/bin")}, Path: []string{j("go/bin")}})
	add(config.Toolchain{Name: "user-local", Paths: []string{j(".local/bin")}, Path: []string{j(".local/bin")}})
	return out
}

// versionLess orders .../node/vX.Y.Z/bin by version.
func versionLess(a, b string) bool {
	va := strings.TrimPrefix(filepath.Base(filepath.Dir(a)), "v")
	vb := strings.TrimPrefix(filepath.Base(filepath.Dir(b)), "v")
	pa, pb := strings.Split(va, "."), strings.Split(vb, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		var x, y int
		fmt.Sscan(pa[i], &x)
		fmt.Sscan(pb[i], &y)
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

func appendNew(list []string, p string) []string {
	if slices.Contains(list, p) {
		return list
	}
	return append(list, p)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
