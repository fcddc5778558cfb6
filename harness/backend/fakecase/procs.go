package fakecase

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// ProcScenarios run real commands, so the harness's own count of Case's
// execs can be compared with what Case says (or does not say) it ran.
func ProcScenarios() []Scenario {
	return []Scenario{
		{"many-procs", "run /bin/true 40 times without a single case.command event, then make the change", func(c *caseRun) error {
			c.runAll(40, false, "/bin/true")
			return c.edit()
		}},
		{"bash-lc-tests", "make the change, then run the verification script through bash -lc 5 times, more than the fast profile's test runs", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			c.runAll(5, true, "bash", "-lc", "sh scripts/check.sh")
			return nil
		}},
	}
}

// runAll runs argv n times, reporting each run as case.command when claim
// is set, and logs on stderr how many failed to start (a refused exec) or
// failed. A refused command is not a reason to stop: Case carries on.
func (c *caseRun) runAll(n int, claim bool, argv ...string) {
	refused, failed := 0, 0
	for i := 0; i < n; i++ {
		if claim {
			c.emit(ctoharness.EvCaseCommand, map[string]any{"command": shellLine(argv)})
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr // stdout is reserved for events
		if err := cmd.Run(); err != nil {
			if _, ok := err.(*exec.ExitError); ok {
				failed++
			} else {
				refused++
			}
		}
	}
	fmt.Fprintf(os.Stderr, "fake case: %d runs of %q: %d not started, %d failed\n", n, argv, refused, failed)
}

// shellLine is argv as a shell command line, the way an agent reports it.
func shellLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = a
		if strings.ContainsAny(a, " '\"$") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
