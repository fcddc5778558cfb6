package fakecase

import (
	"fmt"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// deepLevels is how deep the events-deep-json scenario nests one field: far
// past the contract's limit, yet within encoding/json's own limit of 10,000,
// so only the harness's own depth check refuses it.
const deepLevels = 9000

// StrictEventScenarios make the canned change but write event lines that a
// lenient JSON reader would take, and read one way here and another way
// there: a case-variant "type" key, a duplicate key, an unknown event type,
// and a field nested thousands deep. The harness must refuse each line as
// malformed, without deciding what it meant.
func StrictEventScenarios() []Scenario {
	return []Scenario{
		{"events-key-case", `finish with {"TYPE":"case.finished",...} instead of "type"`, func(c *caseRun) error {
			c.skipFinished = true
			if err := c.edit(); err != nil {
				return err
			}
			return c.raw(`{"TYPE":"case.finished","status":"ok"}`)
		}},
		{"events-duplicate-key", `finish with a line that names two types, {"type":"case.log",...,"type":"case.finished"}`, func(c *caseRun) error {
			c.skipFinished = true
			if err := c.edit(); err != nil {
				return err
			}
			return c.raw(`{"type":"case.log","message":"done","type":"case.finished","status":"ok"}`)
		}},
		{"events-unknown-type", "emit an event of a type the contract does not define, then finish", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			return c.raw(`{"type":"case.verdict","status":"pass"}`)
		}},
		{"events-deep-json", fmt.Sprintf("emit three case.log events with a field nested %d levels deep, then finish", deepLevels), func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			deep := strings.Repeat("[", deepLevels) + strings.Repeat("]", deepLevels)
			for i := 1; i <= 3; i++ {
				if err := c.raw(fmt.Sprintf(`{"type":%q,"message":"deep %d","deep":%s}`, ctoharness.EvCaseLog, i, deep)); err != nil {
					return err
				}
			}
			return nil
		}},
	}
}

// raw writes one line to stdout as it is, where emit would encode it.
func (c *caseRun) raw(line string) error {
	_, err := fmt.Fprintln(c.stdout, line)
	return err
}
