package testresults

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// junitNode is a <testsuites> or <testsuite>; either may hold the other.
type junitNode struct {
	XMLName xml.Name
	Name    string      `xml:"name,attr"`
	Suites  []junitNode `xml:"testsuite"`
	Groups  []junitNode `xml:"testsuites"`
	Cases   []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failures  []junitDetail `xml:"failure"`
	Errors    []junitDetail `xml:"error"`
	Skipped   []junitDetail `xml:"skipped"`
	SystemOut []string      `xml:"system-out"`
	SystemErr []string      `xml:"system-err"`
}

// junitDetail is a <failure>, <error> or <skipped> element.
type junitDetail struct {
	Type    string `xml:"type,attr"`
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func parseJUnit(data []byte) ([]Result, error) {
	// encoding/xml expands only the five predefined entities and refuses
	// any other (no DTD processing): no external entities, no "billion laughs".
	d := xml.NewDecoder(bytes.NewReader(data))
	var root junitNode
	if err := d.Decode(&root); err != nil {
		return nil, fmt.Errorf("testresults: invalid JUnit XML: %w", err)
	}
	if n := root.XMLName.Local; n != "testsuites" && n != "testsuite" {
		return nil, fmt.Errorf("testresults: not JUnit XML: the root element is <%s>, not <testsuites> or <testsuite>", n)
	}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("testresults: invalid JUnit XML: %w", err)
		}
		if _, ok := tok.(xml.StartElement); ok {
			return nil, errors.New("testresults: invalid JUnit XML: more than one root element")
		}
	}
	rs := []Result{}
	junitWalk(&root, "", &rs)
	return rs, nil
}

// junitWalk collects the testcases below n; suite is the name of the
// innermost enclosing <testsuite>.
func junitWalk(n *junitNode, suite string, rs *[]Result) {
	if n.XMLName.Local == "testsuite" {
		suite = n.Name
	}
	for i := range n.Cases {
		*rs = append(*rs, junitResult(&n.Cases[i], suite))
	}
	for i := range n.Suites {
		junitWalk(&n.Suites[i], suite, rs)
	}
	for i := range n.Groups {
		junitWalk(&n.Groups[i], suite, rs)
	}
}

func junitResult(c *junitCase, suite string) Result {
	id := c.Name
	switch {
	case c.Classname != "":
		id = c.Classname + "." + c.Name
	case suite != "":
		id = suite + "." + c.Name
	}
	r := Result{ID: id, Outcome: Pass, DurationMs: durationMs(parseSeconds(c.Time))}
	var parts []string
	detail := func(ds []junitDetail) {
		for _, d := range ds {
			parts = append(parts, d.Message, d.Text)
		}
	}
	switch {
	case len(c.Errors) > 0:
		r.Outcome = Error
	case len(c.Failures) > 0:
		r.Outcome = Fail
	case len(c.Skipped) > 0:
		r.Outcome = Skip
		s := c.Skipped[0]
		if s.Type == "pytest.xfail" || strings.HasPrefix(strings.ToLower(s.Message), "xfail") {
			r.Outcome = XFail
		}
	}
	detail(c.Errors)
	detail(c.Failures)
	detail(c.Skipped)
	parts = append(parts, c.SystemOut...)
	parts = append(parts, c.SystemErr...)
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	r.Output = strings.Join(out, "\n")
	return r
}

// parseSeconds reads a time attribute; missing or unreadable is 0.
// Surefire may write a thousands separator ("1,234.5").
func parseSeconds(s string) float64 {
	s = strings.TrimSpace(s)
	if strings.Contains(s, ".") {
		s = strings.ReplaceAll(s, ",", "")
	} else {
		s = strings.ReplaceAll(s, ",", ".")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return f
}
