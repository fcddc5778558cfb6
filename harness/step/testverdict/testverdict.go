// Package testverdict judges what the verification command's record means
// for the run, once it ran and its test report (if any) was read: a sandbox
// that could not be built, a command the profile refused, and a failing,
// timed-out, flaky or not-run verification each block with their own code.
// It reads the record (and, for a failure, test.log to name the first
// failing test), so every verdict is tested without a run.
package testverdict

import (
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// Input is the verification's record and what the judgement names.
type Input struct {
	Rec ctoharness.TestsRecord
	// Err is the command's own start failure (blocked by the pipeline as
	// TEST_NOT_RUN already: it is not judged twice).
	Err error
	// Sandboxed says the command ran under the sandbox launcher.
	Sandboxed bool
	// Profile is the execution profile's name, for the budget message.
	Profile string
	// Unreached names allowed endpoints this machine's network could not
	// reach (" (…)" or ""): tests that failed for them are not the change's fault.
	Unreached string
	// Log is test.log's full path: a failure's blocker names its first
	// failing test there (verify.FailureHint).
	Log string
}

// Judge is the blocker the record calls for, or nil for a verification that passed.
func Judge(in Input) *ctoharness.Blocker {
	rec := in.Rec
	if in.Sandboxed {
		code := -1
		if rec.ExitCode != nil {
			code = *rec.ExitCode
		}
		if msg, ok := sandbox.IsSetupFailure(code, rec.StderrInline); ok {
			return block(ctoharness.BlockSandboxUnavailable, "%s", msg)
		}
	}
	switch verify.Refusal(rec.Refusal) {
	case verify.RefusedDangerous:
		return block(ctoharness.BlockDangerousScript, "the verification command or a script it runs is dangerous (%s); see test.log, or pass --allow-dangerous", rec.Reason)
	case verify.RefusedScope:
		return block(ctoharness.BlockTestScope, "a test target is out of scope (%s): %s", rec.ScopeReason, rec.Reason)
	case verify.RefusedBudget:
		return block(ctoharness.BlockTestBudget, "the %s profile's test budget is spent: %s", in.Profile, rec.Reason)
	case verify.RefusedProfile:
		return nil // smoke: tests are not run, and such a run never qualifies
	}
	switch rec.Classification {
	case ctoharness.TestFailure:
		return block(ctoharness.BlockTestsFailed, "verification %q failed (%s)%s; %s", rec.Command, rec.Reason, in.Unreached, verify.FailureHint(in.Log))
	case ctoharness.TestTimeout:
		return block(ctoharness.BlockTestTimeout, "verification %q %s%s", rec.Command, rec.Reason, in.Unreached)
	case ctoharness.TestFlake:
		return block(ctoharness.BlockTestFlake, "verification %q failed, then passed on rerun: a flaky test; see %s", rec.Command, evidence.TestLog)
	case ctoharness.TestGovUnav:
		return block(ctoharness.BlockGovernanceUnavailable, "a limit of the verification cannot be enforced: %s", rec.Reason)
	case ctoharness.TestNotRun:
		if in.Err == nil {
			return block(ctoharness.BlockTestNotRun, "verification %q did not run: %s%s; see %s", rec.Command, rec.Reason, in.Unreached, evidence.TestLog)
		}
	}
	return nil
}

func block(code ctoharness.BlockerCode, format string, a ...any) *ctoharness.Blocker {
	return &ctoharness.Blocker{Code: code, Step: ctoharness.StepVerify, Message: fmt.Sprintf(format, a...)}
}
