package task

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"docs/**", "docs/a.md", true},
		{"docs/**", "docs/x/y/z.md", true},
		{"docs/**", "docs", true},
		{"docs/**", "src/docs/a.md", false},
		{"docs/*.md", "docs/a.md", true},
		{"docs/*.md", "docs/x/a.md", false},
		{"**/*.go", "a/b/c.go", true},
		{"**/*.go", "c.go", true},
		{"CASE_NOTES.md", "CASE_NOTES.md", true},
		{"CASE_NOTES.md", "sub/CASE_NOTES.md", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
	}
	for _, tc := range tests {
		if got := Match(tc.pattern, tc.path); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

func TestCheckPattern(t *testing.T) {
	for _, bad := range []string{"", "/etc/**", "../x", "a/../b", "a//b", "./a", "a**", "[", "docs/**x"} {
		if err := CheckPattern(bad); err == nil {
			t.Errorf("CheckPattern(%q) accepted", bad)
		}
	}
	for _, good := range []string{"docs/**", "**", "a/*.md", "CASE_NOTES.md", "src/[ab].go"} {
		if err := CheckPattern(good); err != nil {
			t.Errorf("CheckPattern(%q): %v", good, err)
		}
	}
}

func TestPathPolicyProtectsGit(t *testing.T) {
	pp := NewPathPolicy([]string{"**"})
	for _, p := range []string{".git/config", ".git", "sub/.git/HEAD", "sub/.git"} {
		if ok, reason := pp.Check(p); ok || !strings.Contains(reason, "protected") {
			t.Errorf("Check(%q) = %v %q", p, ok, reason)
		}
	}
	if ok, _ := pp.Check("src/main.go"); !ok {
		t.Error("an allowed path was refused")
	}
	if ok, reason := NewPathPolicy([]string{"docs/**"}).Check("README.md"); ok || !strings.Contains(reason, "outside the allowed paths") {
		t.Errorf("got %v %q", ok, reason)
	}
}

func TestParseSpec(t *testing.T) {
	ok := func([]byte) error { return nil }
	s, err := Parse([]byte(`{"task":"t","allowed_paths":["docs/**"],"verification":{"command":"true","timeout_seconds":5}}`), "x", ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.CaseTimeoutSeconds != DefaultCaseTimeoutSeconds {
		t.Errorf("default case timeout not applied: %d", s.CaseTimeoutSeconds)
	}
	if _, err := Parse([]byte(`{"task":"t","allowed_paths":["../x"],"verification":{"command":"true","timeout_seconds":5}}`), "x", ok); err == nil {
		t.Error("a traversal pattern was accepted")
	}
	if _, err := Parse([]byte(`{"task":"t","allowed_paths":["a"],"verification":{"command":"true","timeout_seconds":5},"extra":1}`), "x", ok); err == nil {
		t.Error("an unknown field was accepted")
	}
	c := NewContract(s, "run", "/fixture")
	if len(c.ForbiddenActions) < len(BaseForbiddenActions()) || len(c.Evidence.RequiredEvents) != 2 {
		t.Errorf("contract %+v", c)
	}
}

func TestContractLimits(t *testing.T) {
	ok := func([]byte) error { return nil }
	s, err := Parse([]byte(`{"task":"t","allowed_paths":["a"],"verification":{"command":"true","timeout_seconds":5},"limits":{"processes":64}}`), "x", ok)
	if err != nil {
		t.Fatal(err)
	}
	c := NewContract(s, "run", "/fixture")
	d := DefaultLimits()
	if c.Limits.Processes != 64 || c.Limits.CPUSeconds != d.CPUSeconds || c.Limits.OpenFiles != d.OpenFiles {
		t.Fatalf("limits %+v", c.Limits)
	}
	if NewContract(Spec{}, "run", "/f").Limits != d {
		t.Fatal("a spec without limits does not get the defaults")
	}
}
