package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/cto-harness/cto-harness/harness/notify"
	"golang.org/x/sys/unix"
)

// With the socket watch, every socket(2) and socketpair(2) the family
// allowlist refuses reaches the harness, which refuses it; what the list
// allows never does (no round trip), and the command sees the same
// verdicts as without the watch.
func TestSocketWatchSeesEveryRefusal(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	p := b.policy()
	p.SocketWatch = true
	var mu sync.Mutex
	var seen []string
	child, w, err := notify.Attach(notify.Options{Socket: func(c *notify.Call) {
		mu.Lock()
		defer mu.Unlock()
		call := "socket"
		if c.Nr == unix.SYS_SOCKETPAIR {
			call = "socketpair"
		}
		seen = append(seen, fmt.Sprintf("%s(%d,%d,%d)", call, int32(c.Args[0]), int32(c.Args[1])&0xf, int32(c.Args[2])))
		c.Answer(unix.EACCES)
	}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(b.root, "none.sock")
	o := launchWith(t, p, b.fixture, opts{extra: []*os.File{child}}, self(t), helperCmd, "sockets", sock, sock, sock)
	child.Close()
	if err := w.Close(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	r := o.result(t)
	for k, v := range socketVerdicts {
		if r.Fields[k] != v {
			t.Errorf("%s: %q, want %q", k, r.Fields[k], v)
		}
	}
	want := []string{
		fmt.Sprintf("socket(%d,%d,%d)", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP),
		fmt.Sprintf("socket(%d,%d,%d)", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT),
		fmt.Sprintf("socket(%d,%d,%d)", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT),
		fmt.Sprintf("socket(%d,%d,0)", unix.AF_UNIX, unix.SOCK_STREAM),
		fmt.Sprintf("socket(%d,%d,0)", unix.AF_UNIX, unix.SOCK_DGRAM),
		fmt.Sprintf("socket(%d,%d,%d)", unix.AF_PACKET, unix.SOCK_RAW, 0x0300),
		fmt.Sprintf("socket(%d,%d,0)", unix.AF_ALG, unix.SOCK_SEQPACKET),
		fmt.Sprintf("socket(%d,%d,0)", unix.AF_VSOCK, unix.SOCK_STREAM),
		fmt.Sprintf("socket(%d,%d,0)", unix.AF_VSOCK, unix.SOCK_STREAM),
		fmt.Sprintf("socketpair(%d,%d,0)", unix.AF_UNIX, unix.SOCK_DGRAM),
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, want) {
		t.Errorf("the watch saw\n%v\nwant\n%v", seen, want)
	}
}

// A socket watch whose handler tries to let a refused family through
// cannot: notify answers EACCES for it.
func TestSocketWatchNeverLetsARefusedFamilyThrough(t *testing.T) {
	requireSandbox(t)
	b := newBox(t)
	p := b.policy()
	p.SocketWatch = true
	child, w, err := notify.Attach(notify.Options{Socket: func(c *notify.Call) { c.Answer(0) }})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(b.root, "none.sock")
	o := launchWith(t, p, b.fixture, opts{extra: []*os.File{child}}, self(t), helperCmd, "sockets", sock, sock, sock)
	child.Close()
	if err := w.Close(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	r := o.result(t)
	for k, v := range socketVerdicts {
		if r.Fields[k] != v {
			t.Errorf("%s: %q, want %q", k, r.Fields[k], v)
		}
	}
}
