package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"golang.org/x/sys/unix"
)

// helperCmd makes this test binary a small target program with precise
// error reporting: `sandbox.test __sandbox-helper ACTION ARG...`.
const helperCmd = "__sandbox-helper"

// adversarialCmd runs the adversarial fake Case scenarios.
const adversarialCmd = "__case-fake-adversarial"

// TestMain lets this test binary be the launcher, the helper target and the
// adversarial fake Case.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sandbox.Subcommand:
			os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
		case helperCmd:
			os.Exit(helper(os.Args[2:]))
		case adversarialCmd:
			os.Exit(fakecase.Main(os.Args[2:], os.Stdout, os.Stderr, os.Getenv))
		}
	}
	os.Exit(m.Run())
}

// result is what the helper prints, one JSON object.
type result struct {
	OK     bool              `json:"ok"`
	Errno  string            `json:"errno,omitempty"`
	Err    string            `json:"err,omitempty"`
	Count  int               `json:"count,omitempty"`
	Fields map[string]string `json:"fields,omitempty"`
	List   []string          `json:"list,omitempty"`
}

func errnoName(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return ""
}

func helper(args []string) int {
	var r result
	fail := func(err error) {
		r.Err = err.Error()
		r.Errno = errnoName(err)
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch arg(0) {
	case "write": // create or truncate PATH
		if err := os.WriteFile(arg(1), []byte("written by the helper\n"), 0o644); err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "append":
		f, err := os.OpenFile(arg(1), os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.WriteString("appended by the helper\n")
			f.Close()
		}
		if err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "truncate":
		if err := os.Truncate(arg(1), 0); err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "read":
		if _, err := os.ReadFile(arg(1)); err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "mknod":
		if err := unix.Mknod(arg(1), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "connect":
		c, err := net.DialTimeout("tcp", arg(1), 2*time.Second)
		if err != nil {
			fail(err)
		} else {
			c.Close()
			r.OK = true
		}
	case "connect-read": // connect to ADDR and read until the peer closes
		c, err := net.DialTimeout("tcp", arg(1), 2*time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.Copy(io.Discard, c)
			c.Close()
		}
		if err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "udpsend": // N datagrams to the discard port on loopback, with sendto(2) and the address or write(2) on a connected socket; Count is the ns they took
		n, _ := strconv.Atoi(arg(1))
		connected := arg(2) == "write"
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		to := &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}
		if err == nil && connected {
			err = unix.Connect(fd, to)
		}
		if err == nil {
			start := time.Now()
			for i := 0; i < n && err == nil; i++ {
				if connected {
					_, err = unix.Write(fd, []byte("x"))
				} else {
					err = unix.Sendto(fd, []byte("x"), 0, to)
				}
				if err == unix.ECONNREFUSED {
					err = nil // an earlier datagram's ICMP answer
				}
			}
			r.Count = int(time.Since(start))
			unix.Close(fd)
		}
		if err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "vsocks": // N socket(AF_VSOCK) calls, each expected to fail with EACCES; Count is the ns they took
		n, _ := strconv.Atoi(arg(1))
		var err error
		start := time.Now()
		for i := 0; i < n && err == nil; i++ {
			var fd int
			if fd, err = unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0); err == nil {
				unix.Close(fd)
				err = errors.New("socket(AF_VSOCK) was allowed")
			} else if err == unix.EACCES {
				err = nil
			}
		}
		r.Count = int(time.Since(start))
		if err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "bind": // bind 0.0.0.0:PORT (18080 by default)
		port := 18080
		if arg(1) != "" {
			port, _ = strconv.Atoi(arg(1))
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err == nil {
			err = unix.Bind(fd, &unix.SockaddrInet4{Port: port})
			unix.Close(fd)
		}
		if err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "httptest": // an httptest server on loopback and one GET to it, over IPv4 and IPv6
		err := loopbackHTTP("tcp4", "127.0.0.1:0")
		if err == nil {
			err = loopbackHTTP("tcp6", "[::1]:0")
		}
		if err != nil {
			fail(err)
		} else {
			r.OK = true
		}
	case "unix":
		c, err := net.Dial("unix", arg(1))
		if err != nil {
			fail(err)
		} else {
			c.Close()
			r.OK = true
		}
	case "keyctl":
		// KEYCTL_GET_KEYRING_ID of the user keyring (@u).
		_, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffc), 0)
		if e != 0 {
			fail(e)
		} else {
			r.OK = true
		}
	case "ptrace-child":
		// A child of its own, then the three ways to change another
		// process's memory: ptrace, /proc/PID/mem, process_vm_writev.
		child := exec.Command("/bin/sleep", "10")
		if err := child.Start(); err != nil {
			fail(err)
			break
		}
		defer child.Process.Kill()
		pid := child.Process.Pid
		r.Fields = map[string]string{"attach": "OK", "mem": "OK", "vm_writev": "OK"}
		if err := unix.PtraceAttach(pid); err != nil {
			r.Fields["attach"] = errnoName(err)
		} else {
			unix.PtraceDetach(pid)
		}
		if f, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0); err != nil {
			r.Fields["mem"] = errnoName(err)
		} else {
			f.Close()
		}
		b := []byte{0}
		local := []unix.Iovec{{Base: &b[0], Len: 1}}
		remote := []unix.RemoteIovec{{Base: 0x1000, Len: 1}}
		if _, err := unix.ProcessVMWritev(pid, local, remote, 0); err != nil && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EACCES)) {
			r.Fields["vm_writev"] = errnoName(err)
		}
		r.OK = true
	case "vsock":
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		if err != nil {
			fail(err)
		} else {
			unix.Close(fd)
			r.OK = true
		}
	case "iouring":
		var params [120]byte
		_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		if e != 0 {
			fail(e)
		} else {
			r.OK = true
		}
	case "status":
		r.Fields = map[string]string{}
		data, _ := os.ReadFile("/proc/self/status")
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok {
				r.Fields[k] = strings.TrimSpace(v)
			}
		}
		r.Fields["pid"] = fmt.Sprint(os.Getpid())
		for _, lim := range []struct {
			n string
			r int
		}{{"nofile", unix.RLIMIT_NOFILE}, {"nproc", unix.RLIMIT_NPROC}, {"as", unix.RLIMIT_AS}, {"cpu", unix.RLIMIT_CPU}, {"fsize", unix.RLIMIT_FSIZE}} {
			var rl unix.Rlimit
			_ = unix.Getrlimit(lim.r, &rl)
			r.Fields["rlimit_"+lim.n] = fmt.Sprintf("%d/%d", rl.Cur, rl.Max)
		}
		if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
			r.Fields["pid_max"] = strings.TrimSpace(string(b))
		}
		// Raising a hard limit needs CAP_SYS_RESOURCE.
		var rl unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
		rl.Max++
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
			r.Fields["raise_nofile"] = errnoName(err)
		} else {
			r.Fields["raise_nofile"] = "ok"
		}
		r.OK = true
	case "procs":
		r.Count = os.Getpid()
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if e.Name()[0] >= '0' && e.Name()[0] <= '9' {
				r.List = append(r.List, e.Name())
			}
		}
		r.OK = true
	case "sockets": // every socket family and socketpair type, and a pair aimed at DGRAM_PATH and STREAM_PATH
		r.Fields = sockets(arg(1), arg(2), arg(3))
		r.OK = true
	case "procargs": // the launcher's argv and environment, as the command reads them
		r.Fields = map[string]string{}
		for _, f := range []string{"cmdline", "environ"} {
			data, err := os.ReadFile("/proc/1/" + f)
			if err != nil {
				r.Fields[f+"_errno"] = errnoName(err)
				continue
			}
			r.Fields[f] = string(data)
		}
		r.OK = true
	case "forkbomb":
		// Start sleepers until the kernel refuses, then report.
		for r.Count < 100000 {
			_, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "60"}, &syscall.ProcAttr{})
			if err != nil {
				fail(err)
				break
			}
			r.Count++
		}
		r.OK = r.Err == ""
	default:
		if !viewAction(args, &r) {
			r.Err = "unknown helper action " + arg(0)
		}
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	return 0
}

var (
	factsOnce sync.Once
	facts     sandbox.Facts
)

func self(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// requireSandbox skips when the machine cannot confine, naming what is missing.
func requireSandbox(t testing.TB) sandbox.Facts {
	t.Helper()
	factsOnce.Do(func() { facts = sandbox.ProbeWith(self(t)) })
	if !facts.Available() {
		t.Skipf("sandbox unavailable on this machine: %s", facts.Reason)
	}
	return facts
}

type outcome struct {
	code     int
	stdout   string
	stderr   string
	duration time.Duration
	nsInode  string // the launcher's PID namespace, read while it ran
}

func (o outcome) result(t testing.TB) result {
	t.Helper()
	var r result
	line, _, _ := strings.Cut(strings.TrimSpace(o.stdout), "\n")
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("helper printed %q (stderr %q, exit %d): %v", o.stdout, o.stderr, o.code, err)
	}
	return r
}

// launch runs argv under the sandbox the way the harness will: the launcher
// command and SysProcAttr from sandbox.Command, an explicit environment, a
// working directory, and a timeout that kills the launcher (and so the
// namespace) if the test goes wrong.
func launch(t testing.TB, p sandbox.Policy, dir string, argv ...string) outcome {
	t.Helper()
	return launchWith(t, p, dir, opts{}, argv...)
}

type opts struct {
	env     []string
	started func(*exec.Cmd)
	stdout  io.Writer // instead of capturing stdout in outcome.stdout
	bare    bool      // run argv directly, without the sandbox
	extra   []*os.File
}

func launchWith(t testing.TB, p sandbox.Policy, dir string, o opts, argv ...string) outcome {
	t.Helper()
	largv, attr, pf, err := sandbox.Command(self(t), p, argv)
	if err != nil {
		t.Fatal(err)
	}
	extra := append(o.extra[:len(o.extra):len(o.extra)], pf)
	if o.bare {
		largv, attr = argv, &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		pf.Close()
		extra = o.extra
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, largv[0], largv[1:]...)
	cmd.SysProcAttr = attr
	cmd.ExtraFiles = extra
	cmd.Dir = dir
	env := o.env
	if env == nil {
		env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	}
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if o.stdout != nil {
		cmd.Stdout = o.stdout
	}
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start launcher: %v", err)
	}
	for _, f := range extra {
		f.Close()
	}
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", cmd.Process.Pid))
	if o.started != nil {
		o.started(cmd)
	}
	err = cmd.Wait()
	if o.bare {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	out := outcome{stdout: stdout.String(), stderr: stderr.String(), duration: time.Since(start), nsInode: ns}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		out.code = ee.ExitCode()
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			out.code = 128 + int(st.Signal())
		}
	default:
		t.Fatalf("wait for launcher: %v (stderr %q)", err, stderr.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("the launcher did not exit within the test timeout; stderr %q", stderr.String())
	}
	return out
}

// sockets tries the socket families and socketpair types the seccomp
// filter decides on, and whether a socketpair end can be aimed at a
// pathname socket (dgramPath, a SOCK_DGRAM one, streamPath and packetPath,
// listening SOCK_STREAM and SOCK_SEQPACKET ones). Each field is "ok" or the
// errno.
func sockets(dgramPath, streamPath, packetPath string) map[string]string {
	out := map[string]string{}
	res := func(name string, err error) {
		if err == nil {
			out[name] = "ok"
		} else {
			out[name] = errnoName(err)
		}
	}
	try := func(name string, domain, typ, proto int) {
		fd, err := unix.Socket(domain, typ, proto)
		if err == nil {
			unix.Close(fd)
		}
		res(name, err)
	}
	try("inet_stream", unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	try("inet_dgram", unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	try("inet6_stream", unix.AF_INET6, unix.SOCK_STREAM, 0)
	try("inet6_dgram", unix.AF_INET6, unix.SOCK_DGRAM, 0)
	try("inet_raw", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	try("netlink_route", unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	try("netlink_audit", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)
	try("netlink_uevent", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT)
	try("unix_stream", unix.AF_UNIX, unix.SOCK_STREAM, 0)
	try("unix_dgram", unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	try("packet", unix.AF_PACKET, unix.SOCK_RAW, 0x0300) // htons(ETH_P_ALL)
	try("alg", unix.AF_ALG, unix.SOCK_SEQPACKET, 0)
	// vsock: listen on a port (the host could not bind it while held) and
	// connect to the host.
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: 40123})
		if err == nil {
			err = unix.Listen(fd, 1)
		}
		unix.Close(fd)
	}
	res("vsock_listen", err)
	fd, err = unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err == nil {
		err = unix.Connect(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_HOST, Port: 40123})
		unix.Close(fd)
	}
	res("vsock_connect", err)
	for _, pt := range []struct {
		name string
		typ  int
	}{{"stream", unix.SOCK_STREAM}, {"seqpacket", unix.SOCK_SEQPACKET}, {"dgram", unix.SOCK_DGRAM | unix.SOCK_CLOEXEC}} {
		fds, err := unix.Socketpair(unix.AF_UNIX, pt.typ, 0)
		res("pair_"+pt.name, err)
		if err != nil {
			continue
		}
		to := &unix.SockaddrUnix{Name: dgramPath}
		switch pt.typ {
		case unix.SOCK_STREAM:
			to = &unix.SockaddrUnix{Name: streamPath}
		case unix.SOCK_SEQPACKET:
			to = &unix.SockaddrUnix{Name: packetPath}
		}
		res("pair_"+pt.name+"_sendto", unix.Sendto(fds[0], []byte("x"), unix.MSG_DONTWAIT, &unix.SockaddrUnix{Name: dgramPath}))
		res("pair_"+pt.name+"_connect", unix.Connect(fds[0], to))
		// With its peer gone, the end is still not free to connect.
		unix.Close(fds[1])
		res("pair_"+pt.name+"_connect_after_close", unix.Connect(fds[0], to))
		res("pair_"+pt.name+"_send_after_close", unix.Sendto(fds[0], []byte("x"), unix.MSG_DONTWAIT, &unix.SockaddrUnix{Name: dgramPath}))
		unix.Close(fds[0])
	}
	return out
}

// devNulls opens /dev/null n times, to stand where a launcher expects its
// control sockets.
func devNulls(t testing.TB, n int) []*os.File {
	t.Helper()
	var fs []*os.File
	for range n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	return fs
}

// aliveInNamespace lists host pids still in the PID namespace ns. Killing a
// namespace is asynchronous (a loaded machine may take a moment to tear down
// its processes), so it waits up to two seconds for the list to empty.
func aliveInNamespace(ns string) []string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		alive := inNamespace(ns)
		if len(alive) == 0 || time.Now().After(deadline) {
			return alive
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func inNamespace(ns string) []string {
	if ns == "" {
		return nil
	}
	var alive []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "pid")); err == nil && l == ns {
			alive = append(alive, e.Name())
		}
	}
	return alive
}

// box is a run-directory stand-in: runs/<id>/{fixture,report.json,task.json,
// events.normalized.jsonl}, the scratch root runs/work/<id>/ and a source
// tree next to them.
type box struct {
	root, runDir, fixture, scratchRoot, tmp, source, report, task, events string
}

func newBox(t testing.TB) box {
	t.Helper()
	root := t.TempDir()
	b := box{root: root, runDir: filepath.Join(root, "runs", "r1"), source: filepath.Join(root, "source"),
		scratchRoot: filepath.Join(root, "runs", "work", "r1")}
	b.fixture = filepath.Join(b.runDir, "fixture")
	b.tmp = filepath.Join(b.scratchRoot, "tmp")
	b.report = filepath.Join(b.runDir, "report.json")
	b.task = filepath.Join(b.runDir, "task.json")
	b.events = filepath.Join(b.runDir, "events.normalized.jsonl")
	for _, d := range append([]string{b.fixture, b.source}, backend.ScratchDirs(b.scratchRoot)...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{b.report, b.task, b.events, filepath.Join(b.source, "main.go")} {
		if err := os.WriteFile(f, []byte("original\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// policy is what the harness should use for Case: the fixture and the
// scratch subdirectories (not the scratch root, which for stages 1-2 also
// holds the materialized source) are writable.
func (b box) policy() sandbox.Policy {
	return sandbox.Policy{Writable: append([]string{b.fixture}, backend.ScratchDirs(b.scratchRoot)...), DenyNetwork: true}
}

// loopbackHTTP serves one HTTP answer on addr and fetches it, the way
// net/http/httptest does.
func loopbackHTTP(network, addr string) error {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "pong")
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if string(b) != "pong" {
		return fmt.Errorf("got %q from the loopback server", b)
	}
	return nil
}
