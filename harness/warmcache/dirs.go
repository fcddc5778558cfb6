package warmcache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// Dir is one host cache directory offered to a command: Host is read, never
// written, and appears at At inside the command's view (its own path, or a
// path in the command's scratch when the tool wants the cache under a home
// directory of its own).
type Dir struct {
	Name string // a label, and the name of its per-run layer
	Host string
	At   string
}

// ShowDirs shows each dir the host has through an overlay whose writable
// layer is layer/<name> (a per-run directory outside every view), which it
// creates. A dir the host does not have is left out and named in missing.
func ShowDirs(dirs []Dir, layer string) (ovs []sandbox.Overlay, missing []string, err error) {
	for _, d := range dirs {
		if !isDir(d.Host) {
			missing = append(missing, d.Name+" ("+d.Host+")")
			continue
		}
		o := sandbox.Overlay{Path: d.At, Lower: d.Host, Upper: filepath.Join(layer, d.Name, "upper"), Work: filepath.Join(layer, d.Name, "work")}
		for _, p := range []string{o.Upper, o.Work} {
			if err := os.MkdirAll(p, 0o700); err != nil {
				return nil, nil, fmt.Errorf("%w: cannot create the per-run layer of %s: %v", ErrUnavailable, d.Host, err)
			}
		}
		ovs = append(ovs, o)
	}
	return ovs, missing, nil
}

// lookPath finds name on the harness's PATH (absolute entries only, so a
// relative entry cannot make the current directory's program the host's).
func lookPath(getenv func(string) string, name string) string {
	for _, d := range filepath.SplitList(getenv("PATH")) {
		if !filepath.IsAbs(d) {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(d, name)); err == nil {
			return p
		}
	}
	return ""
}

// ask runs a host tool to learn where its cache is (see runTool) and
// returns the last line it printed.
func ask(ctx context.Context, getenv func(string) string, keep []string, argv ...string) (string, error) {
	out, err := runTool(ctx, getenv, keep, nil, argv...)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// runTool runs a host tool with only PATH, the named variables of the
// harness's environment and set, in an empty directory of its own: no
// project's configuration is read, nothing the source configures runs, and
// the harness's own working directory (which may be gone) does not matter.
// It returns what the tool printed on its standard output.
func runTool(ctx context.Context, getenv func(string) string, keep, set []string, argv ...string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "warmcache-ask-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + getenv("PATH")}, set...)
	for _, k := range keep {
		if v := getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// absDir checks that what a tool or variable named is an absolute path.
func absDir(what, p string) (string, error) {
	if p == "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: the host's %s %q is not an absolute path", ErrUnavailable, what, p)
	}
	return filepath.Clean(p), nil
}

// isDir reports whether p is a directory on the host.
func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
