package fakecase

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// applyPatch is the Case of a task check: it applies the task's reference
// patch (PATH, a file the harness shows in the view) to the fixture with
// git apply, reports every path it touched, and changes nothing else. A
// patch that does not apply fails the scenario: the reference does not fit
// the task's base.
func applyPatch(path string) func(*caseRun) error {
	return func(c *caseRun) error {
		bin, err := exec.LookPath("git")
		if err != nil {
			return fmt.Errorf("applying the reference needs git in the view: %w", err)
		}
		var names, errs bytes.Buffer
		list := exec.Command(bin, "apply", "--numstat", "-z", path)
		list.Dir, list.Stdout, list.Stderr = c.root, &names, &errs
		if err := list.Run(); err != nil {
			return fmt.Errorf("the reference patch %s cannot be read by git apply: %v: %s", path, err, strings.TrimSpace(errs.String()))
		}
		apply := exec.Command(bin, "apply", "--whitespace=nowarn", path)
		apply.Dir = c.root
		if out, err := apply.CombinedOutput(); err != nil {
			return fmt.Errorf("the reference patch %s does not apply to the task's base: %v: %s", path, err, strings.TrimSpace(string(out)))
		}
		for _, rec := range strings.Split(names.String(), "\x00") {
			// numstat -z: "added\tdeleted\tpath" per record (a rename adds
			// the two paths as records of their own).
			f := strings.SplitN(rec, "\t", 3)
			if p := f[len(f)-1]; p != "" {
				c.emit(ctoharness.EvCaseFileChanged, map[string]any{"path": p})
			}
		}
		return nil
	}
}
