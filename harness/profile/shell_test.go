package profile

import "testing"

func TestShellString(t *testing.T) {
	for _, c := range []struct {
		file string
		argv []string
		want string
		ok   bool
	}{
		{"/bin/bash", []string{"bash", "-lc", "go test ./..."}, "go test ./...", true},
		{"/usr/bin/sh", []string{"sh", "-c", "echo hi", "arg0"}, "echo hi", true},
		{"/bin/zsh", []string{"zsh", "-o", "pipefail", "-ec", "make test"}, "make test", true},
		{"/bin/bash", []string{"bash", "--login", "-c", "--", "ls"}, "ls", true},
		{"", []string{"-bash", "-c", "true"}, "true", true},
		{"/bin/sh", []string{"sh", "scripts/check.sh"}, "", false},
		{"/bin/sh", []string{"sh", "-e"}, "", false},
		{"/usr/bin/python3", []string{"python3", "-c", "print(1)"}, "", false},
		{"/bin/bash", nil, "", false},
	} {
		got, ok := ShellString(c.file, c.argv)
		if got != c.want || ok != c.ok {
			t.Errorf("ShellString(%q, %q) = %q, %v; want %q, %v", c.file, c.argv, got, ok, c.want, c.ok)
		}
	}
}

// A command inside a shell's -c string is classified as itself.
func TestClassifiersLookInsideShells(t *testing.T) {
	if !IsTest(`bash -lc 'go test ./...'`) || !IsTest(`sh -c "bash -c 'pytest -q'"`) {
		t.Error("a test inside sh -c is not a test")
	}
	if !IsInstall(`/bin/sh -c 'pip install requests'`) {
		t.Error("an install inside sh -c is not an install")
	}
	if IsTest(`bash -lc 'echo go test'`) {
		t.Error("an echo is a test")
	}
	c := NewCounter(mustLookup(t, "fast"), "sh scripts/check.sh")
	for i := 0; i < 3; i++ {
		if ok, why := c.Command("sh scripts/check.sh"); !ok {
			t.Fatalf("run %d refused: %s", i, why)
		}
	}
	if ok, why := c.Command(" sh scripts/check.sh "); ok || why[:len(ReasonTests)] != ReasonTests {
		t.Errorf("a fourth verification run: %v %q", ok, why)
	}
	if !c.IsTest(`bash -lc 'sh  scripts/check.sh'`) || c.IsTest("sh scripts/build.sh") {
		t.Error("the verification command behind bash -lc is not a test, or another script is")
	}
	if u := c.Usage(); u.Tests != 3 || u.Refused != 1 {
		t.Errorf("usage %+v", u)
	}
}

func mustLookup(t *testing.T, name string) Policy {
	t.Helper()
	p, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
