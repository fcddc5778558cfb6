package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// maxSymlinks bounds symlink expansion while resolving a path, so a cycle
// ends in a refusal instead of a hang. It matches Linux's MAXSYMLINKS.
const maxSymlinks = 40

// fenceRoot is one root the harness must never touch. path is the form
// compared against (clean, absolute); given is the root as configured, for
// messages. A root reached through a symlinked ancestor has a second
// fenceRoot whose path is the physical form.
type fenceRoot struct {
	path  string
	given string
	code  ctoharness.BlockerCode
}

// fence is the set of target and external roots of one Classify call.
// Comparisons are purely lexical so that checking a path never touches it.
type fence []fenceRoot

// newFence builds the lexical fence from the policy. Relative roots are made
// absolute against the working directory, which is also lexical.
func newFence(pol Policy) fence {
	var f fence
	add := func(roots []string, code ctoharness.BlockerCode) {
		for _, r := range roots {
			if r == "" {
				continue
			}
			abs, err := filepath.Abs(r)
			if err != nil {
				continue
			}
			f = append(f, fenceRoot{path: abs, given: r, code: code})
		}
	}
	add(pol.TargetRoots, ctoharness.BlockSourceIsTarget)
	add(pol.ExternalRoots, ctoharness.BlockSourceExternal)
	return f
}

// check returns a root that p (clean, absolute) is at or under. A target
// root wins over an external root, because it is the stronger refusal.
func (f fence) check(p string) (fenceRoot, bool) {
	var hit fenceRoot
	found := false
	for _, r := range f {
		if within(p, r.path) {
			if r.code == ctoharness.BlockSourceIsTarget {
				return r, true
			}
			if !found {
				hit, found = r, true
			}
		}
	}
	return hit, found
}

// within reports whether p equals root or lies under it, segment-aware:
// /a/bc is not within /a/b. Both must be clean absolute paths.
func within(p, root string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || (len(p) > len(root) && p[len(root)] == '/' && p[:len(root)] == root)
}

// fencedError is returned when an operation was refused because its path is
// at or under a fenced root. The operation was not performed.
type fencedError struct {
	path string
	root fenceRoot
}

func (e *fencedError) Error() string {
	return fmt.Sprintf("%s is inside fenced root %s", e.path, e.root.given)
}

// inspector performs the read-only filesystem operations of one Classify
// call. Each operation checks the fence, then traces, then touches the path,
// so the trace never holds a fenced path.
type inspector struct {
	tr    ctoharness.Tracer
	fence fence
}

func (in *inspector) guard(p string) error {
	if r, ok := in.fence.check(p); ok {
		return &fencedError{path: p, root: r}
	}
	return nil
}

func (in *inspector) lstat(p string) (fs.FileInfo, error) {
	if err := in.guard(p); err != nil {
		return nil, err
	}
	in.tr.Trace(ctoharness.TraceStat, p)
	return os.Lstat(p)
}

func (in *inspector) readlink(p string) (string, error) {
	if err := in.guard(p); err != nil {
		return "", err
	}
	in.tr.Trace(ctoharness.TraceReadlink, p)
	return os.Readlink(p)
}

func (in *inspector) readFile(p string) ([]byte, error) {
	if err := in.guard(p); err != nil {
		return nil, err
	}
	in.tr.Trace(ctoharness.TraceRead, p)
	return os.ReadFile(p)
}

// errSymlinkLoop means resolution expanded more than maxSymlinks links.
var errSymlinkLoop = errors.New("too many levels of symbolic links")

// resolve returns the physical path of abs (clean, absolute) without
// filepath.EvalSymlinks: it lstats one component at a time and checks each
// candidate against the fence first, so a symlink leading into a fenced root
// is refused before anything inside that root is stat'ed.
func (in *inspector) resolve(abs string) (string, error) {
	resolved := "/"
	rest := abs
	links := 0
	for rest != "" {
		var comp string
		rest = strings.TrimLeft(rest, "/")
		comp, rest, _ = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			// resolved holds no symlinks, so its lexical parent is its real parent.
			resolved = filepath.Dir(resolved)
			continue
		}
		cand := filepath.Join(resolved, comp)
		fi, err := in.lstat(cand)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = cand
			continue
		}
		links++
		if links > maxSymlinks {
			return "", fmt.Errorf("resolve %s at %s: %w", abs, cand, errSymlinkLoop)
		}
		target, err := in.readlink(cand)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		if rest != "" {
			target += "/" + rest
		}
		rest = target
	}
	return resolved, nil
}

// withAliases adds, for every root, the physical form reached by resolving
// the root's parent (for example /tmp/t when /tmp is a symlink to
// /private/tmp adds /private/tmp/t). Only ancestors of a root are touched,
// never the root itself; an ancestor that is itself fenced or missing adds
// no alias. A root that is itself a symlink cannot be resolved without
// touching it, so its target stays unfenced unless configured too.
func (in *inspector) withAliases() fence {
	out := append(fence(nil), in.fence...)
	for _, r := range in.fence {
		parent := filepath.Dir(r.path)
		if parent == r.path {
			continue
		}
		if _, fenced := in.fence.check(parent); fenced {
			continue
		}
		real, err := in.resolve(parent)
		if err != nil {
			continue
		}
		alias := filepath.Join(real, filepath.Base(r.path))
		if alias != r.path {
			out = append(out, fenceRoot{path: alias, given: r.given, code: r.code})
		}
	}
	return out
}
