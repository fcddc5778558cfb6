package cli

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cto-harness/cto-harness/validators"
)

type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes one testcase per check; a check fails when an error
// starts with its name. Errors that name no check become a testcase of their own.
func writeJUnit(path string, res validators.StageResult) error {
	suite := junitSuite{Name: fmt.Sprintf("cto-harness validate-stage %d", res.Stage)}
	used := make([]bool, len(res.Errors))
	for _, check := range res.Checked {
		tc := junitCase{Name: check, ClassName: "stage" + fmt.Sprint(res.Stage)}
		var msgs []string
		for i, e := range res.Errors {
			if strings.HasPrefix(e, check+":") {
				msgs = append(msgs, e)
				used[i] = true
			}
		}
		if len(msgs) > 0 {
			tc.Failure = &junitFailure{Message: msgs[0], Text: strings.Join(msgs, "\n")}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	for i, e := range res.Errors {
		if !used[i] {
			suite.Cases = append(suite.Cases, junitCase{Name: "other", ClassName: "stage" + fmt.Sprint(res.Stage),
				Failure: &junitFailure{Message: e, Text: e}})
		}
	}
	for _, c := range suite.Cases {
		if c.Failure != nil {
			suite.Failures++
		}
	}
	suite.Tests = len(suite.Cases)
	data, err := xml.MarshalIndent(suite, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write JUnit report %s: %w", path, err)
	}
	if err := os.WriteFile(path, append([]byte(xml.Header), append(data, '\n')...), 0o644); err != nil {
		return fmt.Errorf("write JUnit report %s: %w", path, err)
	}
	return nil
}
