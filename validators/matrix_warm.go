package validators

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cto-harness/cto-harness/harness/config"
)

// warmCaches makes the host caches a row offers (fixtures.Setup's
// WarmCaches) under work, turns them on in cfg, and returns the replacer of
// their placeholders and the variables that name them to the harness.
func warmCaches(work string, kinds []string, cfg *config.Config) (*strings.Replacer, map[string]string, error) {
	env := map[string]string{}
	var pairs []string
	if len(kinds) == 0 {
		return strings.NewReplacer(), env, nil
	}
	cfg.Caches = &config.Caches{}
	for _, k := range kinds {
		dir := filepath.Join(work, "host-caches", k)
		entry := filepath.Join(dir, "host-entry")
		switch k {
		case "npm":
			cfg.Caches.Npm = true
			env["npm_config_cache"] = dir
		case "cargo":
			cfg.Caches.Cargo = true
			env["CARGO_HOME"] = dir
			entry = filepath.Join(dir, "registry", "host-entry")
		default:
			return nil, nil, fmt.Errorf("unknown warm cache %q (npm, cargo)", k)
		}
		if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(entry, []byte("the host's "+k+" cache\n"), 0o644); err != nil {
			return nil, nil, err
		}
		pairs = append(pairs, "{warm_"+k+"}", dir)
	}
	return strings.NewReplacer(pairs...), env, nil
}

// withEnv is getenv answering set's variables first.
func withEnv(getenv func(string) string, set map[string]string) func(string) string {
	if len(set) == 0 {
		return getenv
	}
	return func(k string) string {
		if v, ok := set[k]; ok {
			return v
		}
		return getenv(k)
	}
}
