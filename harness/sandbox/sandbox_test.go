package sandbox_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/sandbox"
)

func TestProbe(t *testing.T) {
	f := sandbox.ProbeWith(self(t))
	t.Logf("facts: %+v", f)
	if f.LandlockABI != sandbox.LandlockABI() {
		t.Errorf("LandlockABI %d, direct query %d", f.LandlockABI, sandbox.LandlockABI())
	}
	if !f.Available() {
		if f.Reason == "" {
			t.Error("an unavailable sandbox must say why")
		}
		t.Skipf("sandbox unavailable: %s", f.Reason)
	}
	m := sandbox.Policy{DenyNetwork: true}.Mechanisms(f)
	for _, want := range []string{"landlock_fs", "netns", "pidns", "no_new_privs", "seccomp", "rlimits", "process_group"} {
		if !slices.Contains(m, want) {
			t.Errorf("mechanisms %v lack %s", m, want)
		}
	}
	if got := (sandbox.Policy{}).Mechanisms(sandbox.Facts{}); got != nil {
		t.Errorf("mechanisms without a sandbox: %v", got)
	}
}

func TestCommandShape(t *testing.T) {
	p := sandbox.Policy{Writable: []string{"/w"}, DenyNetwork: true}
	argv, attr, pf, err := sandbox.Command("/usr/bin/harness", p, []string{"sh", "-c", "true"})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if argv[0] != "/usr/bin/harness" || argv[1] != sandbox.Subcommand || argv[2] != fmt.Sprintf("--policy-fd=%d", p.PolicyFD()) ||
		argv[3] != "--" || strings.Join(argv[4:], " ") != "sh -c true" {
		t.Errorf("launcher argv %q", argv)
	}
	// The policy travels in the memfd, never in argv: the sandboxed command
	// can read the launcher's /proc/1/cmdline.
	if strings.Contains(strings.Join(argv, " "), "/w") {
		t.Errorf("launcher argv %q names a policy path", argv)
	}
	if data, err := io.ReadAll(pf); err != nil || !strings.Contains(string(data), `"/w"`) {
		t.Errorf("policy file holds %q (%v), want the policy", data, err)
	}
	want := uintptr(syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC)
	if attr.Cloneflags&want != want || !attr.Setpgid || attr.Pdeathsig != syscall.SIGKILL {
		t.Errorf("attr %+v", attr)
	}
	for _, bad := range []sandbox.Policy{{Writable: []string{"rel"}}, {Writable: []string{"/a/../b"}}, {ReadOnly: []string{"x"}}} {
		if _, _, _, err := sandbox.Command("/usr/bin/harness", bad, []string{"true"}); err == nil {
			t.Errorf("policy %+v accepted", bad)
		}
	}
	if _, _, _, err := sandbox.Command("harness", sandbox.Policy{}, []string{"true"}); err == nil {
		t.Error("relative launcher accepted")
	}
	if _, _, _, err := sandbox.Command("/h", sandbox.Policy{}, nil); err == nil {
		t.Error("empty command accepted")
	}
}

func TestWritesStayInsideWritableDirs(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	link := filepath.Join(b.fixture, "escape")
	if err := os.Symlink(b.source, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, action, path string
		allowed            bool
	}{
		{"fixture", "write", filepath.Join(b.fixture, "new.txt"), true},
		{"scratch", "write", filepath.Join(b.tmp, "cache.bin"), true},
		{"dev-null", "append", "/dev/null", true},
		{"source", "write", filepath.Join(b.source, "planted.go"), false},
		{"source-existing", "append", filepath.Join(b.source, "main.go"), false},
		{"source-truncate", "truncate", filepath.Join(b.source, "main.go"), false},
		{"report-next-to-fixture", "append", b.report, false},
		{"report-truncate", "truncate", b.report, false},
		{"task", "write", b.task, false},
		{"dotdot", "write", filepath.Join(b.fixture, "..", "..", "escape.txt"), false},
		{"symlink-out", "write", filepath.Join(link, "through-link.txt"), false},
		{"tmp", "write", filepath.Join(os.TempDir(), fmt.Sprintf("cto-sandbox-%d", os.Getpid())), false},
		{"etc", "write", "/etc/cto-harness-sandbox-test", false},
		{"device-node", "mknod", filepath.Join(b.fixture, "null2"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := launch(t, b.policy(), b.fixture, self(t), helperCmd, c.action, c.path)
			r := o.result(t)
			if o.code != 0 {
				t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
			}
			if r.OK != c.allowed {
				t.Fatalf("%s %s: ok=%v err=%q, want ok=%v", c.action, c.path, r.OK, r.Err, c.allowed)
			}
			if !c.allowed && r.Errno != "EACCES" && r.Errno != "EPERM" {
				t.Errorf("denied with %s (%s), want EACCES or EPERM", r.Errno, r.Err)
			}
		})
	}
	for _, f := range []string{b.report, b.task, filepath.Join(b.source, "main.go")} {
		if data, _ := os.ReadFile(f); string(data) != "original\n" {
			t.Errorf("%s changed: %q", f, data)
		}
	}
	for _, f := range []string{filepath.Join(b.source, "planted.go"), filepath.Join(b.root, "runs", "escape.txt")} {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s was created", f)
		}
	}
}

func TestReadOnlyRootsLimitReads(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ro []string
	for _, d := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", "/dev", filepath.Dir(self(t))} {
		if _, err := os.Stat(d); err == nil {
			ro = append(ro, d)
		}
	}
	p := b.policy()
	p.ReadOnly = ro
	if r := launch(t, p, b.fixture, self(t), helperCmd, "read", secret).result(t); r.OK || r.Errno != "EACCES" {
		t.Errorf("reading outside the read-only roots: %+v", r)
	}
	if r := launch(t, p, b.fixture, self(t), helperCmd, "read", "/etc/passwd").result(t); !r.OK {
		t.Errorf("reading inside the read-only roots: %+v", r)
	}
}

func TestNetworkIsDenied(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "connect", ln.Addr().String()).result(t)
	if r.OK {
		t.Fatalf("TCP connect to the host's listener succeeded")
	}
	t.Logf("connect: %s (%s)", r.Errno, r.Err)
	select {
	case <-accepted:
		t.Fatal("the host listener accepted a connection from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
	// Pathname UNIX sockets are not namespaced: the seccomp filter refuses them.
	sock := filepath.Join(b.root, "host.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	if r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "unix", sock).result(t); r.OK || r.Errno != "EACCES" {
		t.Errorf("UNIX socket connect: %+v, want EACCES", r)
	}
	if r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "iouring").result(t); r.OK || r.Errno != "EPERM" {
		t.Errorf("io_uring_setup: %+v, want EPERM", r)
	}
	// The user keyring is the uid's, shared with the host; vsock is not
	// namespaced. Both are refused by the filter.
	if r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "keyctl").result(t); r.OK || r.Errno != "ENOSYS" {
		t.Errorf("keyctl(@u): %+v, want ENOSYS", r)
	}
	if r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "vsock").result(t); r.OK || r.Errno != "EACCES" {
		t.Errorf("socket(AF_VSOCK): %+v, want EACCES", r)
	}
	// Nothing in the sandbox may change another process's memory: a test
	// Case wrote, run by the verification command, would otherwise rewrite
	// the shell that runs the rest of that command.
	pr := launch(t, b.policy(), b.fixture, self(t), helperCmd, "ptrace-child").result(t)
	if !pr.OK {
		t.Fatalf("ptrace-child: %+v", pr)
	}
	for k, want := range map[string]string{"attach": "EPERM", "mem": "EACCES", "vm_writev": "EPERM"} {
		if got := pr.Fields[k]; got != want {
			t.Errorf("%s on a child of its own: %q, want %s", k, got, want)
		}
	}
}

func TestPrivilegesAndLimits(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	p := b.policy()
	p.Rlimits = sandbox.Rlimits{OpenFiles: 512, Processes: 300, CPUSeconds: 120, FileSizeBytes: 1 << 20, AddressSpaceBytes: 8 << 30}
	r := launch(t, p, b.fixture, self(t), helperCmd, "status").result(t)
	want := map[string]string{
		"NoNewPrivs": "1", "Seccomp": "2", "CapEff": "0000000000000000", "CapPrm": "0000000000000000",
		"CapBnd": "0000000000000000", "CapInh": "0000000000000000", "CapAmb": "0000000000000000",
		"rlimit_nofile": "512/512", "rlimit_nproc": "300/300", "rlimit_cpu": "120/120",
		"rlimit_fsize": fmt.Sprintf("%d/%d", 1<<20, 1<<20), "rlimit_as": fmt.Sprintf("%d/%d", 8<<30, 8<<30),
		"raise_nofile": "EPERM",
	}
	for k, v := range want {
		if r.Fields[k] != v {
			t.Errorf("%s = %q, want %q", k, r.Fields[k], v)
		}
	}
	if facts.PidLimit && r.Fields["pid_max"] != strconv.Itoa(300+301) {
		t.Errorf("pid_max = %q", r.Fields["pid_max"])
	}
	if n, _ := strconv.Atoi(r.Fields["pid"]); n <= 1 || n > 64 {
		t.Errorf("the command is pid %s; want a small pid of the new namespace, after the launcher (1)", r.Fields["pid"])
	}
	if v := r.Fields["Landlock_restricted"]; v != "" && v != "1" {
		t.Errorf("Landlock_restricted %q", v)
	}
}

func TestProcShowsOnlyTheNamespace(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "procs").result(t)
	if len(r.List) != 2 || r.List[0] != "1" || r.List[1] != strconv.Itoa(r.Count) {
		t.Errorf("/proc lists %v, want only the launcher (1) and the command (%d)", r.List, r.Count)
	}
}

// The launcher's argv and environment are readable from inside (/proc/1),
// so neither may carry the policy: it names the writable directories, the
// view's hidden paths, the source and the runs directory.
func TestLauncherArgsNameNothing(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "procargs").result(t)
	if r.Fields["cmdline"] == "" {
		t.Fatalf("the command could not read /proc/1/cmdline (%+v); the test proves nothing", r.Fields)
	}
	for _, f := range []string{"cmdline", "environ"} {
		for _, arg := range strings.Split(r.Fields[f], "\x00") {
			seen := []string{arg}
			for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
				if dec, err := enc.DecodeString(arg); err == nil {
					seen = append(seen, string(dec))
				}
			}
			for _, s := range seen {
				if strings.Contains(s, b.root) {
					t.Errorf("/proc/1/%s names the box %s: %q", f, b.root, s)
				}
			}
		}
	}
}

// socketVerdicts are what the helper's "sockets" gets in the sandbox, with
// the socket watch or without: the allowlist's families and pair types
// work, every other one fails with EACCES.
var socketVerdicts = map[string]string{
	"inet_stream": "ok", "inet_dgram": "ok", "inet6_stream": "ok", "inet6_dgram": "ok", "netlink_route": "ok",
	"inet_raw": "EACCES", "netlink_audit": "EACCES", "netlink_uevent": "EACCES", "unix_stream": "EACCES",
	"unix_dgram": "EACCES", "packet": "EACCES", "alg": "EACCES", "vsock_listen": "EACCES", "vsock_connect": "EACCES",
	"pair_stream": "ok", "pair_seqpacket": "ok", "pair_dgram": "EACCES",
}

// The seccomp filter allows socket families from a list: inet stream and
// datagram, netlink route, and UNIX only as a stream or seqpacket
// socketpair, which can never be aimed at a socket by path. Whatever else
// is refused, and a host socket in a readable path gets nothing.
func TestSocketFamiliesOnAnAllowlist(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	dgramPath := filepath.Join(b.root, "host-dgram.sock")
	dg, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: dgramPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer dg.Close()
	streamPath := filepath.Join(b.root, "host-stream.sock")
	st, err := net.Listen("unix", streamPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	packetPath := filepath.Join(b.root, "host-packet.sock")
	pk, err := net.Listen("unixpacket", packetPath)
	if err != nil {
		t.Fatal(err)
	}
	defer pk.Close()
	accepted := make(chan string, 2)
	for _, ln := range []net.Listener{st, pk} {
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
				accepted <- ln.Addr().String()
			}
		}()
	}
	r := launch(t, b.policy(), b.fixture, self(t), helperCmd, "sockets", dgramPath, streamPath, packetPath).result(t)
	for k, v := range socketVerdicts {
		if r.Fields[k] != v {
			t.Errorf("%s: %q, want %q", k, r.Fields[k], v)
		}
	}
	for k, v := range r.Fields {
		// A seqpacket end ignores sendto's address and sends to its
		// peer; the host socket's silence below is what counts.
		if strings.HasPrefix(k, "pair_") && strings.Count(k, "_") > 1 && v == "ok" && k != "pair_seqpacket_sendto" {
			t.Errorf("%s succeeded: a socketpair end reached a socket by path", k)
		}
	}
	t.Logf("sockets: %v", r.Fields)
	_ = dg.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := dg.ReadFrom(make([]byte, 16)); err == nil {
		t.Errorf("the host's datagram socket received %d bytes from the sandbox", n)
	}
	_ = dg.SetReadDeadline(time.Now().Add(2 * time.Second))
	select {
	case a := <-accepted:
		t.Errorf("the host's socket %s accepted a connection from the sandbox", a)
	default:
	}
	// Unconfined, the same datagram pair reaches the host socket: the
	// check above can see a leak.
	bare := launchWith(t, b.policy(), b.fixture, opts{bare: true}, self(t), helperCmd, "sockets", dgramPath, streamPath, packetPath).result(t)
	if bare.Fields["pair_dgram_sendto"] != "ok" {
		t.Errorf("unconfined, a datagram pair could not reach the host socket (%v): the check proves nothing here", bare.Fields)
	}
	if n, _, err := dg.ReadFrom(make([]byte, 16)); err != nil || n == 0 {
		t.Errorf("unconfined, the host's datagram socket received nothing (%v): the check proves nothing here", err)
	}
}

func TestDetachedDaemonDiesWithTheCommand(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	out := filepath.Join(b.tmp, "daemon.out")
	script := `(setsid sh -c 'while :; do echo tick >> "$1"; sleep 0.05; done' sh "$1" </dev/null >/dev/null 2>&1 &); sleep 0.5; exit 7`
	o := launch(t, b.policy(), b.fixture, "/bin/sh", "-c", script, "sh", out)
	if o.code != 7 {
		t.Fatalf("exit %d, want the command's 7; stderr %q", o.code, o.stderr)
	}
	st1, err := os.Stat(out)
	if err != nil {
		t.Fatalf("the daemon never wrote: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	st2, _ := os.Stat(out)
	if st2.Size() != st1.Size() {
		t.Errorf("%s still grows after the launcher exited (%d -> %d bytes)", out, st1.Size(), st2.Size())
	}
	if alive := aliveInNamespace(o.nsInode); len(alive) > 0 {
		t.Errorf("processes of the sandbox still alive: %v", alive)
	}
}

func TestForkBombIsContained(t *testing.T) {
	f := requireSandbox(t)
	b := newBox(t)
	p := b.policy()
	p.Rlimits.Processes = 200
	o := launch(t, p, b.fixture, self(t), helperCmd, "forkbomb")
	r := o.result(t)
	t.Logf("forks before refusal: %d (%s), launcher done in %s", r.Count, r.Errno, o.duration.Round(time.Millisecond))
	if r.OK || r.Errno != "EAGAIN" {
		t.Errorf("fork bomb: %+v, want EAGAIN", r)
	}
	if f.PidLimit && r.Count > 200+301 {
		t.Errorf("%d processes started, limit was 200 (+301 pid reserve)", r.Count)
	}
	if o.code != 0 {
		t.Errorf("launcher exit %d, stderr %q", o.code, o.stderr)
	}
	if alive := aliveInNamespace(o.nsInode); len(alive) > 0 {
		t.Errorf("processes of the sandbox still alive: %v", alive)
	}

	// The classic shell bomb: the command returns, the launcher kills the rest.
	o = launch(t, p, b.fixture, "/bin/sh", "-c", `b() { b | b & }; b; sleep 1; exit 0`)
	t.Logf("shell bomb: exit %d after %s", o.code, o.duration.Round(time.Millisecond))
	if o.duration > 30*time.Second {
		t.Errorf("the launcher needed %s to end the shell bomb", o.duration)
	}
	if alive := aliveInNamespace(o.nsInode); len(alive) > 0 {
		t.Errorf("processes of the sandbox still alive: %v", alive)
	}
}

func TestSIGTERMToTheGroupEndsTheTree(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	o := launchWith(t, b.policy(), b.fixture, opts{started: func(cmd *exec.Cmd) {
		time.Sleep(300 * time.Millisecond)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}}, "/bin/sh", "-c", `sleep 100 & setsid sleep 100 & wait`)
	if o.code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d (the command died of SIGTERM); stderr %q", o.code, 128+int(syscall.SIGTERM), o.stderr)
	}
	if o.duration > 5*time.Second {
		t.Errorf("took %s to stop after SIGTERM", o.duration)
	}
	if alive := aliveInNamespace(o.nsInode); len(alive) > 0 {
		t.Errorf("processes of the sandbox still alive: %v", alive)
	}

	// A command that ignores SIGTERM is ended by the harness's SIGKILL of the
	// group: the launcher (PID 1) dies and the kernel kills the namespace.
	// The SIGTERM waits for the shell's word that its trap is set: on a
	// loaded machine the sandbox's set-up can outlast any fixed sleep, and a
	// SIGTERM that arrives before the trap ends the shell by SIGTERM.
	ready := filepath.Join(b.fixture, "trap-set")
	o = launchWith(t, b.policy(), b.fixture, opts{started: func(cmd *exec.Cmd) {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Lstat(ready); err == nil {
				break
			}
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		time.Sleep(300 * time.Millisecond)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}}, "/bin/sh", "-c", `trap '' TERM; sleep 100 & : > trap-set; sleep 100`)
	if o.code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d, want SIGKILL", o.code)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(aliveInNamespace(o.nsInode)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive := aliveInNamespace(o.nsInode); len(alive) > 0 {
		t.Errorf("processes of the sandbox still alive after SIGKILL: %v", alive)
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	if o := launch(t, b.policy(), b.fixture, "/bin/sh", "-c", "echo out; echo err >&2; exit 3"); o.code != 3 || o.stdout != "out\n" || o.stderr != "err\n" {
		t.Errorf("exit %d stdout %q stderr %q", o.code, o.stdout, o.stderr)
	}
	if o := launch(t, b.policy(), b.fixture, "/bin/sh", "-c", "kill -KILL $$"); o.code != 128+9 {
		t.Errorf("killed command: exit %d", o.code)
	}
	o := launch(t, b.policy(), b.fixture, "/nonexistent/cmd")
	if msg, ok := sandbox.IsStartFailure(o.code, o.stderr); !ok {
		t.Errorf("missing command: exit %d stderr %q", o.code, o.stderr)
	} else {
		t.Log(msg)
	}
}

func TestSetupFailureFailsClosed(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	marker := filepath.Join(b.fixture, "ran")
	p := b.policy()
	p.Writable = append(p.Writable, filepath.Join(b.root, "does-not-exist"))
	o := launch(t, p, b.fixture, "/bin/sh", "-c", "touch "+marker)
	checkSetupFailure(t, o.code, o.stderr, "does not exist")
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although the sandbox could not be established")
	}

	// An address-space limit the launcher itself cannot live with.
	p = b.policy()
	p.Rlimits.AddressSpaceBytes = 1 << 20
	o = launch(t, p, b.fixture, "/bin/sh", "-c", "touch "+marker)
	checkSetupFailure(t, o.code, o.stderr, "address-space limit")

	// Started without the namespaces: refuse before touching any mount.
	largv, _, pf, err := sandbox.Command(self(t), b.policy(), []string{"/bin/sh", "-c", "touch " + marker})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	for _, attr := range []*syscall.SysProcAttr{
		nil,
		{Cloneflags: syscall.CLONE_NEWPID}, // PID 1, but the harness's mount namespace
	} {
		cmd := exec.CommandContext(context.Background(), largv[0], largv[1:]...)
		cmd.SysProcAttr = attr
		cmd.ExtraFiles = []*os.File{pf}
		cmd.Dir = b.fixture
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Logf("attr %+v: the launcher could not even start: %v", attr, err) // e.g. CLONE_NEWPID without root
			continue
		}
		checkSetupFailure(t, code, stderr.String(), "")
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the command ran unconfined")
		}
	}
}

func checkSetupFailure(t *testing.T, code int, stderr, want string) {
	t.Helper()
	msg, ok := sandbox.IsSetupFailure(code, stderr)
	if !ok {
		t.Fatalf("exit %d, stderr %q: not a setup failure", code, stderr)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, sandbox.StderrPrefix) {
		t.Errorf("stderr must be exactly one marker line: %q", stderr)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("message %q lacks %q", msg, want)
	}
	t.Log(msg)
}

func TestNetworkWhenNotDenied(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	p := b.policy()
	p.DenyNetwork = false
	if r := launch(t, p, b.fixture, self(t), helperCmd, "connect", ln.Addr().String()).result(t); !r.OK {
		t.Errorf("connect with DenyNetwork=false: %+v", r)
	}
	// The filesystem rules still hold.
	if r := launch(t, p, b.fixture, self(t), helperCmd, "write", filepath.Join(b.source, "x")).result(t); r.OK {
		t.Error("write outside the writable dirs succeeded")
	}
}
