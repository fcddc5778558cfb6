package warmcache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// PipIndex is the endpoint whose absence from a command's allowlist makes
// pip skip the index.
const PipIndex = "pypi.org"

// Pip is the host's pip cache and, when configured, a wheelhouse (a
// directory of wheels and sdists, as `pip download -d` or `pip wheel -w`
// leave them). pip's cache saves downloads, but pip asks the index before
// it looks there, so offline only the wheelhouse can install anything.
type Pip struct {
	Cache      string
	Wheelhouse string
}

// DetectPip finds the host's pip cache: $PIP_CACHE_DIR when set, else what
// `pip cache dir` answers (run with the harness's PATH and HOME only, in an
// empty directory), else $XDG_CACHE_HOME/pip or ~/.cache/pip. wheelhouse,
// when given, must be an existing absolute directory.
func DetectPip(ctx context.Context, getenv func(string) string, wheelhouse string) (Pip, error) {
	var p Pip
	if wheelhouse != "" {
		d, err := absDir("pip wheelhouse (caches.pip_wheelhouse)", wheelhouse)
		if err != nil {
			return p, err
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return p, fmt.Errorf("%w: the pip wheelhouse %s is not a directory on this machine", ErrUnavailable, d)
		}
		p.Wheelhouse = d
	}
	if v := getenv("PIP_CACHE_DIR"); v != "" {
		d, err := absDir("pip cache ($PIP_CACHE_DIR)", v)
		p.Cache = d
		return p, err
	}
	for _, name := range []string{"pip", "pip3"} {
		pip := lookPath(getenv, name)
		if pip == "" {
			continue
		}
		out, err := ask(ctx, getenv, []string{"HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "PYENV_ROOT", "PYENV_VERSION"}, pip, "cache", "dir")
		if err != nil {
			return p, fmt.Errorf("%w: %v (pip's cache may be disabled: PIP_NO_CACHE_DIR or no-cache-dir in pip.conf)", ErrUnavailable, err)
		}
		p.Cache, err = absDir("pip cache (pip cache dir)", out)
		return p, err
	}
	base := getenv("XDG_CACHE_HOME")
	if !filepath.IsAbs(base) {
		home := getenv("HOME")
		if !filepath.IsAbs(home) {
			return p, fmt.Errorf("%w: no pip on PATH, no $PIP_CACHE_DIR and no absolute HOME to find ~/.cache/pip in", ErrUnavailable)
		}
		base = filepath.Join(home, ".cache")
	}
	p.Cache = filepath.Join(base, "pip")
	return p, nil
}

// Dirs is the cache and the wheelhouse, each shown at its own path.
func (p Pip) Dirs() []Dir {
	d := []Dir{{Name: "pip", Host: p.Cache, At: p.Cache}}
	if p.Wheelhouse != "" {
		d = append(d, Dir{Name: "pip-wheelhouse", Host: p.Wheelhouse, At: p.Wheelhouse})
	}
	return d
}

// Env points pip at the cache and the wheelhouse. Offline it turns the
// index off, so pip installs from the wheelhouse at once, or says which
// requirement it lacks, instead of retrying an index it cannot reach. A
// cache the host does not have is not named (see Npm.Env).
func (p Pip) Env(offline bool) []string {
	var env []string
	if isDir(p.Cache) {
		env = append(env, "PIP_CACHE_DIR="+p.Cache)
	}
	if p.Wheelhouse != "" {
		env = append(env, "PIP_FIND_LINKS="+p.Wheelhouse)
	}
	if offline {
		env = append(env, "PIP_NO_INDEX=1")
	}
	return env
}
