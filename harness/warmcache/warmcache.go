// Package warmcache offers the host's Go caches to sandboxed commands
// without letting them change the host's copy: the module cache is served
// read-only as a file:// module proxy (so `go` works offline and extracts
// into the command's own scratch), and the build cache is shown through an
// overlay whose writable layer belongs to the one run. A command, Case
// included, can use every compiled package the user's own builds left
// behind, and nothing it writes outlives its run, so no later verification
// can read a poisoned entry.
package warmcache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

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
	goBin := ""
	for _, d := range filepath.SplitList(getenv("PATH")) {
		if !filepath.IsAbs(d) {
			continue
		}
		if _, err := exec.LookPath(filepath.Join(d, "go")); err == nil {
			goBin = filepath.Join(d, "go")
			break
		}
	}
	if goBin == "" {
		return Go{}, fmt.Errorf("%w: no go command on PATH to ask where the Go caches are", ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "env", "-json", "GOMODCACHE", "GOCACHE", "GOVERSION", "GOROOT", "GOOS", "GOARCH")
	cmd.Env = []string{"PATH=" + getenv("PATH"), "GOTOOLCHAIN=local"}
	// Asked from the root, not from wherever the harness was started: a
	// go.work or go.mod there is not the question, and a directory removed
	// under the harness would make go fail to start ("getwd").
	cmd.Dir = "/"
	for _, k := range []string{"HOME", "GOCACHE", "GOMODCACHE", "GOPATH", "XDG_CACHE_HOME", "GOENV"} {
		if v := getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return Go{}, fmt.Errorf("%w: %s env: %v: %s", ErrUnavailable, goBin, err, strings.TrimSpace(errb.String()))
	}
	var v struct{ GOMODCACHE, GOCACHE, GOVERSION, GOROOT, GOOS, GOARCH string }
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		return Go{}, fmt.Errorf("%w: %s env printed %q: %v", ErrUnavailable, goBin, out.String(), err)
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
	var out []sandbox.Overlay
	for _, c := range []struct{ dir, name string }{{g.ModCache, "mod"}, {g.BuildCache, "build"}} {
		if st, err := os.Stat(c.dir); err != nil || !st.IsDir() {
			continue
		}
		o := sandbox.Overlay{Path: c.dir, Lower: c.dir, Upper: filepath.Join(layer, c.name, "upper"), Work: filepath.Join(layer, c.name, "work")}
		if c.name == "build" {
			o.Layers = kept
		}
		for _, d := range []string{o.Upper, o.Work} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return nil, fmt.Errorf("%w: cannot create the per-run layer of %s: %v", ErrUnavailable, c.dir, err)
			}
		}
		out = append(out, o)
	}
	return out, nil
}
