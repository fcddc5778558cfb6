package gitstatus

import "testing"

// TestWildmatch pins git's wildmatch semantics where Go's path.Match
// differs: negated classes, "**", POSIX classes and escapes.
func TestWildmatch(t *testing.T) {
	tests := []struct {
		pattern, text string
		pathname      bool
		want          bool
	}{
		{"foo", "foo", true, true},
		{"bar", "foo", true, false},
		{"*", "foo", true, true},
		{"f*", "foo", true, true},
		{"*f", "foo", true, false},
		{"*foo*", "foo", true, true},
		{"???", "foo", true, true},
		{"??", "foo", true, false},
		{"[abc]", "a", true, true},
		{"[!abc]", "a", true, false},
		{"[!abc]", "d", true, true},
		{"[^abc]", "d", true, true},
		{"[!a]*.tmp", "b1.tmp", false, true},
		{"[!a]*.tmp", "a1.tmp", false, false},
		{"foo/*", "foo/bar", true, true},
		{"foo/*", "foo/bar/baz", true, false},
		{"foo/*", "foo/bar/baz", false, true},
		{"foo/**", "foo/bar/baz", true, true},
		{"**/foo", "foo", true, true},
		{"**/foo", "x/y/foo", true, true},
		{"a/**/b", "a/b", true, true},
		{"a/**/b", "a/x/y/b", true, true},
		{"a**b", "a/b", true, false},
		{"a**b", "axyb", true, true},
		{"[[:digit:]]", "5", true, true},
		{"[[:digit:]]", "a", true, false},
		{"[[:alpha:][:digit:]]", "z", true, true},
		{"[a-c]", "b", true, true},
		{"[a-c]", "d", true, false},
		{"[]]", "]", true, true},
		{"[!]]", "a", true, true},
		{"[!]]", "]", true, false},
		{"\\*", "*", true, true},
		{"\\*", "a", true, false},
		{"*/foo", "a/foo", true, true},
		{"*/foo", "a/b/foo", true, false},
		{"[/]", "/", true, false},
		{"a?b", "a/b", true, false},
		{"a?b", "a/b", false, true},
		{"[[:bogus:]]", "b", true, false},
		{"[a-", "a", true, false},
	}
	for _, tc := range tests {
		if got := wildmatch(tc.pattern, tc.text, tc.pathname); got != tc.want {
			t.Errorf("wildmatch(%q, %q, pathname=%v) = %v, want %v", tc.pattern, tc.text, tc.pathname, got, tc.want)
		}
	}
}
