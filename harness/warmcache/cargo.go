package warmcache

import (
	"context"
	"fmt"
	"path/filepath"
)

// CargoIndex is the endpoint (crates.io's sparse index) whose absence from
// a command's allowlist turns cargo's offline mode on.
const CargoIndex = "index.crates.io"

// Cargo is the host's CARGO_HOME. Only its registry (index, downloaded
// crates, unpacked sources) and git checkouts are offered: its config,
// credentials and installed binaries stay out of the view.
type Cargo struct {
	Home string
}

// DetectCargo finds the host's CARGO_HOME: $CARGO_HOME, else ~/.cargo. It
// runs nothing: cargo keeps its caches at fixed places under its home.
func DetectCargo(_ context.Context, getenv func(string) string) (Cargo, error) {
	if v := getenv("CARGO_HOME"); v != "" {
		d, err := absDir("CARGO_HOME", v)
		return Cargo{Home: d}, err
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return Cargo{}, fmt.Errorf("%w: no $CARGO_HOME and no absolute HOME to find ~/.cargo in", ErrUnavailable)
	}
	return Cargo{Home: filepath.Join(home, ".cargo")}, nil
}

// CommandHome is the CARGO_HOME a command gets: inside its own HOME, so
// cargo's lock and anything else it writes there stay in its scratch.
func CommandHome(home string) string { return filepath.Join(home, ".cargo") }

// Dirs are the host's registry and git directories, shown inside the
// command's own CARGO_HOME (CommandHome of home).
func (c Cargo) Dirs(home string) []Dir {
	return []Dir{
		{Name: "cargo-registry", Host: filepath.Join(c.Home, "registry"), At: filepath.Join(CommandHome(home), "registry")},
		{Name: "cargo-git", Host: filepath.Join(c.Home, "git"), At: filepath.Join(CommandHome(home), "git")},
	}
}

// Env points cargo at the command's CARGO_HOME; offline (the command may
// not reach crates.io) cargo resolves only from what the registry holds.
func (c Cargo) Env(home string, offline bool) []string {
	env := []string{"CARGO_HOME=" + CommandHome(home)}
	if offline {
		env = append(env, "CARGO_NET_OFFLINE=true")
	}
	return env
}
