package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// View is the filesystem the command is given instead of the host's: a new
// root holding only what is listed here. Whatever is not listed is absent.
// Everything is read-only at the mount level except the Policy's writable
// directories, a private /tmp and a private /dev/shm.
type View struct {
	// System are host paths bound read-only when they exist (the directories
	// and /etc files programs need to run, toolchain roots). A missing one
	// is skipped, and one inside a hidden path is left out.
	System []string `json:"system"`
	// Read are host paths that must be bound read-only (configured read
	// paths, the command's own executable). A missing one, or one inside a
	// Protected path, makes the view fail.
	Read []string `json:"read,omitempty"`
	// Files are exact read-only binds the harness itself supplies (the task
	// file, a generated /etc/hosts). They are not checked against Hide or
	// Protected, and they win over anything else at the same path.
	Files []Bind `json:"files,omitempty"`
	// Hide are paths that must not be seen. A hidden path inside a bound
	// directory is covered by an empty read-only tmpfs (or an empty file).
	Hide []string `json:"hide,omitempty"`
	// Protected are hidden like Hide, and no Read path may lie inside one
	// (the source, owned roots, Target roots, the config, the runs
	// directory).
	Protected []string `json:"protected,omitempty"`
	// Overlays show a host directory with the command's writes kept apart
	// (warm caches: the host's stays untouched, see Overlay).
	Overlays []Overlay `json:"overlays,omitempty"`
	// Moved shows a writable directory (Source, one of the policy's
	// writable directories) at Path instead of at its own path. Go's build
	// cache keys a package by its directory, so a checkout shown at the
	// same path in every run finds what an earlier run compiled.
	Moved []Bind `json:"moved,omitempty"`
	// Links are symbolic links made in the view: Path (where no mount
	// is) links to Source, a path inside the view; a relative Source is
	// relative to Cwd, so a link follows the work directory wherever a
	// view moves it. A task's layout shows its checkout at the path its
	// tests name (/app) this way, without moving the directory Landlock
	// and the evidence know it by.
	Links []Bind `json:"links,omitempty"`
	// Cwd is where the command starts; it must be inside the view.
	Cwd string `json:"cwd,omitempty"`
	// Expect, when set, is the Digest of the view the launcher must build;
	// a launch whose plan differs (the host changed since the view was
	// tried and recorded) fails instead of running in another view.
	Expect string `json:"expect,omitempty"`
}

// Overlay shows Lower, a host directory the command must not change (a
// warm build cache), at Path as an overlayfs: the command reads Lower and
// writes to Upper, a per-run directory; Work is overlayfs's own, on Upper's
// filesystem. Path must lie inside a writable directory (Landlock allows
// writes by path), and Lower inside no Protected path.
type Overlay struct {
	Path  string `json:"path"`
	Lower string `json:"lower"`
	Upper string `json:"upper"`
	Work  string `json:"work"`
	// Layers are read-only layers over Lower, topmost first: the harness's
	// own kept build cache, which may lie inside a Protected path (the
	// runs directory) because only the harness ever writes it.
	Layers []string `json:"layers,omitempty"`
}

// Bind is one exact read-only bind: Source on the host appears at Path.
type Bind struct {
	Path   string `json:"path"`
	Source string `json:"source"`
}

// MountKind says what a view entry is.
type MountKind string

// Kinds of view entries.
const (
	MountBind    MountKind = "bind"    // a host path
	MountTmpfs   MountKind = "tmpfs"   // an empty, private tmpfs (/, /dev, /tmp, /dev/shm)
	MountMask    MountKind = "mask"    // an empty read-only tmpfs or file over a hidden path
	MountProc    MountKind = "proc"    // procfs of the new PID namespace
	MountDevice  MountKind = "device"  // a host device node (/dev/null, …)
	MountSymlink MountKind = "symlink" // a symbolic link created in the view
	MountOverlay MountKind = "overlay" // an overlayfs over a host directory, writes to a per-run layer
)

// Mount is one entry of the view, in the order it is made.
type Mount struct {
	Path     string    `json:"path"`
	Kind     MountKind `json:"kind"`
	Source   string    `json:"source,omitempty"` // host path of a bind or device; link target of a symlink
	Writable bool      `json:"writable"`
	// file marks a bind or mask of a non-directory (the mount point is a file).
	File bool `json:"file,omitempty"`
	// Upper and Work are an overlay's writable layer and work directory;
	// Lowers its read-only layers over Source, topmost first.
	Upper  string   `json:"upper,omitempty"`
	Work   string   `json:"work,omitempty"`
	Lowers []string `json:"lowers,omitempty"`
}

// tmpSize caps the private /tmp; shmSize caps /dev/shm.
const tmpSize = "512m"

// DefaultSystem are the host paths bound read-only by default: enough to
// run sh, git, go, node/npm and python, and nothing that holds secrets.
func DefaultSystem() []string {
	return []string{
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
		"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf",
		"/etc/gai.conf", "/etc/services", "/etc/protocols", "/etc/networks", "/etc/ssl", "/etc/ca-certificates",
		"/etc/ca-certificates.conf", "/etc/pki", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/alternatives", "/etc/localtime", "/etc/timezone", "/etc/os-release", "/etc/debian_version",
		"/etc/gitconfig", "/etc/npmrc", "/etc/pip.conf", "/etc/mime.types", "/etc/magic", "/etc/shells",
		"/etc/locale.alias", "/etc/python3", "/etc/python3.11", "/etc/python3.12", "/etc/python3.13",
	}
}

// DefaultHide are hidden even when a configured read path would show them:
// home directories and the runtime directories that hold sockets and
// secrets.
func DefaultHide() []string {
	return []string{"/root", "/home", "/run", "/var/run"}
}

// devNodes are the host device nodes of the view's /dev.
var devNodes = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// devLinks are the /dev symlinks programs expect.
var devLinks = [][2]string{{"/dev/fd", "/proc/self/fd"}, {"/dev/stdin", "/proc/self/fd/0"},
	{"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"}}

// ErrView marks a view that cannot be built.
var ErrView = errors.New("the filesystem view cannot be built")

func viewErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrView, fmt.Sprintf(format, a...))
}

// Plan turns the view and the writable directories into the ordered list of
// mounts the launcher makes. It only looks at the host (lstat, readlink); it
// is the same list the launcher executes and the report records.
func (v View) Plan(writable []string) ([]Mount, error) {
	for _, set := range [][]string{v.System, v.Read, v.Hide, v.Protected} {
		for _, p := range set {
			if !clean(p) {
				return nil, viewErr("path %q must be absolute and clean", p)
			}
		}
	}
	for _, f := range v.Files {
		if !clean(f.Path) || !clean(f.Source) {
			return nil, viewErr("file bind %q from %q must be absolute and clean", f.Path, f.Source)
		}
	}
	hidden := append(append([]string{}, v.Hide...), v.Protected...)
	byPath := map[string]Mount{}
	add := func(m Mount) { byPath[m.Path] = m }
	add(Mount{Path: "/", Kind: MountTmpfs})

	// Read-only binds: system paths (optional), then required read paths.
	var binds []Mount
	for _, p := range v.System {
		if WithinAny(p, hidden) {
			continue
		}
		m, ok, err := hostBind(p, false)
		if err != nil {
			return nil, err
		}
		if ok && !WithinAny(m.Source, hidden) {
			binds = append(binds, m)
		}
	}
	for _, p := range v.Read {
		if under := firstContaining(p, v.Protected); under != "" {
			return nil, viewErr("read path %s lies inside %s, which the command must never see", p, under)
		}
		m, ok, err := hostBind(p, true)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, viewErr("read path %s does not exist", p)
		}
		if under := firstContaining(m.Source, v.Protected); under != "" {
			return nil, viewErr("read path %s resolves to %s inside %s, which the command must never see", p, m.Source, under)
		}
		binds = append(binds, m)
	}
	// Symlinked top-level entries (/bin -> usr/bin) stay symlinks when their
	// target is bound anyway; otherwise the target is bound at the path.
	for _, m := range binds {
		if m.Kind == MountSymlink {
			target := m.Source
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(m.Path), target)
			}
			if boundBy(target, binds) {
				add(m)
				continue
			}
			real, err := filepath.EvalSymlinks(m.Path)
			if err != nil || WithinAny(real, hidden) {
				continue
			}
			st, err := os.Stat(real)
			if err != nil {
				continue
			}
			m = Mount{Path: m.Path, Kind: MountBind, Source: real, File: !st.IsDir()}
		}
		if prev, ok := byPath[m.Path]; ok && prev.Kind == MountBind {
			continue
		}
		if coveredBy(m, binds, hidden) {
			continue // shown by its parent's bind anyway
		}
		add(m)
	}

	add(Mount{Path: "/proc", Kind: MountProc})
	add(Mount{Path: "/dev", Kind: MountTmpfs})
	for _, d := range devNodes {
		if _, err := os.Stat(d); err == nil {
			add(Mount{Path: d, Kind: MountDevice, Source: d, Writable: true, File: true})
		}
	}
	for _, l := range devLinks {
		add(Mount{Path: l[0], Kind: MountSymlink, Source: l[1]})
	}
	add(Mount{Path: "/dev/shm", Kind: MountTmpfs, Writable: true})
	add(Mount{Path: "/tmp", Kind: MountTmpfs, Writable: true})

	for _, w := range writable {
		if !clean(w) {
			return nil, viewErr("writable path %q must be absolute and clean", w)
		}
		st, err := os.Stat(w)
		if err != nil || !st.IsDir() {
			return nil, viewErr("writable directory %s does not exist", w)
		}
		add(Mount{Path: MovedTo(v.Moved, w), Kind: MountBind, Source: w, Writable: true})
	}
	for _, m := range v.Moved {
		if !clean(m.Path) || !slices.Contains(writable, m.Source) {
			return nil, viewErr("moved directory %s at %s: it must be a writable directory and the path absolute and clean", m.Source, m.Path)
		}
	}
	for _, o := range v.Overlays {
		if !clean(o.Path) || !clean(o.Lower) || !clean(o.Upper) || !clean(o.Work) {
			return nil, viewErr("overlay %+v: paths must be absolute and clean", o)
		}
		if under := firstContaining(o.Lower, v.Protected); under != "" {
			return nil, viewErr("overlay %s shows %s, inside %s, which the command must never see", o.Path, o.Lower, under)
		}
		if under := firstContaining(o.Path, v.Protected); under != "" && !WithinAny(o.Path, writable) {
			return nil, viewErr("overlay %s lies inside %s, which the command must never see", o.Path, under)
		}
		for _, d := range append([]string{o.Lower, o.Upper, o.Work}, o.Layers...) {
			if !clean(d) {
				return nil, viewErr("overlay %s: layer %q must be absolute and clean", o.Path, d)
			}
			if st, err := os.Stat(d); err != nil || !st.IsDir() {
				return nil, viewErr("overlay %s: directory %s does not exist", o.Path, d)
			}
		}
		for _, l := range append([]string{o.Lower}, o.Layers...) {
			if Within(o.Upper, l) || Within(l, o.Upper) || Within(o.Work, l) {
				return nil, viewErr("overlay %s: the writable layer and %s overlap", o.Path, l)
			}
		}
		add(Mount{Path: o.Path, Kind: MountOverlay, Source: o.Lower, Upper: o.Upper, Work: o.Work, Lowers: o.Layers, Writable: true})
	}
	for _, f := range v.Files {
		st, err := os.Stat(f.Source)
		if err != nil {
			return nil, viewErr("file %s for %s does not exist", f.Source, f.Path)
		}
		add(Mount{Path: f.Path, Kind: MountBind, Source: f.Source, File: !st.IsDir()})
	}
	if err := addLinks(v.Links, v.Cwd, byPath, add); err != nil {
		return nil, err
	}

	// Masks: a hidden path that some bind would show gets an empty mount.
	all := make([]Mount, 0, len(byPath))
	for _, m := range byPath {
		all = append(all, m)
	}
	for _, h := range hidden {
		if _, exact := byPath[h]; exact {
			continue
		}
		var best *Mount
		for i, m := range all {
			if m.Kind == MountBind && !m.File && Within(h, m.Source) && (best == nil || len(m.Source) > len(best.Source)) {
				best = &all[i]
			}
		}
		if best == nil {
			continue
		}
		st, err := os.Lstat(h)
		if err != nil {
			continue // nothing there to hide
		}
		at := filepath.Join(best.Path, relTo(best.Source, h))
		if _, taken := byPath[at]; !taken {
			add(Mount{Path: at, Kind: MountMask, File: !st.IsDir()})
		}
	}
	// Mount points inside the writable /tmp or /dev/shm would be created on
	// that writable tmpfs, and a command could then add files next to its
	// fixture that look like the run's own. They live on a read-only tmpfs
	// of their own instead, one directory below.
	for _, w := range []string{"/tmp", "/dev/shm"} {
		for p := range byPath {
			if p == w || !Within(p, w) {
				continue
			}
			top := filepath.Join(w, strings.SplitN(relTo(w, p), "/", 2)[0])
			if _, taken := byPath[top]; !taken {
				byPath[top] = Mount{Path: top, Kind: MountTmpfs}
			}
		}
	}
	out := make([]Mount, 0, len(byPath))
	for _, m := range byPath {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return pathLess(out[i].Path, out[j].Path) })
	if v.Cwd != "" && !visible(v.Cwd, out) {
		return nil, viewErr("the working directory %s is not inside the view", v.Cwd)
	}
	return out, nil
}

// addLinks adds the view's symbolic links, each at a path no mount is at
// or under, and over no mount either: a link may not shadow what the view
// shows, nor be shadowed by it.
func addLinks(links []Bind, cwd string, byPath map[string]Mount, add func(Mount)) error {
	links = slices.Clone(links)
	for i, l := range links {
		if !filepath.IsAbs(l.Source) && clean(cwd) && !strings.HasPrefix(filepath.Clean(l.Source), "..") {
			links[i].Source = filepath.Join(cwd, l.Source)
			l = links[i]
		}
		if !clean(l.Path) || !clean(l.Source) || l.Path == "/" {
			return viewErr("link %q to %q: both must be absolute and clean, and the link not /", l.Path, l.Source)
		}
		for p := range byPath {
			if p != "/" && (Within(l.Path, p) || Within(p, l.Path)) {
				return viewErr("link %s to %s collides with the view's mount at %s", l.Path, l.Source, p)
			}
		}
	}
	for _, l := range links {
		add(Mount{Path: l.Path, Kind: MountSymlink, Source: l.Source})
	}
	return nil
}

// MovedTo is where writable directory w appears in a view with moved
// directories: its moved path, or its own.
func MovedTo(moved []Bind, w string) string {
	for _, m := range moved {
		if m.Source == w {
			return m.Path
		}
	}
	return w
}

// hostBind describes a host path as a bind (or a symlink to re-create).
func hostBind(p string, required bool) (Mount, bool, error) {
	st, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Mount{}, false, nil
	}
	if err != nil {
		if required {
			return Mount{}, false, viewErr("cannot inspect %s: %v", p, err)
		}
		return Mount{}, false, nil
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return Mount{}, false, nil
		}
		if required {
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return Mount{}, false, viewErr("read path %s is a dangling symlink", p)
			}
			rs, err := os.Stat(real)
			if err != nil {
				return Mount{}, false, viewErr("cannot inspect %s: %v", real, err)
			}
			return Mount{Path: p, Kind: MountBind, Source: real, File: !rs.IsDir()}, true, nil
		}
		return Mount{Path: p, Kind: MountSymlink, Source: target}, true, nil
	}
	return Mount{Path: p, Kind: MountBind, Source: p, File: !st.IsDir()}, true, nil
}

// boundBy reports whether p is shown by a same-path directory bind.
func boundBy(p string, binds []Mount) bool {
	for _, b := range binds {
		if b.Kind == MountBind && !b.File && b.Source == b.Path && Within(p, b.Path) {
			return true
		}
	}
	return false
}

// coveredBy reports whether m adds nothing: an ancestor directory is bound
// from the same place.
func coveredBy(m Mount, binds []Mount, hidden []string) bool {
	if m.Kind != MountBind {
		return false // the path (a symlink included) is shown as the host has it
	}
	for _, b := range binds {
		if b.Kind != MountBind || b.File || b.Source != b.Path || b.Path == m.Path || !Within(m.Path, b.Path) {
			continue
		}
		masked := false // a mask between b and m hides m there
		for _, h := range hidden {
			if Within(m.Path, h) && Within(h, b.Path) && h != b.Path {
				masked = true
			}
		}
		if !masked {
			return true
		}
	}
	return false
}

// visible reports whether directory p exists in the view: inside a bound
// directory, or on the way to a mount (tmpfs directories are empty apart
// from mount points).
func visible(p string, mounts []Mount) bool {
	for _, m := range mounts {
		if m.Kind == MountBind && !m.File && Within(p, m.Path) || Within(m.Path, p) {
			return true
		}
	}
	return false
}

func clean(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

func firstContaining(p string, roots []string) string {
	for _, r := range roots {
		if Within(p, r) {
			return r
		}
	}
	return ""
}

func relTo(root, p string) string {
	rel, _ := filepath.Rel(root, p)
	return rel
}

// pathLess orders parents before children ("/a" < "/a/b" < "/a-b").
func pathLess(a, b string) bool {
	return strings.ReplaceAll(a, "/", "\x00") < strings.ReplaceAll(b, "/", "\x00")
}

// Digest is the SHA-256 of the mounts' canonical JSON, so two views can be
// compared and a recorded view checked.
func Digest(mounts []Mount) string {
	b, _ := json.Marshal(mounts)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
