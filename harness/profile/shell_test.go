package profile

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

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

func mustLookup(t testing.TB, name string) Policy {
	t.Helper()
	p, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// agentWrappers are the four agents' real exec calls for one shell command,
// `sh scripts/check.sh # run 1` (the sample task's verification), captured
// from the exec watch with each pinned agent against the scripted model
// server: path then argv. Codex's is a launcher (/proc/self/exe, its own
// binary, as a set-up helper) around a 38 KiB script whose last line runs
// the command; claude-code's ends in `eval '…'`; gemini-cli's runs it in a
// subshell; qwen-code's is a plain bash -c.
func agentWrappers(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("testdata/wrappers.json")
	if err != nil {
		t.Fatal(err)
	}
	var w map[string][]string
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestAgentWrappersCountAsTests(t *testing.T) {
	const verify = "sh scripts/check.sh"
	for name, call := range agentWrappers(t) {
		t.Run(name, func(t *testing.T) {
			outer, script, ok := Launched(call[0], call[1:])
			if !ok {
				t.Fatalf("no shell call found in %.200q", call)
			}
			line := script
			if len(outer) > 0 {
				line = strings.Join(outer, " ") + "\n" + script
			}
			c := NewCounter(mustLookup(t, "agent"), verify)
			cl := c.Classify(line)
			if !cl.Test || cl.Unknown || cl.Heavy || cl.Install {
				t.Errorf("class %+v, want a test run (and nothing else)", cl)
			}
			if ok, why := c.Command(line); !ok {
				t.Fatalf("refused: %s", why)
			}
			if u := c.Usage(); u.Tests != 1 || u.Used != 1 {
				t.Errorf("usage %+v, want one test run costing 1", u)
			}
			// The same wrapper around another command is not a test run.
			other := strings.ReplaceAll(line, verify, "sh scripts/build.sh")
			if c.Classify(other).Test {
				t.Errorf("the wrapper around another script is a test run")
			}
			// Around go test it is one, recognised by itself.
			if !Classify(strings.ReplaceAll(line, verify, "cd src && go test ./...")).Test {
				t.Errorf("the wrapper around `cd src && go test ./...` is not a test run")
			}
		})
	}
}

// Every simple command in a script is classified, wherever it sits.
func TestClassifyEverySimpleCommand(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want Class
	}{
		{"cd x && go test ./...", Class{Test: true}},
		{"echo start; go vet ./... ; go test -race ./...", Class{Test: true, Heavy: true}},
		{"go test ./... 2>&1 | tail -n 20", Class{Test: true}},
		{"(cd pkg; pytest -q) || true", Class{Test: true}},
		{"{ make test; }", Class{Test: true}},
		{"exec go test ./...", Class{Test: true}},
		{"if true; then\n  npm test\nfi", Class{Test: true}},
		{"for d in a b; do (cd $d && cargo test); done", Class{Test: true}},
		{"eval 'go test ./...'", Class{Test: true}},
		{`bash -lc "cd x && bash -c 'pip install flask'"`, Class{Heavy: true, Install: true}},
		{"x=$(go test ./...)", Class{Test: true}},
		{"echo go test; printf 'pytest'", Class{}},
		{"ls -la && cat README.md", Class{}},
	} {
		if got := Classify(c.cmd); got != c.want {
			t.Errorf("Classify(%q) = %+v, want %+v", c.cmd, got, c.want)
		}
	}
}

// A script over MaxScript is not parsed: it is Unknown, which the budgets
// count as a heavy test run.
func TestUnknownCountsAsTheMostExpensive(t *testing.T) {
	long := "echo hi; " + strings.Repeat("true; ", MaxScript/6) + "ls"
	if cl := Classify(long); cl != Unknown() {
		t.Fatalf("a %d-byte script: %+v, want Unknown", len(long), cl)
	}
	p := mustLookup(t, "agent")
	c := NewCounter(p)
	for i := 0; i < p.MaxHeavy; i++ {
		if ok, why := c.Command(long); !ok {
			t.Fatalf("unknown command %d refused: %s", i+1, why)
		}
	}
	u := c.Usage()
	if u.Heavy != p.MaxHeavy || u.Tests != p.MaxHeavy || u.Used != p.MaxHeavy*p.HeavyWeight {
		t.Errorf("usage %+v after %d unknown commands", u, p.MaxHeavy)
	}
	ok, why := c.Command(long)
	if ok || !strings.HasPrefix(why, ReasonHeavy) || !strings.Contains(why, "could not be read whole") || len(why) > 1024 {
		t.Errorf("one more unknown command: %v %q", ok, why)
	}
}

func TestLaunched(t *testing.T) {
	for _, c := range []struct {
		file   string
		argv   []string
		outer  []string
		script string
		ok     bool
	}{
		{"/bin/bash", []string{"bash", "-c", "ls"}, nil, "ls", true},
		{"/proc/self/exe", []string{"/proc/self/exe", "--setup", "3", "/bin/bash", "/bin/bash", "-c", "go test"},
			[]string{"/proc/self/exe", "--setup", "3", "/bin/bash"}, "go test", true},
		{"/usr/bin/find", []string{"find", ".", "-exec", "sh", "-c", "go test", ";"}, []string{"find", ".", "-exec"}, "go test", true},
		{"/usr/bin/git", []string{"git", "commit", "-m", "bash"}, nil, "", false},
		{"/usr/bin/env", []string{"env"}, nil, "", false},
	} {
		outer, script, ok := Launched(c.file, c.argv)
		if !slices.Equal(outer, c.outer) || script != c.script || ok != c.ok {
			t.Errorf("Launched(%q, %q) = %q, %q, %v; want %q, %q, %v", c.file, c.argv, outer, script, ok, c.outer, c.script, c.ok)
		}
	}
}

// The exec watch classifies a command while the agent waits on its exec:
// codex's 38 KiB wrapper is parsed once per command.
func BenchmarkClassifyCodexWrapper(b *testing.B) {
	data, err := os.ReadFile("testdata/wrappers.json")
	if err != nil {
		b.Fatal(err)
	}
	var w map[string][]string
	if err := json.Unmarshal(data, &w); err != nil {
		b.Fatal(err)
	}
	call := w["codex"]
	outer, script, _ := Launched(call[0], call[1:])
	line := strings.Join(outer, " ") + "\n" + script
	c := NewCounter(mustLookup(b, "agent"), "sh scripts/check.sh")
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if !c.Classify(line).Test {
			b.Fatal("not a test run")
		}
	}
}
