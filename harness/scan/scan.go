// Package scan inspects a verification command before it runs: the command
// string itself, and every shell or Python script it would start from inside
// the fixture, looking for operations a verification step has no business
// doing (recursive deletion outside the fixture, network access to other
// hosts, privilege escalation, writes outside the allowed roots, sending the
// environment over the network, and executing downloaded code).
//
// The shell analysis walks the syntax tree produced by mvdan.cc/sh/v3, with
// literal quoting resolved and literal variable assignments followed in order,
// so that quoting tricks, here-documents, command substitution and
// `bash -c '...'` strings are seen through. Python files get a token-level
// check. The scan is static: it can be evaded by code it cannot see (content
// produced at run time), which is why the runner also confines the process.
package scan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Severity ranks a finding. High and critical findings block execution.
type Severity string

// Severities, lowest first.
const (
	Low      Severity = "low"
	Medium   Severity = "medium"
	High     Severity = "high"
	Critical Severity = "critical"
)

// Pattern names are stable identifiers; tests, reports and fixtures use them.
const (
	PatRecursiveDelete   = "recursive-delete"            // critical: rm -r / find -delete outside the fixture
	PatDeleteUnresolved  = "recursive-delete-unresolved" // medium: recursive delete of a target that cannot be resolved
	PatNetwork           = "network"                     // high: network tool aimed at a non-loopback (or unknown) host
	PatPrivilege         = "privilege-escalation"        // critical: sudo, su, doas, pkexec, run0
	PatWriteOutside      = "write-outside"               // high: write to a path outside the fixture and roots
	PatEnvExfiltration   = "env-exfiltration"            // critical: environment dump sent to the network
	PatRemoteExec        = "remote-exec"                 // critical: downloaded content executed
	PatDynamicEval       = "dynamic-eval"                // medium: eval of content that cannot be resolved
	PatDynamicCommand    = "dynamic-command"             // low: the command name itself is computed at run time
	PatScriptOutside     = "script-outside"              // high: an invoked script resolves outside the fixture
	PatScriptMissing     = "script-missing"              // medium: an invoked script does not exist (yet)
	PatUnscannable       = "unscannable"                 // high: parse error or a scan bound was hit
	PatPyOsSystem        = "py-os-system"                // high: os.system / os.popen
	PatPySubprocessShell = "py-subprocess-shell"         // high: subprocess.*(..., shell=True)
	PatPyRmtreeAbsolute  = "py-rmtree-absolute"          // high: shutil.rmtree("/absolute")
)

// Patterns lists every pattern with its severity, for documentation and tests.
func Patterns() map[string]Severity {
	return map[string]Severity{
		PatRecursiveDelete: Critical, PatDeleteUnresolved: Medium, PatNetwork: High, PatPrivilege: Critical,
		PatWriteOutside: High, PatEnvExfiltration: Critical, PatRemoteExec: Critical, PatDynamicEval: Medium,
		PatDynamicCommand: Low, PatScriptOutside: High, PatScriptMissing: Medium, PatUnscannable: High,
		PatPyOsSystem: High, PatPySubprocessShell: High, PatPyRmtreeAbsolute: High,
	}
}

// CommandFile is the File of findings in the verification command string itself.
const CommandFile = "<command>"

// Bounds of one scan. Hitting one is itself a (blocking) finding: what was
// not read cannot be called safe.
const (
	MaxDepth      = 8               // nested scripts, -c strings, eval strings
	MaxFileBytes  = 1 << 20         // one script
	MaxTotalBytes = 8 << 20         // all scripts of one scan
	MaxFiles      = 128             // distinct script files
	maxLoopItems  = 32              // literal for-loop items expanded one by one
	maxSteps      = 50000           // statements analyzed in one scan (loop expansion multiplies them)
	maxCmdText    = 200             // bytes of source kept in Finding.Command
	wrapperLimit  = 8               // nested wrappers (env, nohup, timeout, ...)
	unknownMark   = "\x01"          // stands for a value only known at run time
	homeSentinel  = "/\x02HOME"     // $HOME and ~: outside the fixture
	scratchSent   = "/\x02SCRATCH"  // $TMPDIR, caches, mktemp: inside the scratch root
	devFdSentinel = "/dev/fd/\x02p" // process substitution
)

// Finding is one dangerous construct.
type Finding struct {
	File     string   `json:"file"` // fixture-relative script path, or CommandFile
	Line     int      `json:"line"` // 1-based line in File
	Pattern  string   `json:"pattern"`
	Command  string   `json:"command"` // the source line of the statement (trimmed, capped)
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

// Result is everything a scan established.
type Result struct {
	Findings []Finding `json:"findings"`
	Files    []string  `json:"files"` // fixture-relative paths of every script read, sorted
	// Programs are the programs the make recipes the command would run
	// start by name, each once, in the order first met: a build that
	// calls a tool the sandbox does not show (git's Makefile and cargo)
	// can be warned of before it runs.
	Programs []Program `json:"programs"`
}

// Program is a program a make recipe starts (`cargo build`, or `$(CC)`
// once make's variables give it a name), and the recipe's line.
type Program struct {
	Name string `json:"name"`
	File string `json:"file"` // the makefile, fixture-relative
	Line int    `json:"line"`
}

// Blocking reports whether any finding is high or critical.
func Blocking(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == High || f.Severity == Critical {
			return true
		}
	}
	return false
}

// ScanCommand parses command (run as `/bin/sh -c command` in fixtureRoot)
// and every script it invokes that resolves inside fixtureRoot, and returns
// the findings sorted by file, line and pattern. roots are the directories,
// besides the fixture, that the command may write to.
func ScanCommand(ctx context.Context, command, fixtureRoot string, roots []string) ([]Finding, error) {
	r, err := Scan(ctx, command, fixtureRoot, roots)
	return r.Findings, err
}

// Scan is ScanCommand that also lists the scripts it read.
func Scan(ctx context.Context, command, fixtureRoot string, roots []string) (Result, error) {
	return ScanAllowing(ctx, command, fixtureRoot, roots, nil)
}

// HostAllowed tells whether the command may reach host at run time because
// an egress policy that is enforced around it allows that host.
type HostAllowed func(host string) bool

// ScanAllowing is Scan for a command whose network is an enforced egress
// allowlist: a network tool aimed at a host the allowlist names is not a
// finding (the egress forwarder decides, per port, and records it). Hosts
// known only at run time and every other host still are.
func ScanAllowing(ctx context.Context, command, fixtureRoot string, roots []string, allowed HostAllowed) (Result, error) {
	return ScanAliased(ctx, command, fixtureRoot, roots, allowed, nil)
}

// ScanAliased is ScanAllowing for a command whose view links absolute
// paths into the fixture (a task's layout: /app to the fixture, /tests to
// a directory of it): aliases maps each such path to the host directory
// it links to, and a path under one is read and judged as that
// directory's.
func ScanAliased(ctx context.Context, command, fixtureRoot string, roots []string, allowed HostAllowed, aliases map[string]string) (Result, error) {
	s, err := newScanner(ctx, fixtureRoot, roots)
	if err != nil {
		return Result{}, err
	}
	s.allowed = allowed
	if s.aliases, err = Aliases(aliases); err != nil {
		return Result{}, err
	}
	s.shellSource(&unit{file: CommandFile, src: command, lineBase: 1}, newEnv(s.root))
	return s.result()
}

// ScanFile scans one script file (shell, or Python for *.py and python
// shebangs) as if the fixture ran it with cwd at fixtureRoot.
func ScanFile(ctx context.Context, path, fixtureRoot string, roots []string) (Result, error) {
	s, err := newScanner(ctx, fixtureRoot, roots)
	if err != nil {
		return Result{}, err
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(s.root, abs)
	}
	s.script(&unit{file: CommandFile, src: path, lineBase: 1}, nil, abs, "", newEnv(s.root))
	return s.result()
}

type scanner struct {
	ctx      context.Context
	root     string   // fixture root, absolute and clean
	realRoot string   // the same with symlinks resolved
	roots    []string // allowed write roots (absolute, clean; realpaths added)
	allowed  HostAllowed
	findings []Finding
	seen     map[string]bool
	files    map[string]bool
	total    int64
	steps    int
	makes    map[string]bool // make runs followed (makeRun.key)
	recipes  map[string]bool // recipe commands scanned: file, line, cwd and text
	programs []Program       // programs recipes start (Result.Programs)
	aliases  [][2]string     // view path, host directory it links to
}

// unalias turns a path under one of the view's links into the host path
// it reaches.
func (s *scanner) unalias(abs string) string { return Unalias(s.aliases, abs) }

// Unalias turns abs, when it lies under the view path of one of aliases
// (view path, host directory), into the host path it reaches; the
// scanner and the test-scope check read a layout's links this way.
func Unalias(aliases [][2]string, abs string) string {
	for _, a := range aliases {
		if within(abs, a[0]) {
			return a[1] + abs[len(a[0]):]
		}
	}
	return abs
}

// Aliases are a layout's links (view path to host directory) in the
// order Unalias takes them, every path absolute and clean.
func Aliases(m map[string]string) ([][2]string, error) {
	var out [][2]string
	for _, from := range slices.Sorted(maps.Keys(m)) {
		if !filepath.IsAbs(from) || !filepath.IsAbs(m[from]) {
			return nil, fmt.Errorf("scan: alias %q -> %q is not absolute", from, m[from])
		}
		out = append(out, [2]string{filepath.Clean(from), filepath.Clean(m[from])})
	}
	return out, nil
}

func newScanner(ctx context.Context, fixtureRoot string, roots []string) (*scanner, error) {
	if fixtureRoot == "" {
		return nil, errors.New("scan: empty fixture root")
	}
	root, err := filepath.Abs(fixtureRoot)
	if err != nil {
		return nil, fmt.Errorf("scan: fixture root: %w", err)
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("scan: fixture root: %w", err)
	}
	s := &scanner{ctx: ctx, root: filepath.Clean(root), realRoot: real, seen: map[string]bool{}, files: map[string]bool{},
		makes: map[string]bool{}, recipes: map[string]bool{}}
	for _, r := range roots {
		if r == "" || !filepath.IsAbs(r) {
			return nil, fmt.Errorf("scan: allowed root %q is not absolute", r)
		}
		s.roots = append(s.roots, filepath.Clean(r))
		if rr, err := filepath.EvalSymlinks(r); err == nil && rr != filepath.Clean(r) {
			s.roots = append(s.roots, rr)
		}
	}
	return s, nil
}

func (s *scanner) result() (Result, error) {
	sort.Slice(s.findings, func(i, j int) bool {
		a, b := s.findings[i], s.findings[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Pattern < b.Pattern
	})
	files := make([]string, 0, len(s.files))
	for f := range s.files {
		files = append(files, f)
	}
	sort.Strings(files)
	res := Result{Findings: s.findings, Files: files, Programs: s.programs}
	if res.Findings == nil {
		res.Findings = []Finding{}
	}
	if res.Programs == nil {
		res.Programs = []Program{}
	}
	if err := s.ctx.Err(); err != nil {
		return res, fmt.Errorf("scan interrupted: %w", err)
	}
	return res, nil
}

// add records a finding once per (file, line, pattern). Every finding
// carries the text of its line, so a reader can find what was judged.
func (s *scanner) add(u *unit, line int, pattern, command, msg string) {
	sev := Patterns()[pattern]
	if u.fixed > 0 {
		line = u.fixed
	}
	if command == "" {
		command = u.lineText(line)
	}
	key := fmt.Sprintf("%s\x00%d\x00%s", u.file, line, pattern)
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	s.findings = append(s.findings, Finding{File: u.file, Line: line, Pattern: pattern, Command: command,
		Severity: sev, Message: display(msg)})
}

// unit is one piece of source being analyzed: a file, the command string, or
// a string nested in one of them (bash -c, eval, here-document).
type unit struct {
	file     string
	src      string
	lineBase int // the line in file of the source's first line
	depth    int
	fixed    int  // when set, the line of every finding: src does not map line by line onto file
	recipe   bool // a make recipe's command, or a string nested in one
}

func (u *unit) child(src string, line int) *unit {
	return &unit{file: u.file, src: src, lineBase: line, depth: u.depth + 1, fixed: u.fixed, recipe: u.recipe}
}

// program records name as a program a make recipe starts at line of u: by
// name only (a path relative to the recipe's directory is the project's
// own), never a builtin, once per name.
func (s *scanner) program(u *unit, line int, name string) {
	if !u.recipe || name == "" || strings.Contains(name, "/") && !filepath.IsAbs(name) || slices.Contains(shellBuiltins, name) {
		return
	}
	if slices.ContainsFunc(s.programs, func(p Program) bool { return p.Name == name }) {
		return
	}
	if u.fixed > 0 {
		line = u.fixed
	}
	s.programs = append(s.programs, Program{Name: name, File: u.file, Line: line})
}

// lineText is the text of line (a line of u.file) in u.src, or the first
// line of u.src that has any text, or the file's name.
func (u *unit) lineText(line int) string {
	lines := strings.Split(u.src, "\n")
	if i := line - u.lineBase; i >= 0 && i < len(lines) {
		if t := cmdText(lines[i]); t != "" {
			return t
		}
	}
	for _, l := range lines {
		if t := cmdText(l); t != "" {
			return t
		}
	}
	return u.file
}

// location of a resolved path relative to what the command may touch.
type location int

const (
	locInside  location = iota // inside the fixture
	locAllowed                 // inside an allowed root (scratch, the harness roots)
	locDevice                  // /dev/null, /dev/stdout, ...
	locUnknown                 // cannot be told before run time
	locOutside                 // outside everything
)

// classify resolves p (a resolved word, possibly with sentinels) against cwd.
func (s *scanner) classify(p, cwd string) (location, string) {
	if p == "" {
		return locInside, p
	}
	// Only the directory part before the first glob or unknown piece is certain.
	cut := len(p)
	if i := strings.IndexAny(p, "*?["+unknownMark); i >= 0 {
		cut = i
	}
	prefix := p[:cut]
	if cut < len(p) {
		if i := strings.LastIndex(prefix, "/"); i >= 0 {
			prefix = prefix[:i+1]
		} else {
			prefix = ""
		}
		if prefix == "" && strings.HasPrefix(p[cut:], unknownMark) {
			return locUnknown, p
		}
	}
	if !strings.HasPrefix(prefix, "/") {
		if cwd == "" || strings.Contains(cwd, unknownMark) {
			if hasDotDot(prefix) {
				return locUnknown, p
			}
			return locInside, p
		}
		prefix = cwd + "/" + prefix
	}
	abs := s.unalias(filepath.Clean(prefix))
	switch {
	case abs == homeSentinel || strings.HasPrefix(abs, homeSentinel+"/"):
		return locOutside, abs
	case abs == scratchSent || strings.HasPrefix(abs, scratchSent+"/"):
		return locAllowed, abs
	case abs == "/dev/null" || abs == "/dev/stdout" || abs == "/dev/stderr" || abs == "/dev/tty" ||
		strings.HasPrefix(abs, "/dev/fd/") || strings.HasPrefix(abs, "/proc/self/fd/"):
		return locDevice, abs
	case within(abs, s.root) || within(abs, s.realRoot):
		return locInside, abs
	}
	for _, r := range s.roots {
		if within(abs, r) {
			return locAllowed, abs
		}
	}
	return locOutside, abs
}

func hasDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

func within(p, root string) bool {
	if p == root {
		return true
	}
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, root+"/")
}

// display makes sentinels readable in messages.
func display(s string) string {
	r := strings.NewReplacer(homeSentinel, "$HOME", scratchSent, "$TMPDIR", devFdSentinel, "/dev/fd/N", unknownMark, "…")
	return r.Replace(s)
}

// rel names a file for findings: relative to the fixture when inside.
func (s *scanner) rel(abs string) string {
	for _, root := range []string{s.realRoot, s.root} {
		if r, err := filepath.Rel(root, abs); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			return filepath.ToSlash(r)
		}
	}
	return abs
}

// script reads and scans one invoked script file. lang is "py", "sh" or ""
// (decided from the extension and shebang).
func (s *scanner) script(u *unit, at *stmtRef, path, lang string, e *env) {
	line, cmd := at.pos(u)
	abs := s.unalias(filepath.Clean(path))
	if !within(abs, s.root) && !within(abs, s.realRoot) {
		s.add(u, line, PatScriptOutside, cmd, fmt.Sprintf("script %s is outside the fixture and cannot be checked", abs))
		return
	}
	real, exists, err := s.resolve(abs)
	if err != nil {
		s.add(u, line, PatScriptOutside, cmd, fmt.Sprintf("script %s resolves outside the fixture: %v", s.rel(abs), err))
		return
	}
	if !exists {
		s.add(u, line, PatScriptMissing, cmd, fmt.Sprintf("script %s does not exist at scan time", s.rel(abs)))
		return
	}
	fi, err := os.Lstat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	name := s.rel(real)
	if s.files[name] {
		return // each file once; a cycle or a repeat adds nothing
	}
	switch {
	case u.depth+1 > MaxDepth:
		s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("script %s is nested deeper than %d levels", name, MaxDepth))
		return
	case fi.Size() > MaxFileBytes:
		s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("script %s is larger than %d bytes", name, MaxFileBytes))
		return
	case len(s.files) >= MaxFiles || s.total+fi.Size() > MaxTotalBytes:
		s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("script %s exceeds the scan budget (%d files, %d bytes)", name, MaxFiles, MaxTotalBytes))
		return
	}
	data, err := os.ReadFile(real)
	if err != nil {
		s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("script %s cannot be read: %v", name, err))
		return
	}
	s.files[name] = true
	s.total += int64(len(data))
	if isBinary(data) {
		return
	}
	if lang == "" {
		lang = langOf(real, data)
	}
	child := &unit{file: name, src: string(data), lineBase: 1, depth: u.depth + 1}
	if lang == "py" {
		s.python(child)
		return
	}
	s.shellSource(child, e)
}

func isBinary(data []byte) bool {
	head := data[:min(len(data), 512)]
	return strings.HasPrefix(string(head), "\x7fELF") || strings.IndexByte(string(head), 0) >= 0
}

func langOf(path string, data []byte) string {
	if strings.HasSuffix(path, ".py") {
		return "py"
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if strings.HasPrefix(first, "#!") && strings.Contains(first, "python") {
		return "py"
	}
	return "sh"
}

// resolve follows abs (lexically inside the fixture) one component at a
// time. Symlinks are read, never followed by the OS, and their destinations
// worked out lexically, so nothing outside the fixture is ever touched; a
// link leading out is an error.
func (s *scanner) resolve(abs string) (real string, exists bool, err error) {
	rel, err := filepath.Rel(s.root, abs)
	if err != nil || !within(abs, s.root) {
		if rel, err = filepath.Rel(s.realRoot, abs); err != nil {
			return "", false, err
		}
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	cur := s.realRoot
	for hops := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if cur = filepath.Dir(cur); !within(cur, s.realRoot) {
				return "", false, errors.New("a symlink leads out of it")
			}
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", false, nil
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", false, errors.New("too many levels of symlinks")
		}
		dest, err := os.Readlink(next)
		if err != nil {
			return "", false, err
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(cur, dest)
		}
		if dest = filepath.Clean(dest); !within(dest, s.realRoot) {
			return "", false, fmt.Errorf("symlink %s points to %s", s.rel(next), dest)
		}
		r, _ := filepath.Rel(s.realRoot, dest)
		parts = append(strings.Split(filepath.ToSlash(r), "/"), parts...)
		cur = s.realRoot
	}
	return cur, true, nil
}
