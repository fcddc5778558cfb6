package verify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// A failed verification's blocker names the first failing test and a few
// of its lines, so that the person reading the blocker knows where to look
// before opening the log; the log's full path comes with it.

// Failure is the first failing test found in a test log.
type Failure struct {
	Test  string   // the test's name as the runner printed it
	Line  int      // 1-based line of the log where the failure is reported
	Lines []string // up to failureLines lines that say why, trimmed
}

const (
	failureLines   = 3
	failureLineMax = 160 // characters kept of each line
)

var (
	goFailLine     = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)
	goRunLine      = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	goRunEnd       = regexp.MustCompile(`^(FAIL|ok|PASS)\b|^=== `)
	goOtherResult  = regexp.MustCompile(`^\s*--- (PASS|SKIP): `)
	pytestFailed   = regexp.MustCompile(`^FAILED (\S+)(?: - (.*))?$`)
	pytestHeader   = regexp.MustCompile(`^_{3,} (\S.*?) _{3,}$`)
	tapNotOK       = regexp.MustCompile(`^not ok \d+ (?:- )?(.+?)(?: # .*)?$`)
	mochaFailure   = regexp.MustCompile(`^  1\) (.+)$`)
	cargoFailed    = regexp.MustCompile(`^test (\S+) \.\.\. FAILED$`)
	jestFailure    = regexp.MustCompile(`^\s*● (.+)$`)
	genericFailure = regexp.MustCompile(`(?i)\b(fail(ed|ure)?|error)\b`)
)

// goOutputEvent is the part of a go test -json event that names a failure
// and the output before it.
type goOutputEvent struct {
	goEvent
	Output string `json:"Output"`
}

// FirstFailure reads a test log and returns its first failing test: go test
// (plain and -json), pytest, TAP, mocha, cargo and jest are recognised by
// their failure lines. Without one, it returns the first line that speaks of
// a failure or an error (speaksOfFailure), with no test name. ok is false when the log names
// no failure at all.
func FirstFailure(r io.Reader) (f Failure, ok bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxCountLineLength)
	var generic *Failure
	goOutput := map[string][]string{} // go test -json: each test's last output lines
	var found *Failure
	var kind *regexp.Regexp                     // the pattern that found it
	goRun, current := map[string][]string{}, "" // go test -v: each test's output lines, and the test running
	n := 0
	for sc.Scan() {
		n++
		l := strings.TrimRight(sc.Text(), "\r")
		if found != nil {
			// The lines after a failure line say why (go test -v, TAP, mocha, jest).
			t := strings.TrimSpace(l)
			switch {
			case kind == goFailLine && goFailLine.MatchString(l) && len(found.Lines) == 0:
				// A subtest's failure, reported under its parent's: the subtest is the one to name.
				name := goFailLine.FindStringSubmatch(l)[1]
				found = &Failure{Test: name, Line: n, Lines: goRun[name]}
				continue
			case kind == goFailLine && goRunEnd.MatchString(l), kind == pytestHeader && pytestHeader.MatchString(l):
				return *found, true
			case kind == goFailLine && goOtherResult.MatchString(l):
				if len(found.Lines) > 0 {
					return *found, true
				}
				continue // a passing subtest listed before the failing one
			case t == "", kind == pytestHeader && !strings.HasPrefix(l, "E "):
				continue // pytest: the E lines say why, not the test's source
			}
			found.Lines = append(found.Lines, clip(t))
			if len(found.Lines) >= failureLines {
				break
			}
			continue
		}
		if strings.HasPrefix(l, "{") {
			var ev goOutputEvent
			if json.Unmarshal([]byte(l), &ev) == nil && ev.Test != "" {
				switch ev.Action {
				case "output":
					if t := strings.TrimSpace(ev.Output); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- ") {
						goOutput[ev.Test] = append(goOutput[ev.Test], clip(t))
					}
				case "fail":
					lines := goOutput[ev.Test]
					if len(lines) > failureLines {
						lines = lines[len(lines)-failureLines:]
					}
					return Failure{Test: ev.Test, Line: n, Lines: lines}, true
				}
				continue
			}
		}
		// go test -v prints a test's output between its === RUN and its
		// --- FAIL line; without -v, after the --- FAIL line.
		if m := goRunLine.FindStringSubmatch(l); m != nil {
			current = m[1]
			continue
		}
		if t := strings.TrimSpace(l); current != "" && t != "" && !goFailLine.MatchString(l) && !goOtherResult.MatchString(l) && !goRunEnd.MatchString(l) && len(goRun[current]) < failureLines {
			goRun[current] = append(goRun[current], clip(t))
		}
		if m := pytestFailed.FindStringSubmatch(l); m != nil {
			f := Failure{Test: m[1], Line: n}
			if m[2] != "" {
				f.Lines = []string{clip(m[2])}
			}
			return f, true
		}
		if m := cargoFailed.FindStringSubmatch(l); m != nil {
			return Failure{Test: m[1], Line: n}, true
		}
		for _, re := range []*regexp.Regexp{goFailLine, pytestHeader, tapNotOK, mochaFailure, jestFailure} {
			if m := re.FindStringSubmatch(l); m != nil {
				found, kind = &Failure{Test: strings.TrimSpace(m[1]), Line: n}, re
				if re == goFailLine {
					found.Lines = goRun[found.Test]
				}
				break
			}
		}
		if found == nil && generic == nil && speaksOfFailure(l) {
			generic = &Failure{Line: n, Lines: []string{clip(strings.TrimSpace(l))}}
		}
	}
	switch {
	case found != nil:
		return *found, true
	case generic != nil:
		return *generic, true
	}
	return Failure{}, false
}

// speaksOfFailure reports whether a line says that something failed: a
// word of failure or error, or a program the shell did not find. A word
// that is part of a file's name (make's "CC reftable/error.o", a test
// script t/fail-fast.sh) says nothing of the kind.
func speaksOfFailure(l string) bool {
	for _, re := range notFoundLines {
		if re.MatchString(strings.TrimSpace(l)) {
			return true
		}
	}
	for _, m := range genericFailure.FindAllStringIndex(l, -1) {
		before, after := byte(' '), l[m[1]:]
		if m[0] > 0 {
			before = l[m[0]-1]
		}
		inName := strings.ContainsRune("/.-_", rune(before)) || strings.HasPrefix(after, "/") ||
			len(after) > 1 && strings.ContainsRune(".-_", rune(after[0])) && isNameByte(after[1])
		if !inName {
			return true
		}
	}
	return false
}

// isNameByte reports whether b can continue a file's name after a dot or
// a dash (error.o, fail-fast).
func isNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// FailureHint is what a failed verification's blocker says after its
// reason: the first failing test in the log at logPath, a few of its lines,
// and the log's full path.
func FailureHint(logPath string) string {
	file, err := os.Open(logPath)
	if err != nil {
		return "full log: " + logPath
	}
	defer file.Close()
	f, ok := FirstFailure(file)
	if !ok {
		return "full log: " + logPath
	}
	var b strings.Builder
	if f.Test != "" {
		fmt.Fprintf(&b, "first failing test: %s (log line %d)", f.Test, f.Line)
	} else {
		fmt.Fprintf(&b, "first failure at log line %d", f.Line)
	}
	if len(f.Lines) > 0 {
		b.WriteString(": " + strings.Join(f.Lines, " | "))
	}
	b.WriteString("; full log: " + logPath)
	return b.String()
}

// clip keeps the first failureLineMax characters of a line.
func clip(s string) string {
	if r := []rune(s); len(r) > failureLineMax {
		return string(r[:failureLineMax]) + "…"
	}
	return s
}
