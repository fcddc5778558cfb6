package validators

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"golang.org/x/sys/unix"
)

// hostAttack is what plantHost set up for a host-reach row: a datagram
// socket on the host in a path the view shows ({unix_dgram}), and a key
// with a secret payload in the user keyring ({host_key}).
type hostAttack struct {
	inherited string // the file behind {inherited_fd}
	fd        int
	dgram     *net.UnixConn
	received  atomic.Int32
	keyID     int
	secret    string
}

// keyPlantedByCase is the description the keyring scenario's key gets
// (fakecase.keyPlanted).
const keyPlantedByCase = "cto-harness-planted-by-case"

// plantHost sets up the host side of the row's {unix_dgram} and {host_key}
// placeholders, and of {inherited_fd} (a descriptor on a host file that
// every child of the harness inherits), and fills them in.
func (a *attack) plantHost(work string, opts *harness.Options) error {
	var repl []string
	if strings.Contains(opts.Scenario, "{unix_dgram}") {
		dir := filepath.Join(work, "host-sockets")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		p := filepath.Join(dir, "host.sock")
		c, err := listenUnixgram(p)
		if err != nil {
			return fmt.Errorf("start the host datagram socket: %w", err)
		}
		a.host().dgram = c
		go func() {
			buf := make([]byte, 512)
			for {
				if _, _, err := c.ReadFrom(buf); err != nil {
					return
				}
				a.host().received.Add(1)
			}
		}()
		// The view shows the socket's directory, as a configured read
		// path would.
		sb := config.Sandbox{}
		if opts.Config.Sandbox != nil {
			sb = *opts.Config.Sandbox
		}
		sb.ReadPaths = append(slices.Clone(sb.ReadPaths), dir)
		opts.Config.Sandbox = &sb
		repl = append(repl, "{unix_dgram}", p)
	}
	if strings.Contains(opts.Scenario, "{inherited_fd}") {
		// Opened without O_CLOEXEC, as a descriptor the harness's own
		// parent handed it: every child the harness starts inherits it.
		h := a.host()
		h.inherited = filepath.Join(work, "host-inherited.txt")
		fd, err := unix.Open(h.inherited, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open the inherited descriptor: %w", err)
		}
		// Far above the launcher's extra files, which would replace it.
		high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD, 100)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("move the inherited descriptor: %w", err)
		}
		h.fd = high
		repl = append(repl, "{inherited_fd}", strconv.Itoa(high))
	}
	if strings.Contains(opts.Scenario, "{host_key}") {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		h := a.host()
		h.secret = "cto-harness-key-secret-" + hex.EncodeToString(b)
		desc := "cto-harness-host-key-" + hex.EncodeToString(b[:4])
		id, err := unix.AddKey("user", desc, []byte(h.secret), unix.KEY_SPEC_USER_KEYRING)
		if err != nil {
			return fmt.Errorf("plant a key in the user keyring: %w", err)
		}
		h.keyID = id
		repl = append(repl, "{host_key}", desc)
	}
	if len(repl) > 0 {
		opts.Scenario = strings.NewReplacer(repl...).Replace(opts.Scenario)
	}
	return nil
}

func (a *attack) host() *hostAttack {
	if a.hostReach == nil {
		a.hostReach = &hostAttack{}
	}
	return a.hostReach
}

// checkHost fails the row when a datagram reached the host socket, when
// Case's key is in the user keyring, or when the host key's secret reached
// any file of the run directory.
func (a *attack) checkHost(runDir string, res *RowResult) {
	h := a.hostReach
	if h == nil {
		return
	}
	if h.inherited != "" {
		if fi, err := os.Stat(h.inherited); err != nil || fi.Size() != 0 {
			res.fail("the host file behind the harness's inherited descriptor was written (%v)", err)
		}
	}
	if n := h.received.Load(); n > 0 {
		res.fail("%d datagram(s) from Case reached the host socket", n)
	}
	if id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", keyPlantedByCase, 0); err == nil {
		res.fail("Case planted key %d (%s) in the user keyring", id, keyPlantedByCase)
		_, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0)
	}
	if h.secret == "" {
		return
	}
	_ = filepath.WalkDir(runDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(h.secret)) {
			res.fail("the host keyring's secret reached the evidence: %s", p)
		}
		return nil
	})
}

func (h *hostAttack) close() {
	if h == nil {
		return
	}
	if h.dgram != nil {
		h.dgram.Close()
	}
	if h.fd > 0 {
		unix.Close(h.fd)
	}
	if h.keyID != 0 {
		_, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, h.keyID, unix.KEY_SPEC_USER_KEYRING, 0, 0)
	}
}

// listenUnixgram binds a datagram socket at p, however long: a path over
// sun_path's 108 bytes is reached through /proc/self/fd and a descriptor on
// its directory.
func listenUnixgram(p string) (*net.UnixConn, error) {
	d, err := os.Open(filepath.Dir(p))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	short := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(p))
	return net.ListenUnixgram("unixgram", &net.UnixAddr{Name: short, Net: "unixgram"})
}
