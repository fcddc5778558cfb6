package verify

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Count formats, as recorded next to the counts.
const (
	FormatGoJSON       = "go-test-json"          // go test -json events, one per test (subtests included)
	FormatGoJSONPkgs   = "go-test-json-packages" // go test -json with package events only: counts are packages
	FormatGoTest       = "go-test"               // go test -v: --- PASS/FAIL/SKIP lines
	FormatGoTestPkgs   = "go-test-packages"      // go test without -v: ok/FAIL package lines, counts are packages
	FormatPytest       = "pytest"                // the pytest summary line
	FormatNodeTest     = "node-test"             // node --test summary (# pass N / ℹ pass N)
	FormatTAP          = "tap"                   // top-level TAP ok / not ok lines
	FormatMocha        = "mocha"                 // mocha's summary (N passing / N pending / N failing)
	maxCountLineLength = 64 * 1024
)

var (
	goTestLine   = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): `)
	goPkgOK      = regexp.MustCompile(`^ok  \t\S+\t`)
	goPkgFail    = regexp.MustCompile(`^FAIL\t\S+[\t ]`)
	pytestItem   = regexp.MustCompile(`(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?|rerun)`)
	pytestTiming = regexp.MustCompile(` in \d+(\.\d+)?s\b`)
	nodeSummary  = regexp.MustCompile(`^(?:#|ℹ) (pass|fail|skipped|tests|todo|cancelled) (\d+)$`)
	tapLine      = regexp.MustCompile(`^(not ok|ok)\b(.*)$`)
	mochaSummary = regexp.MustCompile(`^  (\d+) (passing|pending|failing)(?: \(\d+(?:\.\d+)?(?:ms|s|m|h)\))?$`)
)

// countParser reads test-runner output line by line as it is produced (so
// that counts are right even when the output is far larger than what is kept
// inline) and recognises go test (plain and -json), pytest and node's test
// runner / TAP, and mocha's summary. Formats from different runners are added up, so a script
// running two suites reports both.
type countParser struct {
	mu      sync.Mutex
	partial []byte
	long    bool // the current line overflowed and is being skipped

	goJSON, goJSONPkgs, goPlain, goPkgs, pytest, node, tap, mocha ctoharness.TestCounts
	seenGoJSON, seenGoJSONPkgs, seenGoPlain, seenGoPkgs           bool
	seenGoVerbose                                                 bool // "=== RUN": every test has a --- line
	seenPytest, seenNode, seenTAP, seenMocha                      bool
}

func newCountParser() *countParser { return &countParser{} }

// Write implements io.Writer.
func (c *countParser) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range p {
		if b == '\n' {
			if !c.long {
				c.line(strings.TrimRight(string(c.partial), "\r"))
			}
			c.partial, c.long = c.partial[:0], false
			continue
		}
		if c.long {
			continue
		}
		if len(c.partial) >= maxCountLineLength {
			c.long = true
			continue
		}
		c.partial = append(c.partial, b)
	}
	return len(p), nil
}

type goEvent struct {
	Action string `json:"Action"`
	Test   string `json:"Test"`
}

func (c *countParser) line(l string) {
	if strings.HasPrefix(l, "{") {
		var ev goEvent
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Action != "" {
			bump := func(t *ctoharness.TestCounts) bool {
				switch ev.Action {
				case "pass":
					t.Passed++
				case "fail":
					t.Failed++
				case "skip":
					t.Skipped++
				default:
					return false
				}
				return true
			}
			if ev.Test != "" {
				if bump(&c.goJSON) {
					c.seenGoJSON = true
				}
			} else if bump(&c.goJSONPkgs) {
				c.seenGoJSONPkgs = true
			}
			return
		}
	}
	if m := goTestLine.FindStringSubmatch(l); m != nil {
		c.seenGoPlain = true
		switch m[1] {
		case "PASS":
			c.goPlain.Passed++
		case "FAIL":
			c.goPlain.Failed++
		case "SKIP":
			c.goPlain.Skipped++
		}
		return
	}
	if strings.HasPrefix(l, "=== RUN") {
		c.seenGoVerbose = true
		return
	}
	if goPkgOK.MatchString(l) {
		c.seenGoPkgs = true
		c.goPkgs.Passed++
		return
	}
	if goPkgFail.MatchString(l) {
		c.seenGoPkgs = true
		c.goPkgs.Failed++
		return
	}
	if t := strings.Trim(l, "=- "); pytestTiming.MatchString(t) || strings.HasPrefix(t, "no tests ran in ") {
		if items := pytestItem.FindAllStringSubmatch(t, -1); len(items) > 0 || strings.HasPrefix(t, "no tests ran") {
			var pc ctoharness.TestCounts
			for _, it := range items {
				n, _ := strconv.Atoi(it[1])
				switch it[2] {
				case "passed", "xpassed":
					pc.Passed += n
				case "failed", "error", "errors":
					pc.Failed += n
				case "skipped", "xfailed":
					pc.Skipped += n
				}
			}
			c.pytest, c.seenPytest = pc, true // the last summary wins
			return
		}
	}
	if m := nodeSummary.FindStringSubmatch(strings.TrimSpace(l)); m != nil && !strings.HasPrefix(l, " ") {
		n, _ := strconv.Atoi(m[2])
		switch m[1] {
		case "pass":
			c.node.Passed, c.seenNode = n, true
		case "fail":
			c.node.Failed, c.seenNode = n, true
		case "skipped":
			c.node.Skipped, c.seenNode = n, true
		}
		return
	}
	if m := mochaSummary.FindStringSubmatch(l); m != nil {
		// One summary per mocha run: a script running mocha twice adds up.
		n, _ := strconv.Atoi(m[1])
		switch m[2] {
		case "passing":
			c.mocha.Passed += n
		case "failing":
			c.mocha.Failed += n
		case "pending":
			c.mocha.Skipped += n
		}
		c.seenMocha = true
		return
	}
	if m := tapLine.FindStringSubmatch(l); m != nil {
		c.seenTAP = true
		directive := strings.ToUpper(m[2])
		switch {
		case strings.Contains(directive, "# SKIP"), strings.Contains(directive, "# TODO"):
			c.tap.Skipped++
		case m[1] == "ok":
			c.tap.Passed++
		default:
			c.tap.Failed++
		}
	}
}

// result returns the counts, or nil when no known format was seen, and the
// format names (joined with "+").
func (c *countParser) result() (*ctoharness.TestCounts, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.partial) > 0 && !c.long {
		c.line(strings.TrimRight(string(c.partial), "\r"))
		c.partial = c.partial[:0]
	}
	var total ctoharness.TestCounts
	var formats []string
	take := func(t ctoharness.TestCounts, format string) {
		total.Passed += t.Passed
		total.Failed += t.Failed
		total.Skipped += t.Skipped
		formats = append(formats, format)
	}
	// Go: one of its four shapes, the most precise first.
	switch {
	case c.seenGoJSON:
		take(c.goJSON, FormatGoJSON)
	case c.seenGoJSONPkgs:
		take(c.goJSONPkgs, FormatGoJSONPkgs)
	case c.seenGoVerbose:
		take(c.goPlain, FormatGoTest)
	case c.seenGoPkgs:
		// Without -v only failures print a --- line: count packages instead.
		take(c.goPkgs, FormatGoTestPkgs)
	case c.seenGoPlain:
		take(c.goPlain, FormatGoTest)
	}
	if c.seenPytest {
		take(c.pytest, FormatPytest)
	}
	// Node: its summary counts the same tests as its TAP lines.
	switch {
	case c.seenNode:
		take(c.node, FormatNodeTest)
	case c.seenTAP:
		take(c.tap, FormatTAP)
	}
	if c.seenMocha {
		take(c.mocha, FormatMocha)
	}
	if len(formats) == 0 {
		return nil, ""
	}
	return &total, strings.Join(formats, "+")
}

// ParseCounts parses a complete output (as ParseCounts would see it streamed).
func ParseCounts(output string) (*ctoharness.TestCounts, string) {
	c := newCountParser()
	_, _ = c.Write([]byte(output))
	return c.result()
}
