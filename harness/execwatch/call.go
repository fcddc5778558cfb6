package execwatch

import (
	"bytes"
	"encoding/binary"
	"strings"

	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/profile"
	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"
)

// Bounds on what is read from a caller's memory, so one exec costs little
// whatever it passes: the path, at most maxArgs arguments and maxArgvBytes
// of them in all (a shell's -c string included). The bytes bound holds
// the longest single argument Linux accepts (128 KiB) with room to spare:
// codex wraps every command in a 38 KiB script whose last line is the
// command, so a smaller bound would read the wrapper and miss the command.
// A command cut at a bound is Truncated, and the profile counts it as the
// most expensive command it might be (profile.Unknown).
const (
	maxPath      = 4096
	maxArgs      = 2048
	maxArgvBytes = 256 << 10
)

// Command is one command Case runs, as the harness saw its exec.
type Command struct {
	Pid  int      // the calling process (the harness's pid namespace)
	Path string   // the file named, as given
	Argv []string // as read, at most maxArgs and maxArgvBytes
	// Line is what the agent asked to run: a shell's -c string (sh, bash,
	// dash, zsh, ash, ksh with -c, -lc, ...), otherwise argv as a shell word
	// list. A launcher's shell call (profile.Launched: codex's
	// `/proc/self/exe --codex-run-as-process-setup … /bin/bash -c SCRIPT`)
	// is its words before the shell, a line break, and the -c string, so
	// the classifiers read both. The profile's classifiers read it.
	Line      string
	Shell     bool // Line is, or ends with, a shell's -c string
	Truncated bool // Argv or Line was cut at a bound
}

// call is what one notified exec asks for.
type call struct {
	tid       int
	path      string
	argv      []string
	truncated bool
}

// readCall reads the path and argv of an execve or execveat. ok is false
// when the caller's memory could not be read (it is gone, or passed a bad
// pointer: the kernel fails that exec itself).
func readCall(tid int, n *notify.Notif) (call, bool) {
	c := call{tid: tid}
	var pathPtr, argvPtr uint64
	switch n.Nr {
	case unix.SYS_EXECVE:
		pathPtr, argvPtr = n.Args[0], n.Args[1]
	case unix.SYS_EXECVEAT:
		pathPtr, argvPtr = n.Args[1], n.Args[2]
	default:
		return c, false
	}
	p, cut, ok := readString(tid, pathPtr, maxPath)
	if !ok {
		return c, false
	}
	c.path, c.truncated = p, cut
	if argvPtr == 0 {
		return c, true // Linux runs it with an empty argv
	}
	budget := maxArgvBytes
	for i := 0; i < maxArgs; i++ {
		var ptr [8]byte
		if !readMem(tid, argvPtr+uint64(8*i), ptr[:]) {
			return c, false
		}
		a := binary.NativeEndian.Uint64(ptr[:])
		if a == 0 {
			return c, true
		}
		if budget == 0 {
			c.truncated = true
			return c, true
		}
		s, cut, ok := readString(tid, a, budget)
		if !ok {
			return c, false
		}
		budget -= len(s)
		c.argv = append(c.argv, s)
		c.truncated = c.truncated || cut
	}
	c.truncated = true
	return c, true
}

// readString reads a NUL-terminated string of at most max bytes, a page at
// a time so a string that ends just before unmapped memory is still read.
func readString(pid int, addr uint64, max int) (s string, truncated, ok bool) {
	var out []byte
	buf := make([]byte, 4096)
	for len(out) < max {
		k := min(uint64(len(buf)), 4096-addr%4096, uint64(max-len(out)))
		chunk := buf[:k]
		if !readMem(pid, addr, chunk) {
			return "", false, false
		}
		if i := bytes.IndexByte(chunk, 0); i >= 0 {
			return string(append(out, chunk[:i]...)), false, true
		}
		out = append(out, chunk...)
		addr += k
	}
	return string(out), true, true
}

// readMem fills buf from the caller's memory at addr.
func readMem(pid int, addr uint64, buf []byte) bool {
	k, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}, 0)
	return err == nil && k == len(buf)
}

// command is the call as a Command.
func (c call) command() Command {
	cmd := Command{Pid: c.tid, Path: c.path, Argv: c.argv, Truncated: c.truncated}
	if outer, s, ok := profile.Launched(c.path, c.argv); ok {
		cmd.Line, cmd.Shell = s, true
		if len(outer) > 0 {
			cmd.Line = quote(outer) + "\n" + s
		}
		return cmd
	}
	words := c.argv
	if len(words) == 0 {
		words = []string{c.path}
	}
	cmd.Line = quote(words)
	return cmd
}

// quote joins words as a shell word list.
func quote(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if s, err := syntax.Quote(w, syntax.LangBash); err == nil {
			q[i] = s
		} else {
			q[i] = w
		}
	}
	return strings.Join(q, " ")
}
