package agent

import (
	"bytes"
	"fmt"
	"os"
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
