// Package warmcache offers the host's dependency and build caches (Go's
// module and build caches, npm's and pip's caches, a pip wheelhouse,
// cargo's registry) to sandboxed commands without letting them change the
// host's copy: each is shown at its path through an overlay whose writable
// layer belongs to the one run, with the tool pointed at it and kept
// offline where its registry is not allowed. Nothing a command writes
// outlives its run. The one exception is the kept Go build cache layer
// (Keep), made only from a warm-up of the baseline and read-only to every
// later command, so no later verification can read an entry Case wrote.
package warmcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// ErrUnavailable marks caches that were asked for and cannot be offered.
var ErrUnavailable = errors.New("warm caches unavailable")

// Go is the host's Go caches.
type Go struct {
	ModCache   string // GOMODCACHE
	BuildCache string // GOCACHE
	// Toolchain names the go command (version, GOROOT, target): a kept
	// build cache layer is made for one toolchain.
	Toolchain string
}

// DetectGo asks the host's go command (found on getenv("PATH"), with the
// harness's own GOCACHE, GOMODCACHE, GOPATH and HOME) where its caches are.
func DetectGo(ctx context.Context, getenv func(string) string) (Go, error) {
	goBin := lookPath(getenv, "go")
	if goBin == "" {
		return Go{}, fmt.Errorf("%w: no go command on PATH to ask where the Go caches are", ErrUnavailable)
	}
	out, err := runTool(ctx, getenv, []string{"HOME", "GOCACHE", "GOMODCACHE", "GOPATH", "XDG_CACHE_HOME", "GOENV"}, []string{"GOTOOLCHAIN=local"},
		goBin, "env", "-json", "GOMODCACHE", "GOCACHE", "GOVERSION", "GOROOT", "GOOS", "GOARCH")
	if err != nil {
		return Go{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var v struct{ GOMODCACHE, GOCACHE, GOVERSION, GOROOT, GOOS, GOARCH string }
	if err := json.Unmarshal(out, &v); err != nil {
		return Go{}, fmt.Errorf("%w: %s env printed %q: %v", ErrUnavailable, goBin, out, err)
	}
	g := Go{ModCache: filepath.Clean(v.GOMODCACHE), BuildCache: filepath.Clean(v.GOCACHE),
		Toolchain: strings.Join([]string{v.GOVERSION, v.GOROOT, v.GOOS + "/" + v.GOARCH}, " ")}
	for _, d := range []string{v.GOMODCACHE, v.GOCACHE} {
		if !filepath.IsAbs(d) {
			return Go{}, fmt.Errorf("%w: the host's Go cache %q is not an absolute path (GOCACHE=off?)", ErrUnavailable, d)
		}
	}
	return g, nil
}

// Env points the go command at the host's caches, at their host paths (a
// compiled package's cache key includes its source directory, so only the
// same module path finds the host's entries), and keeps it offline: no
// module proxy, no checksum database (go.sum is still checked), no
// toolchain download. A module the host does not have fails to resolve.
func (g Go) Env() []string {
	return []string{"GOMODCACHE=" + g.ModCache, "GOCACHE=" + g.BuildCache, "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local"}
}

// Overlays show both caches at their host paths, reads from the host's
// directories and writes to layer (a per-run directory outside every view),
// which it creates. A cache the host does not have yet is left out. kept
// are read-only layers shown over the host's build cache (see Keep).
func (g Go) Overlays(layer string, kept ...string) ([]sandbox.Overlay, error) {
	ovs, _, err := ShowDirs([]Dir{{Name: "mod", Host: g.ModCache, At: g.ModCache}, {Name: "build", Host: g.BuildCache, At: g.BuildCache}}, layer)
	for i := range ovs {
		if ovs[i].Lower == g.BuildCache {
			ovs[i].Layers = kept
		}
	}
	return ovs, err
}
