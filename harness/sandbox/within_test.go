package sandbox_test

import (
	"testing"

	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// Within is lexical and cleans both sides: a sibling sharing a prefix is not
// inside, trailing slashes and dot segments change nothing, "/" holds every
// absolute path, and a path is within itself.
func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, root string
		want    bool
	}{
		{"/a", "/a", true},
		{"/a/b", "/a", true},
		{"/a/b/c", "/a", true},
		{"/ab", "/a", false},
		{"/a-b", "/a", false},
		{"/a", "/a/b", false},
		{"/a/", "/a", true},
		{"/a", "/a/", true},
		{"/a/b/", "/a/", true},
		{"/ab/", "/a/", false},
		{"/", "/", true},
		{"/a", "/", true},
		{"/a/b", "/", true},
		{"/", "/a", false},
		{"/a/./b", "/a", true},
		{"/a/../b", "/a", false},
		{"/a/..b", "/a", true},
		{"/..a", "/a", false},
		{"/b", "/a", false},
		{"a/b", "/a", false},
		{"/a/b", "a", false},
	} {
		if got := sandbox.Within(tc.p, tc.root); got != tc.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tc.p, tc.root, got, tc.want)
		}
	}
}

// WithinAny holds when one root holds p, and never for no roots.
func TestWithinAny(t *testing.T) {
	for _, tc := range []struct {
		p     string
		roots []string
		want  bool
	}{
		{"/a/b/c", []string{"/x", "/a/b"}, true},
		{"/a/b", []string{"/a/b"}, true},
		{"/a/bc", []string{"/a/b"}, false},
		{"/a/bc", []string{"/a/b", "/a/b/"}, false},
		{"/a/bc", []string{"/a/b", "/"}, true},
		{"/a", nil, false},
		{"/a", []string{}, false},
	} {
		if got := sandbox.WithinAny(tc.p, tc.roots); got != tc.want {
			t.Errorf("WithinAny(%q, %q) = %v, want %v", tc.p, tc.roots, got, tc.want)
		}
	}
}
