package checked

import (
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

func TestHold(t *testing.T) {
	base := strings.Repeat("b", 40)
	crit := ctoharness.TaskCriteria{SpecDigest: strings.Repeat("1", 64), HiddenTestsDigest: strings.Repeat("2", 64)}
	good := ctoharness.TaskCheck{Valid: true, TaskDigest: crit.SpecDigest, HiddenTestsDigest: crit.HiddenTestsDigest, BaseCommit: base, Repeats: 2}
	if err := Hold(good, crit, base); err != nil {
		t.Fatalf("a record of this task is refused: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*ctoharness.TaskCheck)
		want string
	}{
		"invalid":      {func(c *ctoharness.TaskCheck) { c.Valid, c.Problems = false, []string{"the reference did not pass"} }, "found the task invalid"},
		"other task":   {func(c *ctoharness.TaskCheck) { c.TaskDigest = strings.Repeat("9", 64) }, "is of task"},
		"other hidden": {func(c *ctoharness.TaskCheck) { c.HiddenTestsDigest = "" }, "hidden tests"},
		"other base":   {func(c *ctoharness.TaskCheck) { c.BaseCommit = strings.Repeat("c", 40) }, "is of base"},
	} {
		c := good
		tc.edit(&c)
		if err := Hold(c, crit, base); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
