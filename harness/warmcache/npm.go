package warmcache

import (
	"context"
	"fmt"
	"path/filepath"
)

// NpmRegistry is the endpoint whose absence from a command's allowlist
// turns npm's offline mode on.
const NpmRegistry = "registry.npmjs.org"

// Npm is the host's npm cache (a content-addressed _cacache: its entries
// are keyed by URL and integrity, not by where the project is).
type Npm struct {
	Cache string
}

// DetectNpm finds the host's npm cache: $npm_config_cache when set, else
// what the host's npm answers to `npm config get cache` (run with the
// harness's PATH and HOME only, in an empty directory, writing no log into
// the cache), else ~/.npm.
func DetectNpm(ctx context.Context, getenv func(string) string) (Npm, error) {
	if v := getenv("npm_config_cache"); v != "" {
		d, err := absDir("npm cache ($npm_config_cache)", v)
		return Npm{Cache: d}, err
	}
	if npm := lookPath(getenv, "npm"); npm != "" {
		// Every npm command writes a debug log into the cache, and may ask
		// the registry for a newer npm: neither, when only asking.
		out, err := ask(ctx, getenv, []string{"HOME", "XDG_CONFIG_HOME", "NVM_DIR"}, npm, "config", "get", "cache", "--logs-max=0", "--update-notifier=false")
		if err != nil {
			return Npm{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		d, err := absDir("npm cache (npm config get cache)", out)
		return Npm{Cache: d}, err
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return Npm{}, fmt.Errorf("%w: no npm on PATH, no $npm_config_cache and no absolute HOME to find ~/.npm in", ErrUnavailable)
	}
	return Npm{Cache: filepath.Join(home, ".npm")}, nil
}

// Dirs is the cache, shown at its own path.
func (n Npm) Dirs() []Dir { return []Dir{{Name: "npm", Host: n.Cache, At: n.Cache}} }

// Env points npm at the cache and prefers it to the registry; offline (the
// command may not reach the registry) npm uses nothing else, so a package
// the cache lacks fails at once (ENOTCACHED) instead of after retries. A
// cache the host does not have is not shown, so it is not named either:
// npm keeps its default in the command's own HOME, where it can create it.
func (n Npm) Env(offline bool) []string {
	env := []string{"npm_config_prefer_offline=true"}
	if isDir(n.Cache) {
		env = append(env, "npm_config_cache="+n.Cache)
	}
	if offline {
		env = append(env, "npm_config_offline=true")
	}
	return env
}
