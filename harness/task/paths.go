package task

import (
	"errors"
	"path"
	"strings"
)

// ErrBadPattern reports an allowed-path glob that could match outside the fixture.
var ErrBadPattern = errors.New("bad path pattern")

// CheckPattern accepts relative slash globs: path.Match syntax per segment,
// plus "**" as a whole segment matching any number of segments. Absolute
// patterns and ".." are refused because they would name paths outside the fixture.
func CheckPattern(p string) error {
	switch {
	case p == "":
		return errors.Join(ErrBadPattern, errors.New("empty pattern"))
	case strings.HasPrefix(p, "/"):
		return errors.Join(ErrBadPattern, errors.New("absolute patterns are not allowed; use a path relative to the fixture root"))
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return errors.Join(ErrBadPattern, errors.New("segments '.', '..' and empty segments are not allowed"))
		}
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			return errors.Join(ErrBadPattern, errors.New("'**' must be a whole path segment"))
		}
		if _, err := path.Match(seg, ""); err != nil {
			return errors.Join(ErrBadPattern, err)
		}
	}
	return nil
}

// Match reports whether the slash path p matches the glob pattern.
func Match(pattern, p string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(p, "/"))
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(segs); i++ {
				if matchSegs(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// ProtectedPatterns can never be changed by Case, whatever the allowed paths say.
func ProtectedPatterns() []string { return []string{".git", ".git/**", "**/.git", "**/.git/**"} }

// PathPolicy decides whether Case may change a fixture path.
type PathPolicy struct {
	Allowed   []string
	Protected []string
}

// NewPathPolicy builds the policy for a contract's allowed paths.
func NewPathPolicy(allowed []string) PathPolicy {
	return PathPolicy{Allowed: allowed, Protected: ProtectedPatterns()}
}

// Check returns whether p may change and, if not, why.
func (pp PathPolicy) Check(p string) (bool, string) {
	for _, g := range pp.Protected {
		if Match(g, p) {
			return false, "protected path (matches " + g + ")"
		}
	}
	for _, g := range pp.Allowed {
		if Match(g, p) {
			return true, ""
		}
	}
	return false, "outside the allowed paths " + strings.Join(pp.Allowed, ", ")
}
