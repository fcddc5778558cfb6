package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/toolenv"
)

// toolchainCommands are looked up on the command's PATH; the install root of
// each one found (the directory above its bin/) joins the view's system
// paths unless a hidden path holds it.
var toolchainCommands = []string{"go", "node", "npm", "python3", "git"}

// View returns the filesystem view of Case (verification false) or of the
// verification command, building and trying it on first use. A view that
// cannot be built is an error, so the caller blocks with SANDBOX_UNAVAILABLE
// before any process of that kind starts. argv is the command, whose
// executable must be visible. files are extra read-only files the harness
// puts into the view (a generated /etc/hosts); they replace what the host has
// at their paths.
func (l *Launcher) View(ctx context.Context, verification bool, argv []string, files ...sandbox.Bind) (*sandbox.View, error) {
	if v, ok := l.views[verification]; ok && slices.Equal(l.viewFiles[verification], files) {
		return v, nil
	}
	v, rec, err := l.PlanView(verification, argv)
	if err != nil {
		return nil, err
	}
	v.Files = append(v.Files, files...)
	pol := l.Policy(verification)
	pol.View = v
	work, _ := l.Roots(verification)
	var trial sandbox.Trial
	if l.in.Trials != nil {
		trial, err = l.in.Trials.Try(ctx, l.in.SelfExe, pol, work, viewShape(pol, l.sink.RunID, l.in.TrialsRoot))
	} else {
		trial, err = sandbox.Try(ctx, l.in.SelfExe, pol, work)
	}
	if err != nil {
		return nil, fmt.Errorf("the sandbox's filesystem view cannot be built: %w", err)
	}
	v.Expect = sandbox.Digest(trial.View) // every launch must build exactly this view
	if sec := exposedSecret(trial.View, l.secretPaths()); sec != "" && l.sink.Report.UnsignedReason == "" {
		kind := "Case's"
		if verification {
			kind = "the verification command's"
		}
		l.sink.Report.UnsignedReason = fmt.Sprintf("%s sandbox view shows %s (the signing key, another key next to it, or the config): evidence a command could have forged with that key is never signed; hide it with sandbox.hide_paths or move the key", kind, sec)
	}
	rec.Mounts = viewMounts(trial.View)
	rec.Digest = ctoharness.ViewDigest(rec.Mounts)
	if verification {
		l.sink.Report.Sandbox.VerificationView = &rec
	} else {
		l.sink.Report.Sandbox.View = &rec
	}
	if l.views == nil {
		l.views = map[bool]*sandbox.View{}
	}
	l.views[verification] = v
	if l.viewFiles == nil {
		l.viewFiles = map[bool][]sandbox.Bind{}
	}
	l.viewFiles[verification] = files
	return v, nil
}

// viewShape is what pol's view has in common with the same kind of view of
// another run: its lists and writable directories, with this run's id
// (runID, which names its run and work directories) taken out, and root
// too when set (a directory of the run's own that other runs have one like,
// as each row of a failure-matrix replay does). root is replaced only as a
// whole path or a path's leading directories.
func viewShape(pol sandbox.Policy, runID, root string) string {
	b, err := json.Marshal(struct {
		View     *sandbox.View
		Writable []string
	}{pol.View, pol.Writable})
	if err != nil {
		return "" // never equal to a real shape's JSON: tried every time
	}
	s := strings.ReplaceAll(string(b), runID, "{run}")
	if root != "" && filepath.IsAbs(root) {
		q, _ := json.Marshal(filepath.Clean(root))
		open := strings.TrimSuffix(string(q), `"`)
		s = strings.NewReplacer(open+`"`, `"{root}"`, open+"/", `"{root}/`).Replace(s)
	}
	return s
}

// PlanView assembles the view's lists: the defaults, the config's lists for
// this kind of command narrowed by the task's, the command's executable,
// and everything the harness knows the command must never see.
func (l *Launcher) PlanView(verification bool, argv []string) (*sandbox.View, ctoharness.ViewRecord, error) {
	cfg := l.in.Config.Lists(verification)
	tsk := l.spec.ViewLists(verification)
	system := sandbox.DefaultSystem()
	read := cfg.ReadPaths
	if tsk.ReadPaths != nil {
		allowed := append(append([]string{}, system...), cfg.ReadPaths...)
		for _, p := range tsk.ReadPaths {
			if !sandbox.WithinAny(p, allowed) {
				return nil, ctoharness.ViewRecord{}, fmt.Errorf("the task's sandbox read path %s is not inside a default or configured read path; a task can narrow the view, never widen it", p)
			}
		}
		read = tsk.ReadPaths
	}
	hide := append(append(sandbox.DefaultHide(), cfg.HidePaths...), tsk.HidePaths...)
	if d := l.spec.HiddenTests; d != "" {
		hide = append(hide, d) // laid into the verification's checkout; never shown to Case
	}
	// The harness user's own home, wherever it is.
	if home := l.in.Getenv("HOME"); filepath.IsAbs(home) && filepath.Clean(home) != "/" {
		hide = append(hide, filepath.Clean(home))
	}
	cmd := egress.CommandCase
	if verification {
		cmd = egress.CommandVerify
	}
	var tc toolenv.Set
	if l.in.Tools != nil {
		tc = l.in.Tools(cmd) // checked at the gate
	}
	hide = append(hide, tc.Hide...)
	hostPath := pathOf(tc.Apply(backend.Env(l.in.Scratch, "", l.in.Getenv("PATH"), l.src.Root, l.src.GitDir)))
	system = append(system, toolchainRoots(hostPath)...)
	work, _ := l.Roots(verification)
	v := &sandbox.View{System: system, Hide: hide, Protected: l.protectedPaths(), Cwd: work}
	v.Read = append(v.Read, read...)
	for _, p := range tc.Read {
		if !slices.Contains(v.Read, p) {
			v.Read = append(v.Read, p)
		}
	}
	if _, scratch := l.Roots(verification); scratch != "" && l.in.Warm != nil {
		if err := l.in.Warm(v, verification, scratch); err != nil {
			return nil, ctoharness.ViewRecord{}, err
		}
	}
	if lay := l.spec.Layout; lay != nil {
		v.Links = LayoutLinks(*lay, verification)
	}
	if len(argv) > 0 {
		v.Read = commandReads(v.Read, argv, system, hostPath)
	}
	if !verification {
		task := l.sink.Dir.Path(evidence.TaskFile)
		if abs, err := filepath.Abs(task); err == nil {
			v.Files = append(v.Files, sandbox.Bind{Path: abs, Source: abs})
		}
	}
	return v, ctoharness.ViewRecord{ReadPaths: nonNil(v.Read), HidePaths: nonNil(hide)}, nil
}

// LayoutLinks are the view's links of a task's layout: its workdir to the
// command's work directory (the view's Cwd, wherever the view moves it),
// and for the verification each link to its directory in the checkout.
func LayoutLinks(lay task.Layout, verification bool) []sandbox.Bind {
	links := []sandbox.Bind{{Path: lay.Workdir, Source: "."}}
	if !verification {
		return links
	}
	for _, at := range slices.Sorted(maps.Keys(lay.Links)) {
		links = append(links, sandbox.Bind{Path: at, Source: filepath.ToSlash(filepath.Clean(lay.Links[at]))})
	}
	return links
}

// commandReads adds what the command itself needs to read to the view's
// read paths: its executable, a script it runs named by absolute path
// (["node", "/opt/agent/cli.js"]), and for a Node program the install
// directory holding the node_modules its executable or script lies in (it
// loads its modules next to its real path).
func commandReads(read, argv, system []string, hostPath string) []string {
	exe := argv[0]
	if !filepath.IsAbs(exe) {
		exe = lookIn(exe, hostPath)
	}
	if exe != "" && !sandbox.WithinAny(exe, system) {
		read = append(read, filepath.Clean(exe))
	}
	for _, a := range argv[1:] {
		if filepath.IsAbs(a) && !sandbox.WithinAny(a, system) && !slices.Contains(read, filepath.Clean(a)) {
			if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() {
				read = append(read, filepath.Clean(a))
			}
		}
	}
	for _, p := range append([]string{}, read...) {
		for _, q := range []string{p, realPath(p)} {
			if i := strings.Index(q, "/node_modules/"); i > 0 && !slices.Contains(read, q[:i]) && !sandbox.WithinAny(q[:i], system) {
				read = append(read, q[:i])
			}
		}
	}
	return read
}

// protectedPaths are hidden and may hold no read path: the source (and its
// git directory when that is kept elsewhere), every owned source root,
// Target and external root, the config file, the evidence signing key and
// the runs directory (this run's fixture and scratch come back as writable
// binds, the task file as a file bind).
func (l *Launcher) protectedPaths() []string {
	var out []string
	c := l.in.Config
	for _, group := range [][]string{{l.src.Root, l.src.Given, l.src.GitDir, l.in.RunsDir}, l.secretPaths(), c.OwnedSources, c.TargetRoots, c.ExternalRoots} {
		for _, p := range group {
			if p == "" {
				continue
			}
			abs, err := filepath.Abs(p)
			if err != nil || abs == "/" {
				continue
			}
			out = append(out, abs)
		}
	}
	return out
}

// viewMounts is the report's form of the view.
func viewMounts(ms []sandbox.Mount) []ctoharness.ViewMount {
	out := make([]ctoharness.ViewMount, 0, len(ms))
	for _, m := range ms {
		mode := ctoharness.ViewRO
		if m.Writable {
			mode = ctoharness.ViewRW
		}
		out = append(out, ctoharness.ViewMount{Path: m.Path, Kind: string(m.Kind), Source: m.Source, Mode: mode, Layer: m.Upper, Lowers: m.Lowers})
	}
	return out
}

// toolchainRoots finds the install roots of the toolchain commands on path.
func toolchainRoots(path string) []string {
	var out []string
	for _, c := range toolchainCommands {
		exe := lookIn(c, path)
		if exe == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(exe)
		if err != nil {
			continue
		}
		dir := filepath.Dir(real)
		if filepath.Base(dir) == "bin" {
			dir = filepath.Dir(dir)
		}
		if dir != "/" {
			out = append(out, dir)
		}
	}
	return out
}

// lookIn finds name on the PATH list path ("" when absent).
func lookIn(name, path string) string {
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	return ""
}

// pathOf is the PATH an environment list sets ("" when it sets none).
func pathOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// realPath is p with every symlink resolved, or p itself when it cannot be.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
