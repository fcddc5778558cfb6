package sandbox

import (
	"path/filepath"
	"strings"
)

// Within says whether p is root or lies below it. Both are cleaned first, so
// a trailing slash changes nothing, and "/ab" is not within "/a". The test is
// lexical (no symlink is followed): a view's lists and a launch's arguments
// are compared as written, and a caller resolves links first when the real
// place matters. The paths are absolute; an absolute p is never within a
// relative root, nor the reverse.
func Within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// WithinAny says whether p is Within one of roots.
func WithinAny(p string, roots []string) bool {
	for _, r := range roots {
		if Within(p, r) {
			return true
		}
	}
	return false
}
