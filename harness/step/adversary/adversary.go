// Package adversary judges what a task's adversary wrote: a second party,
// kept apart from Case, that writes tests against the task and the result.
// Its files are screened before anything runs (a test that mocks the
// process, socket or HTTP layer it should exercise proves nothing, and is
// excluded with the reason); its tests then run on the baseline and on the
// result, and only a test that fails on the baseline counts: it tells the
// change from no change. A counted test that fails on the result fails the
// run. The adversary only reports: nothing it writes reaches the result.
package adversary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseworld"
	"github.com/cto-harness/cto-harness/harness/testresults"
)

// Env names what the adversary's command is told (docs/adversarial.md).
const (
	EnvTask     = "ADVERSARY_TASK"      // the task text
	EnvCheckout = "ADVERSARY_CHECKOUT"  // a read-only checkout of the result
	EnvTestsDir = "ADVERSARY_TESTS_DIR" // where it writes its tests (its working directory)
	EnvClaims   = "ADVERSARY_CLAIMS"    // Case's claims (claims.json), when Case gave any
	EnvDiff     = "ADVERSARY_DIFF"      // Case's diff (patch.diff), when the task shows it
)

// mocks are the conservative matches of a test that replaces what it
// should exercise: the process, socket and HTTP layers.
var mocks = map[string][]*regexp.Regexp{
	".py": {
		regexp.MustCompile(`(patch|patch\.object|setattr)\(\s*['"]?(subprocess|os\.system|os\.popen|os\.exec|socket|requests|urllib|http\.client|httpx|aiohttp)\b`),
		regexp.MustCompile(`\b(subprocess|socket|requests|urllib\.request|httpx)\.\w+\s*=[^=]`),
		regexp.MustCompile(`\bos\.(system|popen)\s*=[^=]`),
		regexp.MustCompile(`\b(responses|httpretty|requests_mock|respx)\b`),
	},
	".js":  jsMocks,
	".ts":  jsMocks,
	".mjs": jsMocks,
	".cjs": jsMocks,
	".go": {
		regexp.MustCompile(`\bexec(Command)?\s*=\s*func\b`),
		regexp.MustCompile(`\bhttptest\.NewServer\b`),
	},
}

var jsMocks = []*regexp.Regexp{
	regexp.MustCompile(`(jest|vi)\.mock\(\s*['"](node:)?(child_process|net|http|https|axios|node-fetch|undici)['"]`),
	regexp.MustCompile(`\b(nock|msw)\b`),
}

// Screen says why the adversary's file at p, holding data, must not run
// ("" when it may): it mocks what a test must exercise.
func Screen(p string, data []byte) string {
	for _, re := range mocks[path.Ext(p)] {
		if m := re.Find(data); m != nil {
			return fmt.Sprintf("mocks what a test must exercise (the process, socket or HTTP layer): %q", strings.TrimSpace(string(m)))
		}
	}
	return ""
}

// Classify holds each test to its outcomes: on the baseline (error: it
// does not load, excluded; pass, xfail or skip: it does not tell the change
// from no change, not counted; fail: counted) and, for a counted one, on
// the result, where it must pass (a test missing there failed). result is
// nil when the tests did not run on the result.
func Classify(baseline, result []testresults.Result) (tests []ctoharness.AdversarialTest, discriminating, failed int) {
	after := map[string]testresults.Outcome{}
	for _, t := range result {
		after[t.ID] = t.Outcome
	}
	tests = []ctoharness.AdversarialTest{}
	for _, t := range baseline {
		at := ctoharness.AdversarialTest{ID: t.ID, Baseline: string(t.Outcome), OK: true}
		switch t.Outcome {
		case testresults.Error:
			at.Class = ctoharness.AdversaryFailedImport
		case testresults.Fail:
			at.Class = ctoharness.AdversaryDiscriminating
			discriminating++
			o, ok := after[t.ID]
			at.Result = string(o)
			if !ok {
				at.Result = "missing"
			}
			if at.OK = ok && (o == testresults.Pass || o == testresults.XFail); !at.OK {
				failed++
			}
		default:
			at.Class = ctoharness.AdversaryNotDiscriminating
			if o, ok := after[t.ID]; ok {
				at.Result = string(o)
			}
		}
		tests = append(tests, at)
	}
	return tests, discriminating, failed
}

// File is one file the adversary wrote.
type File struct {
	Path string
	Data []byte
}

// Generated is what the adversary's command did and wrote.
type Generated struct {
	Files      []File
	Digest     string
	Archive    string // the evidence archive of Files
	ExitCode   *int
	DurationMs int64
	TimedOut   bool
}

// Input is what the step gets from the pipeline: the adversary's command
// (for the record) and the pipeline's means to run it and its tests, each
// in the sandbox the pipeline plans.
type Input struct {
	Command []string
	Log     string // the adversary's log in the run directory
	// Generate runs the adversary and reads what it wrote; an error means
	// it did not finish (the Generated fields it could fill still count).
	Generate func(ctx context.Context) (Generated, error)
	// Tests runs the kept files' tests on the baseline (result false) or
	// the result, and returns what their report said and its log.
	Tests func(ctx context.Context, onResult bool, kept []string) ([]testresults.Result, string, error)
	// AutoConfirm lets the kept files run without asking; otherwise Ask
	// shows a person the Summary and says whether they may run (nil: there
	// is nobody to ask, and they do not).
	AutoConfirm bool
	Ask         func(ctx context.Context, s Summary) (bool, error)
	// TestCommand is the adversary's test command, for the Summary.
	TestCommand string
}

// Summary is what a person is shown before the adversary's tests run:
// the files that will run (each with its first lines), those excluded
// and why, and the command that runs them.
type Summary struct {
	TestCommand string
	Kept        []File
	Excluded    []ctoharness.AdversarialExcluded
}

// Lines shown of each kept file, and bytes of a line.
const (
	summaryLines     = 8
	summaryLineBytes = 160
)

// Text renders the summary for a terminal; every line of the adversary's
// own is shown with its control characters escaped.
func (s Summary) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "The task's adversary wrote %d test file(s) that will run, in the verification's sandbox, on fresh checkouts of the baseline and the result:\n", len(s.Kept))
	for _, f := range s.Kept {
		fmt.Fprintf(&b, "  %s (%d bytes)\n", quoteLine(f.Path), len(f.Data))
		lines := strings.SplitN(string(f.Data), "\n", summaryLines+1)
		for i, l := range lines {
			if i == summaryLines {
				b.WriteString("    …\n")
				break
			}
			if l == "" && i == len(lines)-1 {
				break
			}
			fmt.Fprintf(&b, "    | %s\n", quoteLine(l))
		}
	}
	for _, e := range s.Excluded {
		fmt.Fprintf(&b, "  excluded: %s: %s\n", quoteLine(e.Path), quoteLine(e.Reason))
	}
	fmt.Fprintf(&b, "Their command: %s\n", quoteLine(s.TestCommand))
	return b.String()
}

// quoteLine caps l and escapes what a terminal would act on.
func quoteLine(l string) string {
	if len(l) > summaryLineBytes {
		l = l[:summaryLineBytes] + "…"
	}
	q := strconv.Quote(l)
	return q[1 : len(q)-1]
}

// Run is the adversarial step: the record it made, and the blocker it
// raises (nil for none). Blocked with ADVERSARY_FAILED when it could not
// finish, ADVERSARIAL_TESTS_FAILED when a counted test failed on the
// result.
func Run(ctx context.Context, in Input) (*ctoharness.AdversarialRecord, *ctoharness.Blocker) {
	rec := &ctoharness.AdversarialRecord{Command: in.Command, Log: in.Log, Files: []string{},
		Excluded: []ctoharness.AdversarialExcluded{}, Tests: []ctoharness.AdversarialTest{}}
	fail := func(err error) (*ctoharness.AdversarialRecord, *ctoharness.Blocker) {
		rec.Problem = err.Error()
		return rec, &ctoharness.Blocker{Code: ctoharness.BlockAdversaryFailed, Step: ctoharness.StepVerify, Message: "the adversarial step: " + err.Error()}
	}
	gen, err := in.Generate(ctx)
	rec.ExitCode, rec.DurationMs, rec.TimedOut = gen.ExitCode, gen.DurationMs, gen.TimedOut
	if err != nil {
		return fail(err)
	}
	rec.Digest, rec.Archive = gen.Digest, gen.Archive
	var kept []string
	for _, f := range gen.Files {
		rec.Files = append(rec.Files, f.Path)
		if why := Screen(f.Path, f.Data); why != "" {
			rec.Excluded = append(rec.Excluded, ctoharness.AdversarialExcluded{Path: f.Path, Reason: why})
		} else {
			kept = append(kept, f.Path)
		}
	}
	if len(kept) == 0 {
		return rec, nil // nothing to run: the verdict stands on the task's own tests
	}
	if b := confirm(ctx, in, rec, gen, kept); b != nil {
		return rec, b
	}
	base, log, err := in.Tests(ctx, false, kept)
	rec.BaselineLog = log
	if err != nil {
		return fail(err)
	}
	rec.Tests, rec.Discriminating, _ = Classify(base, nil)
	if rec.Discriminating == 0 {
		return rec, nil // none tells the change from no change: none counts
	}
	res, log, err := in.Tests(ctx, true, kept)
	rec.ResultLog = log
	if err != nil {
		return fail(err)
	}
	rec.Tests, rec.Discriminating, rec.Failed = Classify(base, res)
	if rec.Failed == 0 {
		return rec, nil
	}
	var names []string
	for _, t := range rec.Tests {
		if !t.OK {
			names = append(names, fmt.Sprintf("%s (%s on the result)", t.ID, t.Result))
		}
	}
	return rec, &ctoharness.Blocker{Code: ctoharness.BlockAdversarialFailed, Step: ctoharness.StepVerify,
		Message: fmt.Sprintf("%d of the adversary's %d discriminating tests fail on the result: %s; see %s", rec.Failed, rec.Discriminating, strings.Join(names, ", "), rec.ResultLog)}
}

// confirm records who let the kept files run, and blocks the step when
// nobody did: ADVERSARY_NOT_CONFIRMED when there was nobody to ask or the
// person said no, ADVERSARY_FAILED when asking failed.
func confirm(ctx context.Context, in Input, rec *ctoharness.AdversarialRecord, gen Generated, kept []string) *ctoharness.Blocker {
	if in.AutoConfirm {
		rec.Confirmed = ctoharness.ConfirmedAuto
		return nil
	}
	notConfirmed := func(why string) *ctoharness.Blocker {
		return &ctoharness.Blocker{Code: ctoharness.BlockAdversaryNotConfirmed, Step: ctoharness.StepVerify,
			Message: why + ", so the adversary's tests did not run and the run has no verdict; run again with --auto-confirm (or \"auto_confirm\": true in the config) to run them without asking"}
	}
	if in.Ask == nil {
		return notConfirmed("nobody was asked to confirm the adversary's tests (no terminal)")
	}
	s := Summary{TestCommand: in.TestCommand, Excluded: rec.Excluded}
	keep := make(map[string]bool, len(kept))
	for _, p := range kept {
		keep[p] = true
	}
	for _, f := range gen.Files {
		if keep[f.Path] {
			s.Kept = append(s.Kept, f)
		}
	}
	yes, err := in.Ask(ctx, s)
	if err != nil {
		rec.Problem = "the confirmation could not be asked: " + err.Error()
		return &ctoharness.Blocker{Code: ctoharness.BlockAdversaryFailed, Step: ctoharness.StepVerify, Message: "the adversarial step: " + rec.Problem}
	}
	if !yes {
		rec.Confirmed = ctoharness.ConfirmedDeclined
		return notConfirmed("the adversary's tests were declined at the terminal")
	}
	rec.Confirmed = ctoharness.ConfirmedTerminal
	return nil
}

// MaxClaims bounds Case's claims file.
const MaxClaims = 64 << 10

// ReadClaims reads Case's claims at rel below scratch as hostile input: no
// link followed in any component, a regular file, at most MaxClaims bytes,
// valid against the claims schema (validate). Claims that cannot be used
// give the problem, never an error: the adversary then works from the
// task text.
func ReadClaims(scratch, rel string, validate func([]byte) error) (data []byte, n int, problem string) {
	f, err := caseworld.Open(scratch, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, "Case wrote no claims (" + rel + " in its scratch)"
	}
	if err != nil {
		return nil, 0, fmt.Sprintf("Case's claims cannot be read: %v", err)
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, MaxClaims+1))
	switch {
	case err != nil:
		return nil, 0, fmt.Sprintf("Case's claims cannot be read: %v", err)
	case len(data) > MaxClaims:
		return nil, 0, fmt.Sprintf("Case's claims are over %d bytes", MaxClaims)
	}
	if err := validate(data); err != nil {
		return nil, 0, fmt.Sprintf("Case's claims do not match schemas/claims.schema.json: %v", err)
	}
	var c ctoharness.Claims
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, 0, fmt.Sprintf("Case's claims: %v", err)
	}
	return data, len(c.Claims), ""
}
