// Package prescan refuses, before Case starts, a verification command the
// script scanner would refuse after it: one whose dangerous finding no
// change of Case's can remove. Scanning only at the verification would
// spend a whole agent run (and its model's cost) on a verdict known at
// the start. A finding Case might remove (in a file it may change, or
// behind a setup or hidden tests that change the checkout) is left to the
// verification's own scan, which always runs.
package prescan

import (
	"context"
	"fmt"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// Input is the verification as the task gives it and the baseline Case
// starts from.
type Input struct {
	Command string        // the task's verification command
	Dir     string        // the baseline's files (the fixture before Case)
	Policy  verify.Policy // the verification's, with DryRun set by Check
	Allowed []string      // the task's allowed paths: what Case may change
	// Setup and Hidden say the checkout the verification runs in is not
	// the baseline plus Case's change alone: a setup command or hidden
	// tests may change what the scan would read, so nothing is refused
	// here.
	Setup, Hidden bool
}

// Check scans the command in the baseline and returns the blocker to
// raise before Case (nil when there is none), and the plan it made.
func Check(ctx context.Context, in Input) (*ctoharness.Blocker, verify.Plan, error) {
	if in.Policy.AllowDangerous || in.Setup || in.Hidden || !in.Policy.Profile.RunTests {
		return nil, verify.Plan{}, nil
	}
	pol := in.Policy
	pol.DryRun = true
	plan, err := verify.Preflight(ctx, verify.Input{Command: in.Command, Fixture: in.Dir}, pol)
	if err != nil || plan.Refusal != verify.RefusedDangerous {
		return nil, plan, err
	}
	read := append([]string(nil), plan.Scripts...)
	for _, f := range plan.Findings {
		if f.File != scan.CommandFile {
			read = append(read, f.File) // a script that is missing counts too: Case may write it
		}
	}
	for _, p := range read {
		if changeable(p, in.Allowed) {
			return nil, plan, nil // Case may change what the scan read
		}
	}
	return &ctoharness.Blocker{Code: ctoharness.BlockDangerousScript, Step: ctoharness.StepContract,
		Message: fmt.Sprintf("%s; none of the files the scan read (%s) is one Case may change, so the verification would be refused after Case: Case was not started; pass --allow-dangerous to run it anyway",
			scan.Summary(plan.Findings), orCommand(plan.Scripts))}, plan, nil
}

// changeable reports whether Case may change the fixture path p.
func changeable(p string, allowed []string) bool {
	for _, a := range allowed {
		if task.Match(a, p) || task.Match(a+"/**", p) {
			return true
		}
	}
	return false
}

func orCommand(scripts []string) string {
	if len(scripts) == 0 {
		return "the command itself"
	}
	return "the command, " + strings.Join(scripts, ", ")
}
