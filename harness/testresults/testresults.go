package testresults

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"
)

// Format names a machine-readable test report format.
type Format string

const (
	GoTestJSON Format = "go-test-json" // the event stream of `go test -json` (test2json)
	JUnit      Format = "junit"        // JUnit XML: <testsuites>/<testsuite>/<testcase> (pytest --junitxml, jest-junit, vitest/mocha JUnit reporters, cargo-nextest, Maven surefire)
	TAP        Format = "tap"          // Test Anything Protocol, versions 12-14
	Reward     Format = "reward"       // a verifier's reward file (a container task's reward.txt): one number, one test "reward", passed at 1 or more
)

// Formats lists every format, for errors and docs.
func Formats() []Format { return []Format{GoTestJSON, JUnit, TAP, Reward} }

// Outcome of one test.
type Outcome string

const (
	Pass  Outcome = "pass"
	Fail  Outcome = "fail"
	Error Outcome = "error" // the test could not run to a verdict (JUnit <error>, a Go test that panicked or a package that failed to build, TAP "Bail out!")
	Skip  Outcome = "skip"
	XFail Outcome = "xfail" // expected failure: TAP "# TODO" not ok, pytest xfail (JUnit <skipped type="pytest.xfail" ...> or message starting "xfail")
)

// Result is one test.
type Result struct {
	ID         string  `json:"id"` // stable identity: the same test gets the same ID in every run
	Outcome    Outcome `json:"outcome"`
	DurationMs int64   `json:"duration_ms"`
	Output     string  `json:"output,omitempty"` // the test's own output (failure message, log lines), capped at MaxOutput bytes per test, cut on a UTF-8 boundary, with "\n[… N bytes cut]" appended when cut
}

// MaxOutput caps one test's Output, so one noisy test cannot flood a report.
const MaxOutput = 4096

// MaxTests caps how many results one report may hold; Parse refuses more (an error naming the cap).
const MaxTests = 100000

// Parse reads a whole report (the caller caps its size) and returns the
// results sorted by ID, with duplicate IDs resolved as: the worst outcome
// wins in the order error > fail > pass > xfail > skip (a test run twice in one report that once failed is failed), durations summed.
// The outputs of duplicates are joined in report order.
func Parse(f Format, data []byte) ([]Result, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var rs []Result
	var err error
	switch f {
	case GoTestJSON:
		rs, err = parseGoTest(data)
	case JUnit:
		rs, err = parseJUnit(data)
	case TAP:
		rs, err = parseTAP(data)
	case Reward:
		rs, err = parseReward(data)
	default:
		names := make([]string, 0, 3)
		for _, k := range Formats() {
			names = append(names, string(k))
		}
		return nil, fmt.Errorf("testresults: unknown format %q (known: %s)", f, strings.Join(names, ", "))
	}
	if err != nil {
		return nil, err
	}
	return finish(rs)
}

// rank orders outcomes for duplicate resolution: higher is worse.
func rank(o Outcome) int {
	switch o {
	case Error:
		return 4
	case Fail:
		return 3
	case Pass:
		return 2
	case XFail:
		return 1
	}
	return 0
}

// finish sorts, merges duplicate IDs, enforces MaxTests and caps outputs.
func finish(rs []Result) ([]Result, error) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].ID < rs[j].ID })
	out := make([]Result, 0, len(rs))
	var dropped []int // bytes of merged output not kept, per result in out
	for _, r := range rs {
		n := len(out)
		if n == 0 || out[n-1].ID != r.ID {
			out = append(out, r)
			dropped = append(dropped, 0)
			continue
		}
		m := &out[n-1]
		if rank(r.Outcome) > rank(m.Outcome) {
			m.Outcome = r.Outcome
		}
		m.DurationMs += r.DurationMs
		if len(m.Output) > MaxOutput {
			// Already over the cap: count the bytes instead of copying them.
			dropped[n-1] += len(r.Output)
		} else {
			m.Output = joinOutput(m.Output, r.Output)
		}
	}
	if len(out) > MaxTests {
		return nil, fmt.Errorf("testresults: the report holds %d tests, more than the cap of %d (MaxTests)", len(out), MaxTests)
	}
	for i := range out {
		out[i].Output = capOutput(out[i].Output, dropped[i])
	}
	return out, nil
}

// joinOutput appends b to a, starting b on a new line.
func joinOutput(a, b string) string {
	switch {
	case b == "":
		return a
	case a == "":
		return b
	case strings.HasSuffix(a, "\n"):
		return a + b
	}
	return a + "\n" + b
}

// capOutput keeps at most MaxOutput bytes of s, cut on a UTF-8 boundary,
// and names how many bytes were cut (including extra bytes already dropped).
func capOutput(s string, extra int) string {
	if len(s) <= MaxOutput && extra == 0 {
		return s
	}
	keep := len(s)
	if keep > MaxOutput {
		keep = MaxOutput
		for c := keep; c > 0 && c > MaxOutput-utf8.UTFMax; c-- {
			if utf8.RuneStart(s[c]) {
				keep = c
				break
			}
		}
	}
	return s[:keep] + fmt.Sprintf("\n[… %d bytes cut]", len(s)-keep+extra)
}

// durationMs converts seconds to whole milliseconds; nonsense becomes 0.
func durationMs(sec float64) int64 {
	if math.IsNaN(sec) || math.IsInf(sec, 0) || sec <= 0 || sec > 1e12 {
		return 0
	}
	return int64(math.Round(sec * 1000))
}

// Outcomes lists every outcome, in the order reports show them.
func Outcomes() []Outcome { return []Outcome{Pass, Fail, Error, Skip, XFail} }

// FileVersion is tests.json's schema_version.
const FileVersion = "1"

// File is tests.json: one run's per-test results as the verification's own
// machine-readable report gave them.
type File struct {
	SchemaVersion string   `json:"schema_version"`
	RunID         string   `json:"run_id"`
	Format        Format   `json:"format"`
	Path          string   `json:"path"` // the report's path in the verification checkout
	Tests         []Result `json:"tests"`
}
