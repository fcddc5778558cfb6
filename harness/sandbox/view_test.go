package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
)

// viewBox is a box plus a host tree the view partly shows: sys/ is bound
// read-only, sys/hidden and sys/config.json are hidden inside it, home/ holds
// a secret and is hidden, and the source and the runs directory are
// protected.
type viewBox struct {
	box
	sys, hiddenDir, hiddenFile, home, secret string
}

func newViewBox(t *testing.T) viewBox {
	t.Helper()
	b := viewBox{box: newBox(t)}
	b.sys = filepath.Join(b.root, "sys")
	b.hiddenDir = filepath.Join(b.sys, "hidden")
	b.hiddenFile = filepath.Join(b.sys, "config.json")
	b.home = filepath.Join(b.root, "home")
	b.secret = filepath.Join(b.home, ".secret")
	for _, d := range []string{b.hiddenDir, b.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f, data := range map[string]string{filepath.Join(b.sys, "tool.txt"): "tool\n", filepath.Join(b.hiddenDir, "secret"): "SECRET-DIR\n",
		b.hiddenFile: "SECRET-FILE\n", b.secret: "SECRET-HOME\n"} {
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func (b viewBox) viewPolicy(t *testing.T) sandbox.Policy {
	p := b.policy()
	p.View = &sandbox.View{
		System:    append(sandbox.DefaultSystem(), b.sys),
		Read:      []string{self(t)},
		Files:     []sandbox.Bind{{Path: b.task, Source: b.task}},
		Hide:      append(sandbox.DefaultHide(), b.hiddenDir, b.hiddenFile, b.home),
		Protected: []string{b.source, filepath.Join(b.root, "runs")},
		Cwd:       b.fixture,
	}
	return p
}

func TestViewPlan(t *testing.T) {
	b := newViewBox(t)
	p := b.viewPolicy(t)
	mounts, err := p.View.Plan(p.Writable)
	if err != nil {
		t.Fatal(err)
	}
	find := func(path string) *sandbox.Mount {
		for i := range mounts {
			if mounts[i].Path == path {
				return &mounts[i]
			}
		}
		return nil
	}
	for i := 1; i < len(mounts); i++ {
		if strings.HasPrefix(mounts[i-1].Path, mounts[i].Path+"/") {
			t.Errorf("%s is mounted before its parent %s", mounts[i-1].Path, mounts[i].Path)
		}
	}
	want := []struct {
		path     string
		kind     sandbox.MountKind
		writable bool
	}{
		{"/", sandbox.MountTmpfs, false},
		{"/usr", sandbox.MountBind, false},
		{"/proc", sandbox.MountProc, false},
		{"/tmp", sandbox.MountTmpfs, true},
		{b.fixture, sandbox.MountBind, true},
		{b.sys, sandbox.MountBind, false},
		{b.hiddenDir, sandbox.MountMask, false},
		{b.hiddenFile, sandbox.MountMask, false},
		{b.task, sandbox.MountBind, false},
	}
	for _, w := range want {
		m := find(w.path)
		if m == nil || m.Kind != w.kind || m.Writable != w.writable {
			t.Errorf("%s: got %+v, want kind %s writable %v", w.path, m, w.kind, w.writable)
		}
	}
	for _, absent := range []string{b.source, b.home, b.report, "/root", "/home", "/run"} {
		if m := find(absent); m != nil {
			t.Errorf("%s is in the view: %+v", absent, m)
		}
	}
	for _, m := range mounts {
		if m.Writable && m.Kind == sandbox.MountBind && !slices.Contains(p.Writable, m.Path) {
			t.Errorf("writable bind %s is not a writable directory", m.Path)
		}
	}
	// A file bind the harness supplies replaces the host's file at that path
	// (a generated /etc/hosts).
	hosts := filepath.Join(b.root, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.View.Files = append(p.View.Files, sandbox.Bind{Path: "/etc/hosts", Source: hosts})
	withHosts, err := p.View.Plan(p.Writable)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range withHosts {
		if m.Path == "/etc/hosts" && (m.Source != hosts || m.Writable) {
			t.Errorf("/etc/hosts: %+v, want a read-only bind of %s", m, hosts)
		}
	}
	if d1, d2 := sandbox.Digest(mounts), sandbox.Digest(mounts[1:]); d1 == d2 || !strings.HasPrefix(d1, "sha256:") {
		t.Errorf("digest %s does not identify the view", d1)
	}
}

// A read path inside a hidden directory that a bind would otherwise cover
// is bound on its own, on top of the mask.
func TestViewPlanReadInsideMask(t *testing.T) {
	b := newViewBox(t)
	p := b.viewPolicy(t)
	inside := filepath.Join(b.hiddenDir, "secret")
	p.View.Read = append(p.View.Read, inside)
	mounts, err := p.View.Plan(p.Writable)
	if err != nil {
		t.Fatal(err)
	}
	mask, bind := -1, -1
	for i, m := range mounts {
		switch {
		case m.Path == b.hiddenDir && m.Kind == sandbox.MountMask:
			mask = i
		case m.Path == inside && m.Kind == sandbox.MountBind:
			bind = i
		}
	}
	if mask < 0 || bind < mask {
		t.Fatalf("mask at %d, bind at %d: %+v", mask, bind, mounts)
	}
}

func TestViewPlanRefuses(t *testing.T) {
	b := newViewBox(t)
	cases := []struct {
		name string
		edit func(v *sandbox.View)
		want string
	}{
		{"missing read path", func(v *sandbox.View) { v.Read = append(v.Read, filepath.Join(b.root, "nope")) }, "does not exist"},
		{"read path inside the source", func(v *sandbox.View) { v.Read = append(v.Read, filepath.Join(b.source, "main.go")) }, "must never see"},
		{"read path that links into the source", func(v *sandbox.View) {
			link := filepath.Join(b.root, "link")
			if err := os.Symlink(b.source, link); err != nil {
				t.Fatal(err)
			}
			v.Read = append(v.Read, link)
		}, "must never see"},
		{"relative path", func(v *sandbox.View) { v.Hide = append(v.Hide, "rel") }, "absolute"},
		{"working directory outside", func(v *sandbox.View) { v.Cwd = b.source }, "not inside the view"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := b.viewPolicy(t)
			c.edit(p.View)
			_, err := p.View.Plan(p.Writable)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// TestViewConfines is the hostile Case of the view: metadata changes on
// read-only mounts fail at the mount level, and hidden paths are absent.
func TestViewConfines(t *testing.T) {
	requireSandbox(t)
	b := newViewBox(t)
	p := b.viewPolicy(t)
	ro := []string{"EROFS", "EACCES"}
	cases := []struct {
		name   string
		args   []string
		ok     bool
		errnos []string
	}{
		{"chmod a system file", []string{"chmod", "/usr/bin/env"}, false, ro},
		{"touch a system file", []string{"utimes", "/etc/passwd"}, false, ro},
		{"setxattr a system file", []string{"setxattr", "/usr/bin/env"}, false, append(ro, "EPERM")},
		{"chown a system file", []string{"chown", "/usr/bin/env"}, false, append(ro, "EPERM")},
		{"rename a system file", []string{"rename", "/usr/bin/env", "/usr/bin/env2"}, false, ro},
		{"link a system file into the fixture", []string{"link", "/usr/bin/env", filepath.Join(b.fixture, "env")}, false, append(ro, "EXDEV")},
		{"truncate a system file", []string{"truncate", "/usr/bin/env"}, false, ro},
		{"chmod a bound tool", []string{"chmod", filepath.Join(b.sys, "tool.txt")}, false, ro},
		{"chmod the task file", []string{"chmod", b.task}, false, ro},
		{"write into the new root", []string{"write", "/planted"}, false, ro},
		{"chmod the source", []string{"chmod", filepath.Join(b.source, "main.go")}, false, []string{"ENOENT"}},
		{"read the source", []string{"read", filepath.Join(b.source, "main.go")}, false, []string{"ENOENT"}},
		{"read the report", []string{"read", b.report}, false, []string{"ENOENT"}},
		{"write beside the fixture", []string{"write", b.report}, false, ro},
		{"read a hidden home", []string{"read", b.secret}, false, []string{"ENOENT"}},
		{"read a masked directory", []string{"read", filepath.Join(b.hiddenDir, "secret")}, false, []string{"ENOENT"}},
		{"chmod a masked directory", []string{"chmod", b.hiddenDir}, false, ro},
		{"list /root", []string{"list", "/root"}, false, []string{"ENOENT"}},
		{"list /home", []string{"list", "/home"}, false, []string{"ENOENT"}},
		{"list /run", []string{"list", "/run"}, false, []string{"ENOENT"}},
		{"read the task file", []string{"read", b.task}, true, nil},
		{"write the fixture", []string{"write", filepath.Join(b.fixture, "new.txt")}, true, nil},
		{"chmod in the fixture", []string{"chmod", filepath.Join(b.fixture, "new.txt")}, true, nil},
		{"write the private /tmp", []string{"write", "/tmp/x"}, true, nil},
		{"write the private /dev/shm", []string{"write", "/dev/shm/x"}, true, nil},
		{"write /dev/null", []string{"append", "/dev/null"}, true, nil},
		{"write the scratch", []string{"write", filepath.Join(b.tmp, "x")}, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := launch(t, p, b.fixture, append([]string{self(t), helperCmd}, c.args...)...)
			if out.code != 0 {
				t.Fatalf("exit %d, stderr %q", out.code, out.stderr)
			}
			r := out.result(t)
			if r.OK != c.ok || (!c.ok && !slices.Contains(c.errnos, r.Errno)) {
				t.Errorf("%v: ok=%v errno=%s (%s); want ok=%v errno in %v", c.args, r.OK, r.Errno, r.Err, c.ok, c.errnos)
			}
		})
	}
	t.Run("masked file is empty", func(t *testing.T) {
		r := launch(t, p, b.fixture, self(t), helperCmd, "cat", b.hiddenFile).result(t)
		if !r.OK || r.Fields["content"] != "" {
			t.Errorf("masked file: ok=%v content %q err %s", r.OK, r.Fields["content"], r.Err)
		}
	})
	t.Run("masked directory is empty", func(t *testing.T) {
		r := launch(t, p, b.fixture, self(t), helperCmd, "list", b.hiddenDir).result(t)
		if !r.OK || len(r.List) != 0 {
			t.Errorf("masked directory: ok=%v entries %v err %s", r.OK, r.List, r.Err)
		}
	})
	t.Run("the root holds only the view", func(t *testing.T) {
		r := launch(t, p, b.fixture, self(t), helperCmd, "list", "/").result(t)
		allowed := []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt", "etc", "proc", "dev", "tmp"}
		for _, n := range r.List {
			if !slices.Contains(allowed, n) {
				t.Errorf("/%s is in the view's root (%v)", n, r.List)
			}
		}
	})
	for _, f := range []string{filepath.Join(b.source, "main.go"), b.report, b.secret} {
		if data, err := os.ReadFile(f); err != nil || string(data) == "" {
			t.Errorf("%s changed on the host: %q %v", f, data, err)
		}
	}
}

// TestViewRunsTools runs sh, git, go and node inside the default view.
func TestViewRunsTools(t *testing.T) {
	requireSandbox(t)
	b := newViewBox(t)
	p := b.viewPolicy(t)
	env := backend.Env(b.scratchRoot, "", "/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", b.source)
	// go test with an empty build cache compiles the standard library first,
	// which takes minutes on a small machine; the host's cache is lent to the
	// command writable, as the only exception to the fixture-and-scratch rule.
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		if cache := strings.TrimSpace(string(out)); filepath.IsAbs(cache) && os.MkdirAll(cache, 0o755) == nil {
			p.Writable = append(p.Writable, cache)
			env = append(env, "GOCACHE="+cache)
		}
	}
	cases := []struct{ name, tool, script string }{
		{"sh", "sh", `echo hi > made-by-sh.txt && cat made-by-sh.txt`},
		{"git", "git", `git init -q repo && cd repo && echo x > f && git add f && git -c user.name=a -c user.email=a@b commit -qm m && git log --oneline | wc -l`},
		{"go", "go", `mkdir -p mod && cd mod && printf 'module m\ngo 1.21\n' > go.mod && printf 'package m\nimport "testing"\nfunc TestX(t *testing.T) {}\n' > m_test.go && go test ./...`},
		{"node", "node", `node -e 'console.log(require("os").platform())'`},
		{"npm test", "npm", `mkdir -p pkg && cd pkg && printf '{"name":"p","version":"1.0.0","scripts":{"test":"node -e \"process.exit(0)\""}}' > package.json && npm test --offline`},
		{"python3", "python3", `printf 'def test_x():\n    assert 1\n' > t.py && /usr/bin/python3 -c 'import t; t.test_x(); print("ok")'`},
		{"pytest", "python3", `printf 'def test_x():\n    assert 1\n' > test_x.py && /usr/bin/python3 -m pytest -q test_x.py`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := exec.LookPath(c.tool); err != nil {
				t.Skipf("%s is not installed: %v", c.tool, err)
			}
			if c.name == "pytest" && exec.Command("/usr/bin/python3", "-m", "pytest", "--version").Run() != nil {
				t.Skip("the system python3 has no pytest module (a pytest in a home directory must be added as a read path)")
			}
			out := launchWith(t, p, b.fixture, opts{env: env}, "/bin/sh", "-c", c.script)
			if out.code != 0 {
				t.Fatalf("%s in the view: exit %d\nstdout %s\nstderr %s", c.name, out.code, out.stdout, out.stderr)
			}
		})
	}
}

func TestViewFailsClosed(t *testing.T) {
	requireSandbox(t)
	b := newViewBox(t)
	p := b.viewPolicy(t)
	p.View.Read = append(p.View.Read, filepath.Join(b.root, "gone"))
	out := launch(t, p, b.fixture, self(t), helperCmd, "read", b.task)
	if _, ok := sandbox.IsSetupFailure(out.code, out.stderr); !ok || !strings.Contains(out.stderr, "does not exist") {
		t.Errorf("exit %d, stderr %q; want a setup failure naming the missing path", out.code, out.stderr)
	}
	if _, err := sandbox.Try(context.Background(), self(t), p, b.fixture); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Try: %v", err)
	}
	good := b.viewPolicy(t)
	tr, err := sandbox.Try(context.Background(), self(t), good, b.fixture)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := good.View.Plan(good.Writable)
	if sandbox.Digest(tr.View) != sandbox.Digest(want) {
		t.Errorf("the launcher built another view than planned")
	}
	t.Logf("view: %d mounts, built in %v", len(tr.View), tr.BuildTime)

	// A launch that would build another view than the one tried fails.
	good.View.Expect = sandbox.Digest(tr.View)
	if out := launch(t, good, b.fixture, self(t), helperCmd, "read", b.task); out.code != 0 {
		t.Fatalf("the tried view: exit %d %s", out.code, out.stderr)
	}
	if err := os.WriteFile(filepath.Join(b.root, "sys", "new-tool"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(b.sys, "newdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	good.View.Hide = append(good.View.Hide, filepath.Join(b.sys, "newdir"))
	out = launch(t, good, b.fixture, self(t), helperCmd, "read", b.task)
	if _, ok := sandbox.IsSetupFailure(out.code, out.stderr); !ok || !strings.Contains(out.stderr, "not the one that was tried") {
		t.Errorf("a changed view: exit %d, stderr %q", out.code, out.stderr)
	}
}

// BenchmarkViewBuild measures a trial launch with the default view;
// view-ms/op is the time the launcher itself spent building the view.
func BenchmarkViewBuild(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	f := sandbox.ProbeWith(exe)
	if !f.Available() {
		b.Skipf("sandbox unavailable: %s", f.Reason)
	}
	dir := b.TempDir()
	fixture := filepath.Join(dir, "fixture")
	if err := os.MkdirAll(fixture, 0o755); err != nil {
		b.Fatal(err)
	}
	p := sandbox.Policy{Writable: []string{fixture}, DenyNetwork: true, View: &sandbox.View{System: sandbox.DefaultSystem(),
		Read: []string{exe}, Hide: sandbox.DefaultHide(), Cwd: fixture}}
	var total int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr, err := sandbox.Try(context.Background(), exe, p, fixture)
		if err != nil {
			b.Fatal(err)
		}
		total += tr.BuildTime.Nanoseconds()
	}
	b.ReportMetric(float64(total)/float64(b.N)/1e6, "view-ms/op")
}

// When the runs directory and the source lie inside a bound directory, they
// are masked, and this run's fixture, scratch and task file still appear
// inside the mask.
func TestViewMasksInsideBoundDirectory(t *testing.T) {
	requireSandbox(t)
	b := newViewBox(t)
	p := b.viewPolicy(t)
	p.View.System = append(sandbox.DefaultSystem(), b.root) // the whole box, read-only
	runs := filepath.Join(b.root, "runs")
	other := filepath.Join(runs, "r0", "fixture")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	mounts, err := p.View.Plan(p.Writable)
	if err != nil {
		t.Fatal(err)
	}
	masks := 0
	for _, m := range mounts {
		if m.Kind == sandbox.MountMask && (m.Path == runs || m.Path == b.source) {
			masks++
		}
	}
	if masks != 2 {
		t.Fatalf("want masks over %s and %s: %+v", runs, b.source, mounts)
	}
	cases := []struct {
		args []string
		ok   bool
	}{
		{[]string{"write", filepath.Join(b.fixture, "x")}, true},
		{[]string{"read", b.task}, true},
		{[]string{"read", filepath.Join(b.source, "main.go")}, false},
		{[]string{"read", b.report}, false},
		{[]string{"stat", other}, false},
		{[]string{"write", filepath.Join(runs, "planted")}, false},
		{[]string{"read", filepath.Join(b.sys, "tool.txt")}, true},
		{[]string{"chmod", filepath.Join(b.sys, "tool.txt")}, false},
	}
	for _, c := range cases {
		r := launch(t, p, b.fixture, append([]string{self(t), helperCmd}, c.args...)...).result(t)
		if r.OK != c.ok {
			t.Errorf("%v: ok=%v (%s %s), want ok=%v", c.args, r.OK, r.Errno, r.Err, c.ok)
		}
	}
	r := launch(t, p, b.fixture, self(t), helperCmd, "list", runs).result(t)
	slices.Sort(r.List)
	if !slices.Equal(r.List, []string{"r1", "work"}) {
		t.Errorf("the masked runs directory shows %v, want only this run's [r1 work]", r.List)
	}
}

// TestViewRunsNodeAgent starts an installed Node-based coding agent inside
// the default view, with its install directory as the one read path: the
// documented way to give Case an agent.
func TestViewRunsNodeAgent(t *testing.T) {
	requireSandbox(t)
	home, _ := os.UserHomeDir()
	dirs, _ := filepath.Glob(filepath.Join(home, ".cache", "cto-harness", "agents", "gemini-cli", "*"))
	if len(dirs) == 0 {
		t.Skip("no gemini-cli installed under ~/.cache/cto-harness/agents (see docs/agents.md)")
	}
	dir := dirs[0]
	b := newViewBox(t)
	p := b.viewPolicy(t)
	p.View.Read = append(p.View.Read, dir)
	p.View.Hide = append(p.View.Hide, home)
	p.Rlimits.AddressSpaceBytes = sandbox.Unlimited // WebAssembly reserves tens of GiB of address space
	env := backend.Env(b.scratchRoot, "", "/usr/local/bin:/usr/bin:/bin", b.source)
	out := launchWith(t, p, b.fixture, opts{env: env}, "/usr/bin/env", "node", filepath.Join(dir, "node_modules", ".bin", "gemini"), "--version")
	if out.code != 0 || strings.TrimSpace(out.stdout) == "" {
		t.Fatalf("the agent in the view: exit %d\nstdout %s\nstderr %s", out.code, out.stdout, out.stderr)
	}
	t.Logf("gemini-cli %s in the view", strings.TrimSpace(out.stdout))
}

// An overlay shows a host cache the command may use as if it were its own:
// it reads what is there, and whatever it writes, changes or deletes lands
// in the per-run layer. The host directory is never changed.
func TestViewOverlay(t *testing.T) {
	requireSandbox(t)
	b := newViewBox(t)
	lower := filepath.Join(b.home, "cache") // inside a hidden home: shown only through the overlay
	upper, work := filepath.Join(b.scratchRoot, "overlay", "upper"), filepath.Join(b.scratchRoot, "overlay", "work")
	for _, d := range []string{lower, upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{"entry-a": "trusted\n", "entry-b": "keep\n"} {
		if err := os.WriteFile(filepath.Join(lower, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := filepath.Join(b.scratchRoot, "cache", "go-build")
	p := b.viewPolicy(t)
	p.View.Overlays = []sandbox.Overlay{{Path: at, Lower: lower, Upper: upper, Work: work}}
	script := `set -e; cd ` + at + `; test "$(cat entry-a)" = trusted; echo poisoned > entry-a; rm entry-b; echo new > entry-c; test "$(cat entry-a)" = poisoned`
	o := launch(t, p, b.fixture, "/bin/sh", "-c", script)
	if o.code != 0 {
		t.Fatalf("the command in the overlay: exit %d, stderr %q", o.code, o.stderr)
	}
	for name, want := range map[string]string{"entry-a": "trusted\n", "entry-b": "keep\n"} {
		if got, err := os.ReadFile(filepath.Join(lower, name)); err != nil || string(got) != want {
			t.Errorf("host %s: %q, %v; want it unchanged", name, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(lower, "entry-c")); err == nil {
		t.Error("a file the command created reached the host directory")
	}
	if got, _ := os.ReadFile(filepath.Join(upper, "entry-c")); string(got) != "new\n" {
		t.Errorf("the per-run layer holds %q for entry-c", got)
	}
	// The overlay may stand at the lower directory's own (hidden) path, and
	// is writable there too; it may show no protected path.
	p.View.Overlays = []sandbox.Overlay{{Path: lower, Lower: lower, Upper: upper, Work: work}}
	o = launch(t, p, b.fixture, "/bin/sh", "-c", "cd "+lower+" && test \"$(cat entry-a)\" = poisoned && echo again > entry-d")
	if o.code != 0 {
		t.Fatalf("the overlay at the host path: exit %d, stderr %q", o.code, o.stderr)
	}
	if _, err := os.Stat(filepath.Join(lower, "entry-d")); err == nil {
		t.Error("a write at the overlay's host path reached the host directory")
	}
	p.View.Overlays = []sandbox.Overlay{{Path: at, Lower: b.source, Upper: upper, Work: work}}
	if _, err := p.View.Plan(p.Writable); err == nil {
		t.Error("an overlay of the protected source was planned")
	}
}

// A Node test runner under the limits a run gets when its task sets none:
// V8 reserves about 10 GiB of address space per WebAssembly memory, and
// vitest's workers each instantiate a few (jshttp/content-type's own
// `npm test` failed "Out of memory: Cannot allocate Wasm memory" under a
// 32 GiB limit while it passes on the host).
func TestViewNodeWasmUnderDefaultLimits(t *testing.T) {
	requireSandbox(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	b := newViewBox(t)
	p := b.viewPolicy(t)
	d := task.DefaultLimits()
	p.Rlimits = sandbox.Rlimits{CPUSeconds: d.CPUSeconds, FileSizeBytes: d.FileSizeBytes, OpenFiles: d.OpenFiles, Processes: d.Processes, AddressSpaceBytes: d.AddressSpaceBytes}
	if sandbox.DefaultRlimits().AddressSpaceBytes != d.AddressSpaceBytes {
		t.Errorf("the sandbox's default address-space limit %d differs from a task's %d", sandbox.DefaultRlimits().AddressSpaceBytes, d.AddressSpaceBytes)
	}
	env := backend.Env(b.scratchRoot, "", filepath.Dir(node)+":/usr/bin:/bin", b.source)
	script := `const a = []; for (let i = 0; i < 6; i++) a.push(new WebAssembly.Memory({initial: 1})); console.log("wasm memories:", a.length)`
	out := launchWith(t, p, b.fixture, opts{env: env}, node, "-e", script)
	if out.code != 0 || !strings.Contains(out.stdout, "wasm memories: 6") {
		t.Fatalf("six WebAssembly memories under the default limits: exit %d\nstdout %s\nstderr %s", out.code, out.stdout, out.stderr)
	}
}

// Trials launches a trial for a shape it has not seen, plans the same shape
// here afterwards (no launcher: no build time), and launches again for
// another shape or for a view whose plan here fails, so the launcher's own
// error is the one returned.
func TestTrialsSkipOnlyAShapeAlreadyTried(t *testing.T) {
	requireSandbox(t)
	b := newViewBox(t)
	p := b.viewPolicy(t)
	ctx := context.Background()
	trials := sandbox.NewTrials()
	first, err := trials.Try(ctx, self(t), p, b.fixture, "shape-a")
	if err != nil {
		t.Fatal(err)
	}
	if first.BuildTime == 0 {
		t.Fatalf("the first view of a shape was not tried in a launcher")
	}
	again, err := trials.Try(ctx, self(t), p, b.fixture, "shape-a")
	if err != nil {
		t.Fatal(err)
	}
	if again.BuildTime != 0 {
		t.Errorf("a shape already tried was tried again")
	}
	if sandbox.Digest(again.View) != sandbox.Digest(first.View) {
		t.Errorf("the plan made here differs from the view the launcher built")
	}
	other, err := trials.Try(ctx, self(t), p, b.fixture, "shape-b")
	if err != nil || other.BuildTime == 0 {
		t.Errorf("another shape was not tried: %v", err)
	}
	if tr, err := trials.Try(ctx, self(t), p, b.fixture, ""); err != nil || tr.BuildTime == 0 {
		t.Errorf("a view without a shape was not tried: %v", err)
	}
	// The host changes: the plan here fails, and the trial's error is the
	// launcher's, as without the memo.
	gone := b.viewPolicy(t)
	gone.View.Read = append(gone.View.Read, filepath.Join(b.root, "gone"))
	if _, err := trials.Try(ctx, self(t), gone, b.fixture, "shape-gone"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a view that cannot be built: %v", err)
	}
	if err := os.WriteFile(filepath.Join(b.root, "gone"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if tr, err := trials.Try(ctx, self(t), gone, b.fixture, "shape-gone"); err != nil || tr.BuildTime == 0 {
		t.Fatalf("the view once its path exists: %v (tried: %v)", err, tr.BuildTime != 0)
	}
	if err := os.Remove(filepath.Join(b.root, "gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := trials.Try(ctx, self(t), gone, b.fixture, "shape-gone"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a remembered shape whose plan now fails: %v", err)
	}
}

// A writable directory can be shown at a fixed path (the command starts
// there and may write it, and its writes land in the host directory), and
// an overlay can stack a read-only layer from inside a protected directory
// over its lower one: the command reads both, and neither changes.
func TestViewMovedAndLayered(t *testing.T) {
	requireSandbox(t)
	b := newViewBox(t)
	kept := filepath.Join(b.root, "runs", ".cache", "kept") // inside the protected runs directory
	lower := filepath.Join(b.home, "cache")
	upper, work := filepath.Join(b.scratchRoot, "overlay", "upper"), filepath.Join(b.scratchRoot, "overlay", "work")
	for _, d := range []string{kept, lower, upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f, data := range map[string]string{filepath.Join(lower, "a"): "host\n", filepath.Join(lower, "b"): "host\n", filepath.Join(kept, "b"): "kept\n"} {
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := filepath.Join(b.scratchRoot, "cache", "go-build")
	stable := "/cto-harness/checkout"
	p := b.viewPolicy(t)
	p.View.Moved = []sandbox.Bind{{Path: stable, Source: b.fixture}}
	p.View.Cwd = stable
	p.View.Overlays = []sandbox.Overlay{{Path: at, Lower: lower, Upper: upper, Work: work, Layers: []string{kept}}}
	script := `set -e; test "$(pwd)" = ` + stable + `; echo made > here; test ! -e ` + b.fixture + `/here;
cd ` + at + `; test "$(cat a)" = host; test "$(cat b)" = kept; echo poisoned > b; echo new > c; test ! -e ` + kept
	o := launch(t, p, b.fixture, "/bin/sh", "-c", script)
	if o.code != 0 {
		t.Fatalf("the command in the moved directory: exit %d, stderr %q", o.code, o.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(b.fixture, "here")); string(got) != "made\n" {
		t.Errorf("a write in the moved directory: the host directory holds %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(kept, "b")); string(got) != "kept\n" {
		t.Errorf("the kept layer's entry is now %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(upper, "b")); string(got) != "poisoned\n" {
		t.Errorf("the write over a kept entry went to %q in the per-run layer", got)
	}
	if _, err := os.Stat(filepath.Join(kept, "c")); err == nil {
		t.Error("a new entry reached the kept layer")
	}
	p.View.Moved = []sandbox.Bind{{Path: stable, Source: b.source}}
	if _, err := p.View.Plan(p.Writable); err == nil {
		t.Error("a directory that is not writable was moved into the view")
	}
}

// A task's layout links the paths its tests name to the command's own
// directories: writes through a link land in the writable directory, the
// link itself cannot be replaced, and a link over a mount is refused.
func TestViewLinks(t *testing.T) {
	requireSandbox(t)
	b := newViewBox(t)
	logs := filepath.Join(b.fixture, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	p := b.viewPolicy(t)
	p.View.Links = []sandbox.Bind{{Path: "/app", Source: "."}, {Path: "/logs/verifier", Source: "logs"}}
	script := `set -e; cd /app; echo made > here; echo 1 > /logs/verifier/reward.txt;
test "$(readlink /app)" = ` + b.fixture + `; ! ln -sfn / /app 2>/dev/null; ! rm /app 2>/dev/null; ! touch /logs/x 2>/dev/null`
	o := launch(t, p, b.fixture, "/bin/sh", "-c", script)
	if o.code != 0 {
		t.Fatalf("the command through the links: exit %d, stderr %q", o.code, o.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(b.fixture, "here")); string(got) != "made\n" {
		t.Errorf("a write through /app: the fixture holds %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(logs, "reward.txt")); string(got) != "1\n" {
		t.Errorf("a write through /logs/verifier: the directory holds %q", got)
	}
	mounts, err := p.View.Plan(p.Writable)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range mounts {
		found = found || (m.Path == "/app" && m.Kind == sandbox.MountSymlink && m.Source == b.fixture)
	}
	if !found {
		t.Errorf("the plan does not record the link /app -> %s: %+v", b.fixture, mounts)
	}
	for _, bad := range []sandbox.Bind{{Path: "/tmp/x", Source: b.fixture}, {Path: "/usr", Source: b.fixture}, {Path: "/", Source: b.fixture}, {Path: "app", Source: b.fixture}, {Path: b.fixture + "/sub", Source: "/tmp"}, {Path: "/up", Source: "../x"}} {
		p.View.Links = []sandbox.Bind{bad}
		if _, err := p.View.Plan(p.Writable); err == nil {
			t.Errorf("the link %s -> %s was planned", bad.Path, bad.Source)
		}
	}
}
