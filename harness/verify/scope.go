package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Scope refusal reasons. They are stable codes.
const (
	ScopeOutside    = "PATH_OUTSIDE_ALLOWED_SCOPE" // inside the fixture but not inside an allowed test path
	ScopeTraversal  = "PATH_TRAVERSAL"             // a ".." segment
	ScopeSymlink    = "SYMLINK_ESCAPE"             // a symlink leads out of the fixture (or the root itself is one)
	ScopeProtected  = "PROTECTED_PATH_VIOLATION"   // the target is, is inside, or contains a protected path
	ScopeAbsolute   = "ABSOLUTE_PATH"              // an absolute path outside the fixture
	ScopeGovernance = "GOVERNANCE_UNAVAILABLE"     // the scope itself cannot be established
)

// ScopeError is one refused test target.
type ScopeError struct {
	Reason string // one of the Scope* codes
	Target string
	Detail string
}

func (e *ScopeError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s: %q", e.Reason, e.Target)
	}
	return fmt.Sprintf("%s: %q: %s", e.Reason, e.Target, e.Detail)
}

// CheckScope checks that every target (a path as given to the test runner,
// relative to the fixture root or absolute) resolves, symlinks followed and
// cleaned, inside fixtureRoot and inside one of allowedTestPaths, and is
// neither inside nor a parent of a protected path.
//
// allowedTestPaths and protected are fixture-relative slash globs (the
// allowed-path syntax of task specs: "tests/**", "runtime/tests"); a pattern
// without glob characters also covers everything under it. An empty
// allowedTestPaths means the whole fixture. Every refused target is reported:
// the error is a *ScopeError, or several joined (errors.As finds the first).
func CheckScope(fixtureRoot string, targets []string, allowedTestPaths []string, protected []string) error {
	gov := func(target, format string, args ...any) error {
		return &ScopeError{Reason: ScopeGovernance, Target: target, Detail: fmt.Sprintf(format, args...)}
	}
	if fixtureRoot == "" || !filepath.IsAbs(fixtureRoot) {
		return gov(fixtureRoot, "the fixture root must be an absolute path")
	}
	root := filepath.Clean(fixtureRoot)
	fi, err := os.Lstat(root)
	if err != nil {
		return gov(fixtureRoot, "the fixture root cannot be resolved: %v", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &ScopeError{Reason: ScopeSymlink, Target: fixtureRoot, Detail: "the fixture root is a symlink"}
	}
	if !fi.IsDir() {
		return gov(fixtureRoot, "the fixture root is not a directory")
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return gov(fixtureRoot, "the fixture root cannot be resolved: %v", err)
	}
	for _, p := range append(append([]string(nil), allowedTestPaths...), protected...) {
		if err := task.CheckPattern(p); err != nil {
			return gov(p, "bad scope pattern: %v", err)
		}
	}
	if len(targets) == 0 {
		return gov("", "no test target could be determined")
	}
	var errs []error
	for _, t := range targets {
		if err := checkTarget(root, realRoot, t, allowedTestPaths, protected); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkTarget(root, realRoot, target string, allowed, protected []string) error {
	refuse := func(reason, format string, args ...any) error {
		return &ScopeError{Reason: reason, Target: target, Detail: fmt.Sprintf(format, args...)}
	}
	if target == "" || strings.ContainsRune(target, 0) {
		return refuse(ScopeGovernance, "the target cannot be canonicalised")
	}
	norm := strings.ReplaceAll(target, `\`, "/")
	for _, seg := range strings.Split(norm, "/") {
		if seg == ".." {
			return refuse(ScopeTraversal, "'..' is not allowed in a test target")
		}
	}
	rel := norm
	if strings.HasPrefix(norm, "/") {
		abs := filepath.Clean(norm)
		switch {
		case within(abs, root):
			rel, _ = filepath.Rel(root, abs)
		case within(abs, realRoot):
			rel, _ = filepath.Rel(realRoot, abs)
		default:
			return refuse(ScopeAbsolute, "absolute path outside the fixture")
		}
	}
	rel = path.Clean(filepath.ToSlash(rel))
	if p, ok := protectedBy(rel, protected); ok {
		return refuse(ScopeProtected, "protected by %q", p)
	}
	resolved, err := resolveInside(realRoot, rel)
	if err != nil {
		return refuse(ScopeSymlink, "%v", err)
	}
	if p, ok := protectedBy(resolved, protected); ok {
		return refuse(ScopeProtected, "resolves to %q, protected by %q", resolved, p)
	}
	if len(allowed) > 0 {
		if !allowedBy(rel, allowed) {
			return refuse(ScopeOutside, "not inside the allowed test paths %v", allowed)
		}
		if !allowedBy(resolved, allowed) {
			return refuse(ScopeOutside, "resolves to %q, outside the allowed test paths %v", resolved, allowed)
		}
	}
	return nil
}

// resolveInside follows rel below realRoot one component at a time. A
// symlink is read, never followed by the OS: its destination is worked out
// lexically and refused when it leaves the fixture, so nothing outside the
// fixture is ever stat'ed. A missing tail is kept as written. It returns the
// resolved fixture-relative slash path.
func resolveInside(realRoot, rel string) (string, error) {
	parts := strings.Split(rel, "/")
	cur := realRoot
	hops := 0
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..": // only from a symlink's destination; cur is already resolved
			cur = filepath.Dir(cur)
			if !within(cur, realRoot) {
				return "", fmt.Errorf("a symlink leads outside the fixture")
			}
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			cur = filepath.Join(append([]string{next}, parts...)...)
			break
		}
		if err != nil {
			return "", fmt.Errorf("cannot inspect %s: %v", part, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("too many levels of symlinks")
		}
		dest, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("cannot read symlink %s: %v", part, err)
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(cur, dest)
		}
		dest = filepath.Clean(dest)
		if !within(dest, realRoot) {
			return "", fmt.Errorf("symlink %s points outside the fixture, to %s", next, dest)
		}
		r, _ := filepath.Rel(realRoot, dest)
		parts = append(strings.Split(filepath.ToSlash(r), "/"), parts...)
		cur = realRoot
	}
	if !within(cur, realRoot) {
		return "", fmt.Errorf("resolves outside the fixture, to %s", cur)
	}
	r, _ := filepath.Rel(realRoot, cur)
	return filepath.ToSlash(r), nil
}

func within(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

func allowedBy(rel string, patterns []string) bool {
	for _, p := range patterns {
		if task.Match(p, rel) || task.Match(p+"/**", rel) {
			return true
		}
	}
	return false
}

// protectedBy: the target is a protected path, lies inside one, or (for
// patterns with a literal leading directory, .git excepted) contains one.
func protectedBy(rel string, patterns []string) (string, bool) {
	for _, p := range patterns {
		if task.Match(p, rel) || task.Match(p+"/**", rel) {
			return p, true
		}
		prefix := literalPrefix(p)
		if prefix == "" || prefix == ".git" || strings.HasPrefix(prefix, ".git/") {
			continue
		}
		if rel == "." || within(prefix, rel) {
			return p, true
		}
	}
	return "", false
}

// literalPrefix is the leading run of glob-free segments of a pattern.
func literalPrefix(p string) string {
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if strings.ContainsAny(s, "*?[") {
			break
		}
		segs = append(segs, s)
	}
	return strings.Join(segs, "/")
}

// Targets extracts the test targets of a verification command: the path
// operands of go test, pytest and node --test, and the scripts it runs
// (sh x.sh, ./x.sh, python3 x.py). A test runner with no path operand targets
// its working directory; a command with no recognisable runner targets the
// fixture root ("."). An operand that is only known at run time, or a Go
// import path that is not a relative directory, cannot be placed: that is an
// error, and a policy that restricts test paths must then refuse to run.
func Targets(command string) ([]string, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return nil, fmt.Errorf("the verification command cannot be parsed: %w", err)
	}
	set := map[string]bool{}
	var bad []string
	found := false
	cwd := "."
	add := func(p string) {
		if strings.HasPrefix(p, "/") {
			set[path.Clean(p)] = true
			return
		}
		set[path.Clean(cwd+"/"+p)] = true
	}
	for _, st := range f.Stmts {
		syntax.Walk(st, func(n syntax.Node) bool {
			c, ok := n.(*syntax.CallExpr)
			if !ok || len(c.Args) == 0 {
				return true
			}
			var words []string
			dynamic := false
			for _, w := range c.Args {
				s, ok := lit(w)
				if !ok {
					dynamic = true
				}
				words = append(words, s)
			}
			words = unwrapRunner(words)
			if len(words) == 0 {
				return true
			}
			name := path.Base(words[0])
			if name == "cd" && len(words) == 2 && !dynamic {
				if strings.HasPrefix(words[1], "/") {
					cwd = path.Clean(words[1])
				} else {
					cwd = path.Clean(cwd + "/" + words[1])
				}
				return true
			}
			ops, isRunner := runnerOperands(words)
			if !isRunner {
				return true
			}
			found = true
			if len(ops) == 0 {
				add(".")
			}
			for _, op := range ops {
				if op == "\x00" {
					bad = append(bad, strings.Join(words, " "))
					continue
				}
				add(op)
			}
			return true
		})
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("the test target of %q is only known at run time or is not a path", bad[0])
	}
	if !found {
		return []string{"."}, nil
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// lit resolves a word's quoting; ok is false when it holds an expansion.
func lit(w *syntax.Word) (string, bool) {
	s, ok := scan.Literal(w)
	if !ok {
		return "\x00", false
	}
	return s, true
}

func unwrapRunner(words []string) []string {
	for len(words) > 0 {
		switch path.Base(words[0]) {
		case "env", "time", "nice", "nohup", "exec", "command":
			words = words[1:]
			for len(words) > 0 && (strings.HasPrefix(words[0], "-") || strings.Contains(words[0], "=")) {
				words = words[1:]
			}
		case "timeout":
			words = words[1:]
			for len(words) > 0 && strings.HasPrefix(words[0], "-") {
				words = words[1:]
			}
			if len(words) > 0 {
				words = words[1:]
			}
		default:
			return words
		}
	}
	return words
}

// valued lists, per runner, the options that take a separate value.
var valued = map[string]map[string]bool{
	"go": set("-run", "-skip", "-count", "-timeout", "-p", "-tags", "-coverprofile", "-bench", "-benchtime", "-cpu",
		"-parallel", "-shuffle", "-o", "-exec", "-vet", "-covermode", "-coverpkg", "-blockprofile", "-cpuprofile",
		"-memprofile", "-mutexprofile", "-outputdir", "-trace", "-fuzz", "-fuzztime", "-list", "-C", "-mod", "-modfile", "-ldflags", "-gcflags"),
	"pytest": set("-k", "-m", "-p", "-c", "-o", "-W", "-n", "--rootdir", "--deselect", "--ignore", "--ignore-glob",
		"--maxfail", "--tb", "--junitxml", "--cov", "--cov-report", "--confcutdir", "--basetemp", "-r", "--durations", "--log-level"),
	"node": set("--test-name-pattern", "--test-reporter", "--test-reporter-destination", "--test-concurrency",
		"--test-timeout", "--import", "--require", "-r", "--loader", "--test-shard", "--experimental-loader"),
}

func set(xs ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// runnerOperands returns the path operands of a test runner or script
// invocation ("\x00" for one that cannot be placed); isRunner is false for
// other commands.
func runnerOperands(words []string) (ops []string, isRunner bool) {
	name := path.Base(words[0])
	args := words[1:]
	kind := ""
	switch {
	case name == "go" && len(args) > 0 && args[0] == "test":
		kind, args = "go", args[1:]
	case name == "pytest" || name == "py.test":
		kind = "pytest"
	case (name == "python" || strings.HasPrefix(name, "python3")) && len(args) >= 2 && args[0] == "-m" && args[1] == "pytest":
		kind, args = "pytest", args[2:]
	case name == "node" && contains(args, "--test"):
		kind = "node"
	case name == "sh" || name == "bash" || name == "dash" || name == "zsh" || name == "python" || strings.HasPrefix(name, "python3"):
		for _, a := range args {
			if a == "-c" || a == "-m" {
				return nil, false
			}
			if !strings.HasPrefix(a, "-") {
				return []string{a}, true
			}
		}
		return nil, false
	case strings.Contains(words[0], "/") && !strings.HasPrefix(words[0], "/"):
		// The repository's own runner (./run-tests.sh). An absolute path
		// names an installed program (/usr/bin/test), not a test target.
		return []string{words[0]}, true
	default:
		return nil, false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			if !strings.Contains(a, "=") && valued[kind][a] {
				i++
			}
			continue
		}
		switch kind {
		case "go":
			if a == "\x00" || !(strings.HasPrefix(a, ".") || strings.HasPrefix(a, "/")) {
				ops = append(ops, "\x00")
				continue
			}
			a = strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/")
			if a == "" || a == "." {
				a = "."
			}
			ops = append(ops, a)
		case "pytest":
			a, _, _ = strings.Cut(a, "::")
			ops = append(ops, a)
		default:
			ops = append(ops, a)
		}
	}
	return ops, true
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// ScopeReasons lists every scope refusal code; the report schema's enum is checked against it.
func ScopeReasons() []string {
	return []string{ScopeOutside, ScopeTraversal, ScopeSymlink, ScopeProtected, ScopeAbsolute, ScopeGovernance}
}
