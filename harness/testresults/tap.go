package testresults

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var (
	tapPlan = regexp.MustCompile(`^1\.\.([0-9]+)\s*(#.*)?$`)
	tapTest = regexp.MustCompile(`^(not )?ok(\s|$)`)

	tapUnescape = strings.NewReplacer(`\#`, "#", `\\`, `\`)
)

// tapLine is one "ok"/"not ok" line of the top level.
type tapLine struct {
	num    int
	ok     bool
	kind   string // "skip", "todo" or ""
	desc   string
	output strings.Builder
	ms     int64
}

type tapParser struct {
	tests    []*tapLine
	reported map[int]bool
	next     int // the number of a test line that has none
	plan     int // -1 when no plan was seen
	bail     string
	inYAML   bool
}

func parseTAP(data []byte) ([]Result, error) {
	p := &tapParser{reported: map[int]bool{}, next: 1, plan: -1}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if err := p.line(line); err != nil {
			return nil, err
		}
		if p.bail != "" {
			break
		}
	}
	if len(p.tests) == 0 && p.plan < 0 && p.bail == "" {
		return nil, errors.New("testresults: the data is not TAP: it has no test line, plan or \"Bail out!\"")
	}
	return p.results(), nil
}

func (p *tapParser) line(line string) error {
	if p.inYAML {
		if strings.TrimRight(line, " \t") == "  ..." {
			p.inYAML = false
			return nil
		}
		if strings.HasPrefix(line, "  ") || strings.TrimSpace(line) == "" {
			p.yaml(strings.TrimPrefix(line, "  "))
			return nil
		}
		p.inYAML = false // an unterminated block ends at the next top-level line
	}
	if line == "" || line[0] == ' ' || line[0] == '\t' {
		// Only YAML blocks (indented by 2) belong to the top level; deeper
		// indentation is a subtest, summed up by its parent's own line.
		if strings.TrimRight(line, " \t") == "  ---" && len(p.tests) > 0 {
			p.inYAML = true
		}
		return nil
	}
	line = strings.TrimRight(line, " \t")
	if len(line) >= 9 && strings.EqualFold(line[:9], "bail out!") {
		p.bail = line
		return nil
	}
	if m := tapPlan.FindStringSubmatch(line); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > MaxTests {
			return fmt.Errorf("testresults: the TAP plan %q announces more tests than the cap of %d (MaxTests)", line, MaxTests)
		}
		if p.plan < 0 {
			p.plan = n
		}
		return nil
	}
	if m := tapTest.FindStringSubmatch(line); m != nil {
		p.test(line[len(m[0]):], m[1] == "")
	}
	return nil // "TAP version", "# comments", pragmas and unknown lines
}

func (p *tapParser) test(rest string, ok bool) {
	t := &tapLine{ok: ok, num: p.next}
	rest = strings.TrimLeft(rest, " \t")
	digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
	if n, err := strconv.Atoi(rest[:digits]); digits > 0 && err == nil {
		t.num = n
		rest = rest[digits:]
	}
	if t.num < math.MaxInt {
		p.next = t.num + 1
	}
	desc, kind, directive := tapDirective(rest)
	desc = strings.TrimSpace(desc)
	if desc == "-" {
		desc = ""
	}
	desc = strings.TrimSpace(strings.TrimPrefix(desc, "- "))
	t.desc = tapUnescape.Replace(desc)
	t.kind = kind
	if directive != "" {
		t.output.WriteString("# " + directive + "\n")
	}
	p.reported[t.num] = true
	p.tests = append(p.tests, t)
}

// tapDirective splits " - desc # SKIP reason" at its first unescaped
// "# SKIP" or "# TODO"; any other "#" stays part of the description.
func tapDirective(s string) (desc, kind, directive string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '#':
			d := strings.TrimLeft(s[i+1:], " \t")
			w := strings.ToLower(d)
			switch {
			case strings.HasPrefix(w, "skip"):
				return s[:i], "skip", d
			case strings.HasPrefix(w, "todo"):
				return s[:i], "todo", d
			}
		}
	}
	return s, "", ""
}

// yaml adds a diagnostic line to the latest test; node-tap's duration_ms
// becomes its duration.
func (p *tapParser) yaml(line string) {
	t := p.tests[len(p.tests)-1]
	t.output.WriteString(line + "\n")
	if v, ok := strings.CutPrefix(line, "duration_ms:"); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			t.ms = durationMs(f / 1000)
		}
	}
}

func (p *tapParser) results() []Result {
	count := map[string]int{}
	for _, t := range p.tests {
		count[t.desc]++
	}
	rs := make([]Result, 0, len(p.tests))
	for _, t := range p.tests {
		id := t.desc
		switch {
		case id == "":
			id = fmt.Sprintf("test %d", t.num)
		case count[id] > 1:
			id = fmt.Sprintf("%s #%d", id, t.num)
		}
		o := Fail
		switch {
		case t.ok && t.kind == "skip":
			o = Skip
		case t.ok:
			o = Pass
		case t.kind == "todo":
			o = XFail
		}
		rs = append(rs, Result{ID: id, Outcome: o, DurationMs: t.ms, Output: strings.TrimSuffix(t.output.String(), "\n")})
	}
	for n := 1; n <= p.plan; n++ {
		if p.reported[n] {
			continue
		}
		out := fmt.Sprintf("planned by 1..%d but not reported", p.plan)
		if p.bail != "" {
			out = p.bail
		}
		rs = append(rs, Result{ID: fmt.Sprintf("test %d (missing)", n), Outcome: Error, Output: out})
	}
	if p.bail != "" && p.plan < 0 {
		// No plan before the bail-out says which tests were lost; without
		// this result a bailed-out run would read as all passed.
		rs = append(rs, Result{ID: "Bail out!", Outcome: Error, Output: p.bail})
	}
	return rs
}
