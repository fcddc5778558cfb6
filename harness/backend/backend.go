// Package backend is the Case adapter: it starts a Case process (the built-in
// fake or a real one) in the fixture with the task contract, reads its event
// stream, keeps its logs, and reports how it ended.
package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseevent"
	"github.com/cto-harness/cto-harness/harness/proc"
)

// EnvTaskFile names the variable that tells Case where its task contract is.
const EnvTaskFile = "CASE_TASK_FILE"

// FakeSubcommand is the hidden harness subcommand that runs the fake Case.
const FakeSubcommand = "__case-fake"

// CaseEvent is one line Case wrote on stdout.
type CaseEvent struct {
	Type ctoharness.EventType `json:"type"`
	Raw  json.RawMessage      `json:"-"`
}

// Input is one Case run.
type Input struct {
	Argv    []string
	Fixture string
	Env     []string
	Timeout time.Duration
	Stdout  *os.File // backend/case.stdout.log
	Stderr  *os.File // backend/case.stderr.log
	Events  *os.File // backend/case.events.jsonl
	LogCap  int64
	OnEvent func(CaseEvent) // called in order for each well-formed event
	// ValidateEvent checks one event line against the Case event schema
	// (typed fields per event type); a line it refuses is malformed.
	ValidateEvent func([]byte) error
	// SysProcAttr is the sandbox launcher's process attributes (nil: plain process group).
	SysProcAttr *syscall.SysProcAttr
	// Translate, when set, reads stdout as a coding agent's native stream
	// instead of case.* lines: every line goes to it, and the events it
	// returns are Case's events. No line is malformed for it.
	Translate func(line []byte) []CaseEvent
	// AfterExit, when set, is called once the process has exited; the
	// events it returns are Case's last events (an agent's translation
	// finds the files its shell commands changed only then).
	AfterExit func() []CaseEvent
	// MaxLine bounds one stdout line (0: caseevent.MaxLine); a longer line is cut.
	MaxLine int
	// ExtraFiles are passed to the launcher as fd 3, ... (closed once it started).
	ExtraFiles []*os.File
	// Limits cap the event stream (see limits.go); zero fields are unlimited.
	Limits Limits
}

// Outcome is how the Case run ended.
type Outcome struct {
	proc.Result
	Events int                           // well-formed events accepted
	Types  map[ctoharness.EventType]bool // which types appeared (a set: the stream may be long)
	// Malformed says where and why the first few malformed lines were
	// refused, for the blocker message; never what they said.
	Malformed    []string
	MalformedN   int
	StdoutInline string
	StderrInline string
	Truncated    bool
	Usage        Usage // what the event stream used, and which limit stopped Case
	// OrderViolations are breaches of the event grammar (see Grammar).
	OrderViolations []string
}

// Run starts Case and waits for it. Errors are start failures or log write
// failures; a Case that fails or times out is an Outcome, not an error.
func Run(ctx context.Context, in Input) (Outcome, error) {
	if in.LogCap == 0 {
		in.LogCap = proc.DefaultLogCap
	}
	stdout := proc.NewCappedFile(in.Stdout, in.LogCap)
	stderr := proc.NewCappedFile(in.Stderr, in.LogCap)
	var out Outcome
	var mu sync.Mutex
	ctx, stopCase := context.WithCancel(ctx)
	defer stopCase()
	lim := &limiter{Limits: in.Limits, stop: stopCase}
	var evErr error
	var grammar Grammar
	malformed := func(where string, why error) {
		out.MalformedN++
		if len(out.Malformed) < 3 {
			out.Malformed = append(out.Malformed, where+": "+why.Error())
		}
	}
	// accept takes an event whose syntax has been checked (see caseevent).
	accept := func(where string, ev CaseEvent) {
		if in.ValidateEvent != nil {
			if err := in.ValidateEvent(ev.Raw); err != nil {
				malformed(where, errors.New("its fields do not match the Case event schema"))
				return
			}
		}
		if !lim.accept(len(ev.Raw) + 1) {
			return // past a cap: Case is being stopped, the event is only counted
		}
		out.Events++
		if out.Types == nil {
			out.Types = map[ctoharness.EventType]bool{}
		}
		out.Types[ev.Type] = true
		grammar.Next(ev.Type)
		if _, err := in.Events.Write(append(bytes.TrimSpace(ev.Raw), '\n')); err != nil && evErr == nil {
			evErr = err
		}
		if in.OnEvent != nil {
			in.OnEvent(ev)
		}
	}
	translated := 0
	acceptTranslated := func(ev CaseEvent) {
		translated++
		where := fmt.Sprintf("translated event %d", translated)
		// The agent's stream is hostile too: what the harness built
		// from it is held to the same rules, its size aside.
		t, err := caseevent.Type(ev.Raw)
		if err == nil && t != ev.Type {
			err = fmt.Errorf("its line says %s, its translation %s", t, ev.Type)
		}
		if err != nil {
			malformed(where, err)
			return
		}
		accept(where, ev)
	}
	lines := &lineSplitter{max: in.MaxLine, fn: func(n int, line []byte) {
		mu.Lock()
		defer mu.Unlock()
		if in.Translate != nil {
			for _, ev := range in.Translate(line) {
				acceptTranslated(ev)
			}
			return
		}
		where := fmt.Sprintf("stdout line %d", n)
		ev, err := parseEvent(line)
		if err != nil {
			malformed(where, err)
			return
		}
		accept(where, ev)
	}}
	res, err := proc.Run(ctx, proc.Spec{Argv: in.Argv, Dir: in.Fixture, Env: in.Env, Timeout: in.Timeout,
		Stdout: teeWriter{stdout, lines}, Stderr: stderr, SysProcAttr: in.SysProcAttr, ExtraFiles: in.ExtraFiles})
	lines.flush()
	if in.AfterExit != nil {
		for _, ev := range in.AfterExit() {
			acceptTranslated(ev)
		}
	}
	out.OrderViolations = grammar.Violations()
	out.Result = res
	out.Usage = lim.Usage
	out.StdoutInline, out.Truncated = stdout.Inline()
	var t2 bool
	out.StderrInline, t2 = stderr.Inline()
	out.Truncated = out.Truncated || t2
	for _, c := range []*proc.CappedFile{stdout, stderr} {
		if cerr := c.Close(); cerr != nil && evErr == nil {
			evErr = cerr
		}
	}
	if cerr := in.Events.Close(); cerr != nil && evErr == nil {
		evErr = cerr
	}
	if err != nil {
		return out, err
	}
	if evErr != nil {
		return out, fmt.Errorf("write Case logs: %w", evErr)
	}
	return out, nil
}

// parseEvent reads one line of Case's stdout strictly (see caseevent.Parse):
// nothing decodes a line, or renders it, before it has passed.
func parseEvent(line []byte) (CaseEvent, error) {
	t, err := caseevent.Parse(line)
	if err != nil {
		return CaseEvent{}, err
	}
	return CaseEvent{Type: t, Raw: append(json.RawMessage(nil), bytes.TrimSpace(line)...)}, nil
}

// Missing returns the required Case events that never appeared.
func (o Outcome) Missing() []ctoharness.EventType {
	var miss []ctoharness.EventType
	for _, t := range ctoharness.RequiredCaseEvents() {
		if !o.Types[t] {
			miss = append(miss, t)
		}
	}
	return miss
}

type teeWriter struct {
	a *proc.CappedFile
	b *lineSplitter
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.a.Write(p)
	t.b.Write(p)
	return len(p), nil
}

// lineSplitter calls fn for each complete line with its 1-based number; an
// over-long line is cut and passed on in pieces (each will be malformed)
// rather than buffered without bound.
type lineSplitter struct {
	buf []byte
	max int
	n   int // lines ended so far
	fn  func(n int, line []byte)
}

func (l *lineSplitter) Write(p []byte) (int, error) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			if len(l.buf) > l.limit() {
				l.fn(l.n+1, l.buf)
				l.buf = l.buf[:0]
			}
			break
		}
		l.buf = append(l.buf, p[:i]...)
		l.n++
		l.fn(l.n, l.buf)
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return len(p), nil
}

func (l *lineSplitter) limit() int {
	if l.max > 0 {
		return l.max
	}
	return caseevent.MaxLine
}

func (l *lineSplitter) flush() {
	if len(bytes.TrimSpace(l.buf)) > 0 {
		l.fn(l.n+1, l.buf)
	}
	l.buf = nil
}

// Env builds Case's environment from an explicit allowlist: nothing of the
// harness's own environment passes except a PATH with no entry under the
// source (sources: its worktree, and its git directory when that is kept
// elsewhere), and HOME, TMPDIR and caches point into the scratch root.
func Env(scratch, taskFile, hostPath string, sources ...string) []string {
	var keep []string
	for _, p := range filepath.SplitList(hostPath) {
		if p == "" || !filepath.IsAbs(p) || slices.ContainsFunc(sources, func(s string) bool { return s != "" && within(p, s) }) {
			continue
		}
		keep = append(keep, p)
	}
	if len(keep) == 0 {
		keep = []string{"/usr/local/bin", "/usr/bin", "/bin"}
	}
	env := []string{
		"PATH=" + strings.Join(keep, string(filepath.ListSeparator)),
		"HOME=" + filepath.Join(scratch, "home"),
		"TMPDIR=" + filepath.Join(scratch, "tmp"),
		"XDG_CACHE_HOME=" + filepath.Join(scratch, "cache"),
		"GOCACHE=" + filepath.Join(scratch, "cache", "go-build"),
		"GOPATH=" + filepath.Join(scratch, "go"),
		"LANG=C.UTF-8",
	}
	if taskFile != "" {
		env = append(env, EnvTaskFile+"="+taskFile)
	}
	sort.Strings(env)
	return env
}

// EnvKeys lists the variable names of env, for the report.
func EnvKeys(env []string) []string {
	keys := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return keys
}

// ReplaceEnv is env with each of set's variables in place of the one env
// already has. Appending would leave two GOCACHE entries, and exec keeps
// whichever sorts last: the scratch's, when the host's cache path sorts
// first, so every command compiled from a cold cache.
func ReplaceEnv(env, set []string) []string {
	drop := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	out = append(out, set...)
	sort.Strings(out)
	return out
}

// EnvValue is key's value in env (KEY=VALUE pairs).
func EnvValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// ScratchDirs are created before Case starts so HOME and TMPDIR exist.
func ScratchDirs(scratch string) []string {
	return []string{filepath.Join(scratch, "home"), filepath.Join(scratch, "tmp"), filepath.Join(scratch, "cache"), filepath.Join(scratch, "go")}
}

func within(p, root string) bool {
	if root == "" {
		return false
	}
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
