// Package htmlreport renders report.html: one self-contained page (inline
// CSS, no script, no network) that shows a run to a person. The page is a
// pure function of report.json (without its digests) and the run's other
// artifacts, so a validator can render it again and compare byte for byte.
package htmlreport

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseevent"
	"github.com/cto-harness/cto-harness/harness/display"
)

// FileName is the page's name inside the run directory.
const FileName = "report.html"

// Caps keep the page readable and its size bounded whatever the run produced.
const (
	maxFileRead    = 4 << 20  // bytes read from any one artifact
	maxProofRead   = 64 << 20 // bytes of a source proof counted (about 300k files)
	maxEvents      = 3000     // timeline rows
	maxDiffLines   = 20000    // diff lines over all files
	maxTableRows   = 1000     // network log rows, differences
	maxValueRunes  = 400      // a value shown inline in a table cell
	testLogHead    = 40       // lines shown from the start of test.log
	testLogTail    = 160      // and from its end
	maxCaseMessage = 8000     // runes of one conversation message
	// maxReportDepth bounds report.json's nesting (the harness writes a
	// few levels); flatten walks what it is given, so a deeper (forged)
	// report is refused before anything decodes it.
	maxReportDepth = 64
)

//go:embed page.html.tmpl page.css
var assets embed.FS

// pageTmpl is parsed on first use, not at start-up: every process the
// harness binary starts (the sandbox launcher, the fake Case) would pay for
// it otherwise.
var pageTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page.html.tmpl").Funcs(template.FuncMap{
		"add": func(a, b int) int { return a + b },
		"usd": func(c *float64) string {
			if c == nil {
				return "unknown"
			}
			return fmt.Sprintf("$%.4f", *c)
		},
		"css": func() template.CSS {
			b, _ := assets.ReadFile("page.css")
			return template.CSS(b)
		},
	}).ParseFS(assets, "page.html.tmpl"))
})

// Render builds the page from report.json's bytes and the run directory.
// artifact_digests is ignored: the page is written before the digests are
// computed, and the digests cover it.
func Render(reportJSON []byte, dir string) ([]byte, error) {
	if err := caseevent.Check(reportJSON, maxReportDepth); err != nil {
		return nil, fmt.Errorf("render %s: report: %w", FileName, err)
	}
	var rep ctoharness.Report
	if err := json.Unmarshal(reportJSON, &rep); err != nil {
		return nil, fmt.Errorf("render %s: decode report: %w", FileName, err)
	}
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(reportJSON, &extra); err != nil {
		return nil, fmt.Errorf("render %s: decode report: %w", FileName, err)
	}
	p := build(&rep, extra, dir)
	var b bytes.Buffer
	if err := pageTmpl().Execute(&b, p); err != nil {
		return nil, fmt.Errorf("render %s: %w", FileName, err)
	}
	// html/template neutralizes markup, not characters that reorder or hide
	// text: a U+202E in a file name or a diff line is marked where it stands.
	return display.MarkHTML(b.Bytes()), nil
}

// RenderReport renders from the in-memory report, by way of its JSON so that
// the result is exactly what Render gives for report.json later.
func RenderReport(rep *ctoharness.Report, dir string) ([]byte, error) {
	data, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("render %s: encode report: %w", FileName, err)
	}
	return Render(data, dir)
}

// page is everything the template shows.
type page struct {
	R            *ctoharness.Report
	StatusClass  string
	Lane         string
	Started      string
	Finished     string
	Duration     string
	Signed       string
	Sandbox      string
	SandboxShort string // for the header: the full list is in the sandbox section
	Blockers     []blockerView
	Notes        []string // artifacts that could not be read, caps that cut content
	Origin       originView
	// Failing is what failed in the verification, shown under the verdict
	// (nil when nothing failed).
	Failing *failingView

	Agent    *agentView
	Task     *taskView
	Timeline []eventView
	Talk     []turnView
	Files    []fileView
	DiffCut  bool
	// FilesMore counts the changed files past ctoharness.MaxFilesShown,
	// FilesOutside those of them outside the allowed paths.
	FilesMore, FilesOutside int
	Proofs                  proofView
	Network                 netView
	Views                   []viewSection
	Tests                   testsView
	// AdversaryLog is an excerpt of adversary.log: the adversary's
	// output, an agent's conversation in its own stream format.
	AdversaryLog    string
	AdversaryLogCut int
	// Claims are Case's claims as the adversary got them (claims.json).
	Claims []claim
}

// claim is one of Case's claims: what it says its change does, and where.
type claim struct {
	Claim string   `json:"claim"`
	Paths []string `json:"paths"`
}

type kv struct{ K, V string }

// agentView is the coding agent's summary: who, where, and what it spent,
// request by request.
type agentView struct {
	A *ctoharness.AgentRecord
	// StreamHere says the run directory holds the agent's stream: a run
	// blocked before the agent started has none to link to.
	StreamHere bool
	Cost       string
	Requests   []requestView
	More       int // requests past the report's list (model-requests.jsonl has them)
}

type requestView struct {
	ctoharness.ModelRequest
	At     string
	Status string
}

func newAgentView(a *ctoharness.AgentRecord) *agentView {
	v := &agentView{A: a, Cost: "not reported"}
	u := a.Usage
	if u == nil {
		return v
	}
	if u.CostUSD != nil {
		v.Cost = fmt.Sprintf("$%.4f (%s)", *u.CostUSD, strings.ReplaceAll(string(u.CostSource), "_", " "))
	}
	for _, q := range u.PerRequest {
		st := fmt.Sprint(q.Status)
		if q.Status == 0 {
			st = "no answer"
		}
		v.Requests = append(v.Requests, requestView{ModelRequest: q, At: stamp(q.At), Status: st})
	}
	v.More = u.Requests - len(u.PerRequest)
	return v
}

type blockerView struct {
	ctoharness.Blocker
	Event int // seq of its run_blocked event, 0 when none
}

func build(rep *ctoharness.Report, extra map[string]json.RawMessage, dir string) *page {
	p := &page{R: rep, StatusClass: statusClass(rep.Status), Lane: string(rep.CaseLane)}
	p.Started = stamp(rep.Freshness.StartedAt)
	p.Finished = stamp(rep.Freshness.FinishedAt)
	if !rep.Freshness.StartedAt.IsZero() && !rep.Freshness.FinishedAt.IsZero() {
		p.Duration = dur(rep.Freshness.FinishedAt.Sub(rep.Freshness.StartedAt))
	}
	p.Signed = signed(extra)
	p.Sandbox = sandboxStrength(rep.Sandbox)
	p.SandboxShort = p.Sandbox
	if rep.Sandbox.Enforced && !rep.Sandbox.Unsandboxed {
		p.SandboxShort = fmt.Sprintf("enforced (%d mechanisms", len(rep.Sandbox.Mechanisms))
		if rep.Sandbox.LandlockABI > 0 {
			p.SandboxShort += fmt.Sprintf(", Landlock ABI %d", rep.Sandbox.LandlockABI)
		}
		p.SandboxShort += ")"
	}
	if rep.Agent != nil {
		p.Agent = newAgentView(rep.Agent)
		p.Lane += " / agent " + rep.Agent.Name
	}
	r := reader{dir: dir, notes: &p.Notes}
	p.Origin = origin(rep)
	if p.Agent != nil {
		p.Agent.StreamHere = r.exists(rep.Agent.StreamPath)
	}
	events := r.events()
	if p.Agent == nil {
		// Without report.agent, the agent Case named itself in case.started.
		for _, e := range events {
			if e.Type == ctoharness.EvCaseStarted {
				if name := field(e.Data, "agent"); name != "" {
					p.Lane += " / agent " + name
					if model := field(e.Data, "model"); model != "" {
						p.Lane += " (" + model + ")"
					}
				}
				break
			}
		}
	}
	for _, b := range rep.Blockers {
		p.Blockers = append(p.Blockers, blockerView{Blocker: b, Event: blockedEvent(events, b)})
	}
	p.Task = r.task()
	p.Timeline = timeline(events, &p.Notes)
	p.Talk = conversation(events)
	for i := range p.Talk {
		p.Talk[i].LogHere = p.Talk[i].Log != "" && r.exists(p.Talk[i].Log)
	}
	p.Files, p.DiffCut, p.FilesMore = files(r.text("patch.diff"), rep.ChangedFiles)
	_, p.FilesOutside = ctoharness.FilesNotShown(rep.ChangedFiles)
	p.Proofs = r.proofs()
	p.Network = r.network(extra["network"])
	p.Views = sandboxViews(extra["sandbox"])
	p.Tests = r.tests(rep)
	p.Failing = r.failing(rep, p.Tests.LogName)
	if a := rep.Adversarial; a != nil && a.Log != "" && !strings.Contains(a.Log, "..") && !strings.HasPrefix(a.Log, "/") {
		p.AdversaryLog, p.AdversaryLogCut = r.excerpt(a.Log)
	}
	if a := rep.Adversarial; a != nil && a.ClaimsArtifact != "" && !strings.Contains(a.ClaimsArtifact, "..") && !strings.HasPrefix(a.ClaimsArtifact, "/") {
		var c struct {
			Claims []claim `json:"claims"`
		}
		if r.json(a.ClaimsArtifact, &c) {
			p.Claims = c.Claims
		}
	}
	return p
}

// originView is the repository and commit the run was made from, for the
// header: the commit short, in full in its title.
type originView struct {
	Repo   string
	What   string // "base commit" (the task's or --rev) or "HEAD"
	Commit string
	Short  string
}

func origin(rep *ctoharness.Report) originView {
	o := originView{Repo: rep.SourcePath, What: "base commit", Commit: rep.Commits.BaseCommit}
	if o.Commit == "" {
		o.What, o.Commit = "HEAD", rep.Commits.SourceHead
	}
	o.Short = o.Commit
	if len(o.Short) > 12 {
		o.Short = o.Short[:12]
	}
	return o
}

func statusClass(s ctoharness.Status) string {
	switch s {
	case ctoharness.StatusPass:
		return "pass"
	case "":
		return "unknown"
	}
	return "blocked"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "(none)"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// dur prints a duration for people: milliseconds below a second, else seconds.
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// signed reads the report's optional signature fields; without them the run
// is shown as not signed, so no reader mistakes it for an attested run.
func signed(extra map[string]json.RawMessage) string {
	raw, ok := extra["signed"]
	if !ok {
		return "not signed"
	}
	var v bool
	if json.Unmarshal(raw, &v) != nil || !v {
		return "not signed"
	}
	if id := strings.Trim(string(extra["signing_key_id"]), `"`); id != "" && id != "null" {
		return "signed (key " + id + "; attestation.dsse.json)"
	}
	return "signed (attestation.dsse.json)"
}

func sandboxStrength(s ctoharness.SandboxRecord) string {
	switch {
	case s.Unsandboxed:
		return "none: run with --unsandboxed"
	case s.Enforced:
		m := strings.Join(s.Mechanisms, ", ")
		if s.LandlockABI > 0 {
			m += fmt.Sprintf(" (Landlock ABI %d)", s.LandlockABI)
		}
		return "enforced: " + m
	case s.NotEnforcedReason != "":
		return "not enforced: " + s.NotEnforcedReason
	}
	return "not enforced (no sandboxed process ran)"
}

func blockedEvent(events []ctoharness.Event, b ctoharness.Blocker) int {
	for _, e := range events {
		if e.Type != ctoharness.EvRunBlocked {
			continue
		}
		var got ctoharness.Blocker
		if json.Unmarshal(e.Data, &got) == nil && got.Code == b.Code && got.Step == b.Step {
			return e.Seq
		}
	}
	return 0
}

// reader reads artifacts, turning every problem into a note on the page:
// a page about a broken run must still render.
type reader struct {
	dir   string
	notes *[]string
}

func (r reader) path(name string) string { return filepath.Join(r.dir, filepath.FromSlash(name)) }

// read returns up to maxFileRead bytes of an artifact; ok is false when it is absent.
func (r reader) read(name string) ([]byte, bool) { return r.readUpTo(name, maxFileRead) }

// readUpTo is read with another bound: a source proof is counted, not
// shown, and lists every file of the source.
func (r reader) readUpTo(name string, maxFileRead int) ([]byte, bool) {
	f, err := os.Open(r.path(name))
	if err != nil {
		if !os.IsNotExist(err) {
			*r.notes = append(*r.notes, fmt.Sprintf("%s could not be read: %v", name, err))
		}
		return nil, false
	}
	defer f.Close()
	// Sized from the file's length: growing by appending made and cleared
	// a slice per doubling, most of the cost of reading a large proof.
	want := int64(maxFileRead + 1)
	if st, err := f.Stat(); err == nil && st.Size() < want {
		want = st.Size()
	}
	var b bytes.Buffer
	b.Grow(int(want) + bytes.MinRead)
	_, err = b.ReadFrom(io.LimitReader(f, int64(maxFileRead)+1))
	buf := b.Bytes()
	if err != nil {
		*r.notes = append(*r.notes, fmt.Sprintf("%s could not be read to the end: %v", name, err))
	}
	if len(buf) > maxFileRead {
		*r.notes = append(*r.notes, fmt.Sprintf("%s is larger than %d MiB; only its start is shown", name, maxFileRead>>20))
		buf = buf[:maxFileRead]
	}
	return buf, true
}

func (r reader) text(name string) string {
	b, _ := r.read(name)
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func (r reader) json(name string, v any) bool {
	b, ok := r.read(name)
	return ok && r.decode(name, b, v)
}

// decode decodes the artifact name's bytes b into v; a failure is a note.
func (r reader) decode(name string, b []byte, v any) bool {
	if err := json.Unmarshal(b, v); err != nil {
		*r.notes = append(*r.notes, fmt.Sprintf("%s is not valid JSON: %v", name, err))
		return false
	}
	return true
}

// events reads the event log up to its first bad line. Each line passes the
// same depth and key check as Case's events at ingest before it is decoded:
// the page walks event data (flatten, scalar), and must not do so on a
// nesting Case or a forger chose.
func (r reader) events() []ctoharness.Event {
	var out []ctoharness.Event
	for i, line := range lines(r.text("events.normalized.jsonl")) {
		if err := caseevent.Check([]byte(line), caseevent.MaxEnvelopedDepth); err != nil {
			*r.notes = append(*r.notes, fmt.Sprintf("events.normalized.jsonl line %d is not an event: %v", i+1, err))
			break
		}
		var e ctoharness.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			*r.notes = append(*r.notes, fmt.Sprintf("events.normalized.jsonl line %d is not an event: %v", i+1, err))
			break
		}
		out = append(out, e)
	}
	return out
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// taskView is the contract Case received.
type taskView struct {
	Task      string
	Allowed   []string
	Forbidden []string
	Command   string
}

func (r reader) task() *taskView {
	var c struct {
		Task         string   `json:"task"`
		AllowedPaths []string `json:"allowed_paths"`
		Forbidden    []string `json:"forbidden_actions"`
		Verification struct {
			Command string `json:"command"`
		} `json:"verification"`
	}
	if !r.json("task.json", &c) {
		return nil
	}
	return &taskView{Task: c.Task, Allowed: c.AllowedPaths, Forbidden: c.Forbidden, Command: c.Verification.Command}
}

// flatten turns any JSON value into dotted key/value rows, sorted, so a
// field the page does not know yet is still shown.
func flatten(raw json.RawMessage, prefix string) []kv {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return []kv{{prefix, clip(string(raw))}}
	}
	var out []kv
	var walk func(string, any)
	walk = func(k string, v any) {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for key := range t {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			for _, key := range keys {
				walk(join(k, key), t[key])
			}
		default:
			out = append(out, kv{k, scalar(v)})
		}
	}
	walk(prefix, v)
	return out
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// scalar prints a JSON value compactly; arrays of scalars become a list.
func scalar(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return clip(t)
	case []any:
		if len(t) == 0 {
			return "[]"
		}
		parts := make([]string, 0, len(t))
		simple := true
		for _, e := range t {
			switch e.(type) {
			case map[string]any, []any:
				simple = false
			}
			parts = append(parts, scalar(e))
		}
		if simple {
			return clip(strings.Join(parts, ", "))
		}
	}
	b, _ := json.Marshal(v)
	return clip(string(b))
}

func clip(s string) string {
	r := []rune(s)
	if len(r) <= maxValueRunes {
		return s
	}
	return string(r[:maxValueRunes]) + fmt.Sprintf("… (%d more characters)", len(r)-maxValueRunes)
}

func field(raw json.RawMessage, name string) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	if s, ok := m[name].(string); ok {
		return s
	}
	return ""
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }
