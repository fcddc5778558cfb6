package agent

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/cto-harness/cto-harness/harness/caseworld"
)

// Secret is a value that must never reach the evidence, and the name of the
// variable it came from (used in the redaction marker).
type Secret struct {
	Var   string
	Value string
}

// minSecretLen keeps a short value (a typo, "x") from redacting half of
// every file; such a key is refused before the run instead.
const minSecretLen = 8

// Redactor replaces secrets with [REDACTED:VAR].
type Redactor struct{ secrets []Secret }

// NewRedactor refuses a secret too short to redact safely.
func NewRedactor(secrets ...Secret) (*Redactor, error) {
	for _, s := range secrets {
		if len(s.Value) < minSecretLen {
			return nil, fmt.Errorf("the value of %s is shorter than %d characters; it cannot be redacted from the evidence without mangling it", s.Var, minSecretLen)
		}
	}
	return &Redactor{secrets: secrets}, nil
}

// Marker is what replaces the secret of var.
func Marker(v string) string { return "[REDACTED:" + v + "]" }

// Contains reports whether b holds any secret.
func (r *Redactor) Contains(b []byte) bool {
	if r == nil {
		return false
	}
	for _, s := range r.secrets {
		if bytes.Contains(b, []byte(s.Value)) {
			return true
		}
	}
	return false
}

// Bytes returns b with every secret replaced.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	for _, s := range r.secrets {
		b = bytes.ReplaceAll(b, []byte(s.Value), []byte(Marker(s.Var)))
	}
	return b
}

// String is Bytes for a string.
func (r *Redactor) String(s string) string { return string(r.Bytes([]byte(s))) }

// File rewrites the file at p with every secret replaced, keeping its mode,
// and reports whether it held one. The rewrite is atomic (temp file and
// rename in the same directory).
func (r *Redactor) File(p string) (bool, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	if !r.Contains(data) {
		return false, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return true, err
	}
	tmp := p + ".redact-tmp"
	if err := os.WriteFile(tmp, r.Bytes(data), st.Mode().Perm()); err != nil {
		return true, err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return true, err
	}
	return true, nil
}

// scrubChunk is how much of a file ScrubBeneath holds at once.
const scrubChunk = 1 << 20

// ScrubBeneath rewrites rel below root (Case's world: its fixture, its
// scratch) with every secret replaced and reports whether it held one. It
// opens nothing through a symlink or outside root (package caseworld),
// skips what is not a regular file, and streams: memory stays at about
// scrubChunk whatever the file's size. The rewrite goes to a temporary
// name in the same directory and replaces the file by rename.
func (r *Redactor) ScrubBeneath(root, rel string) (bool, error) {
	if r == nil || len(r.secrets) == 0 {
		return false, nil
	}
	in, err := caseworld.Open(root, rel)
	if err != nil {
		return false, err
	}
	defer in.Close()
	found, err := r.stream(in, io.Discard)
	if err != nil || !found {
		return false, err
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return true, err
	}
	st, err := in.Stat()
	if err != nil {
		return true, err
	}
	dir, err := caseworld.Dir(root, path.Dir(rel))
	if err != nil {
		return true, err
	}
	defer unix.Close(dir)
	name, tmp := path.Base(rel), path.Base(rel)+".redact-tmp"
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(st.Mode().Perm()))
	if err != nil {
		return true, fmt.Errorf("create %s beside %s: %w", tmp, rel, err)
	}
	out := os.NewFile(uintptr(fd), tmp)
	if _, err := r.stream(in, out); err != nil {
		out.Close()
		_ = unix.Unlinkat(dir, tmp, 0)
		return true, err
	}
	if err := out.Close(); err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return true, err
	}
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return true, fmt.Errorf("replace %s: %w", rel, err)
	}
	return true, nil
}

// stream copies in to out with every secret replaced, a chunk at a time,
// keeping back the bytes a secret split across two chunks could start in,
// and reports whether it replaced any.
func (r *Redactor) stream(in io.Reader, out io.Writer) (bool, error) {
	longest := 0
	for _, s := range r.secrets {
		longest = max(longest, len(s.Value))
	}
	buf := make([]byte, 0, scrubChunk+longest)
	found := false
	for eof := false; !eof; {
		n, err := io.ReadFull(in, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			eof = true
		case err != nil:
			return found, err
		}
		// Everything before cut is settled: no secret can start there and
		// still be incomplete.
		cut := len(buf)
		if !eof {
			cut = max(0, len(buf)-(longest-1))
		}
		pos := 0
		for {
			at, which := -1, -1
			for i, s := range r.secrets {
				if k := bytes.Index(buf[pos:], []byte(s.Value)); k >= 0 && (at < 0 || k < at) {
					at, which = k, i
				}
			}
			if at < 0 || pos+at >= cut {
				break
			}
			found = true
			if _, err := out.Write(buf[pos : pos+at]); err != nil {
				return found, err
			}
			if _, err := io.WriteString(out, Marker(r.secrets[which].Var)); err != nil {
				return found, err
			}
			pos += at + len(r.secrets[which].Value)
		}
		if pos < cut {
			if _, err := out.Write(buf[pos:cut]); err != nil {
				return found, err
			}
			pos = cut
		}
		buf = buf[:copy(buf, buf[pos:])]
	}
	return found, nil
}
