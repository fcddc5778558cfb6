package fakecase

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The host-reach attacks try what no namespace isolates: the uid's key
// rings, vsock, and a datagram to a host socket by path. Each succeeds on
// an unconfined machine that has the feature; the sandbox's seccomp filter
// refuses them.

// keyPlanted is the description of the key keyringReach tries to leave in
// the user keyring; the failure matrix looks for it on the host afterwards.
const keyPlanted = "cto-harness-planted-by-case"

// keyringReach reads every key of the user keyring (@u) it can and copies
// the payloads into the note, then tries to add a key of its own there.
// want, the description of a key the host planted, is only reported on.
func keyringReach(want string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		var payloads []string
		ids, rerr := keyctlRead(unix.KEY_SPEC_USER_KEYRING)
		found := false
		for i := 0; rerr == nil && i+4 <= len(ids); i += 4 {
			id := int(*(*int32)(unsafe.Pointer(&ids[i])))
			if d, err := unix.KeyctlString(unix.KEYCTL_DESCRIBE, id); err == nil && strings.HasSuffix(d, ";"+want) {
				found = true
			}
			if p, err := keyctlRead(id); err == nil {
				payloads = append(payloads, string(p))
			}
		}
		if len(payloads) > 0 {
			if err := c.writeNote(fmt.Sprintf("read from the user keyring:\n%s\n", strings.Join(payloads, "\n"))); err != nil {
				return err
			}
		}
		if rerr == nil && len(payloads) == 0 {
			rerr = errors.New("the user keyring holds nothing readable")
		}
		c.attempt("keyring-read", "@u", rerr, map[string]any{"keys_read": len(payloads), "host_key_seen": found})
		_, aerr := unix.AddKey("user", keyPlanted, []byte("planted by the fake Case"), unix.KEY_SPEC_USER_KEYRING)
		c.attempt("keyring-plant", "@u", aerr, nil)
		return nil
	}
}

// keyctlRead is KEYCTL_READ of id: a keyring's key ids, a key's payload.
func keyctlRead(id int) ([]byte, error) {
	buf := make([]byte, 4096)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if err != nil {
		return nil, err
	}
	return buf[:min(n, len(buf))], nil
}

// vsockReach listens on a vsock port (the host could not bind it meanwhile)
// and connects to the host's CID.
func vsockReach(c *caseRun) error {
	if err := c.edit(); err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: 40124})
		if err == nil {
			err = unix.Listen(fd, 1)
		}
		unix.Close(fd)
	}
	c.attempt("vsock-listen", "port 40124", err, nil)
	fd, err = unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err == nil {
		err = unix.Connect(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_HOST, Port: 40124})
		if errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.ECONNREFUSED) {
			err = nil // the host answered: vsock reached it
		}
		unix.Close(fd)
	}
	c.attempt("vsock-connect", "host CID port 40124", err, nil)
	return nil
}

// socketFamilies opens one socket of each family (or protocol) outside the
// sandbox's allowlist: raw packets on every interface, a raw ICMP socket,
// the kernel's crypto API, the audit log, device uevents and a UNIX stream
// socket, which could connect to a host daemon by path.
func socketFamilies(c *caseRun) error {
	if err := c.edit(); err != nil {
		return err
	}
	for _, s := range []struct {
		name               string
		domain, typ, proto int
	}{
		{"packet", unix.AF_PACKET, unix.SOCK_RAW, 0x0300}, // htons(ETH_P_ALL)
		{"inet-raw", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP},
		{"alg", unix.AF_ALG, unix.SOCK_SEQPACKET, 0},
		{"netlink-audit", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT},
		{"netlink-uevent", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT},
		{"unix-stream", unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0},
	} {
		fd, err := unix.Socket(s.domain, s.typ, s.proto)
		if err == nil {
			unix.Close(fd)
		}
		c.attempt("socket-"+s.name, "", err, nil)
	}
	return nil
}

// unixDgramReach sends a datagram to the host socket at path: from a UNIX
// datagram socket, and from a datagram socketpair end, by sendto(2) and by
// connect(2) then write(2).
func unixDgramReach(path string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		// A path over sun_path's 108 bytes is reached through a
		// descriptor on its directory.
		name := path
		if dir, err := os.Open(filepath.Dir(path)); err == nil {
			defer dir.Close()
			name = fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
		}
		to := &unix.SockaddrUnix{Name: name}
		msg := []byte("datagram from the fake Case")
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		if err == nil {
			err = unix.Sendto(fd, msg, 0, to)
			unix.Close(fd)
		}
		c.attempt("unix-dgram-socket", path, err, nil)
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		if err != nil {
			c.attempt("unix-dgram-socketpair", path, err, nil)
			return nil
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		c.attempt("unix-dgram-socketpair-sendto", path, unix.Sendto(fds[0], msg, 0, to), nil)
		err = unix.Connect(fds[1], to)
		if err == nil {
			_, err = unix.Write(fds[1], msg)
		}
		c.attempt("unix-dgram-socketpair-connect", path, err, nil)
		return nil
	}
}

// writeFD writes to descriptor N, which the harness held open (not
// close-on-exec) when it started: a descriptor it inherited from its own
// parent, such as a shell's `9>>file`.
func writeFD(n string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		fd, err := strconv.Atoi(n)
		if err != nil {
			return fmt.Errorf("write-fd: %q is not a descriptor number", n)
		}
		_, err = unix.Write(fd, []byte("written by the fake Case through an inherited descriptor\n"))
		c.attempt("write-fd", n, err, nil)
		return nil
	}
}
