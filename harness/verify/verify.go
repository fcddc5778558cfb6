// Package verify runs the task contract's verification command in the
// fixture, with a timeout and a whole-tree kill, and classifies the outcome.
//
// Run is the plain runner. RunWithPolicy adds the policy around it: the
// execution profile, the script-safety scan (harness/scan), the test-target
// scope check, a cumulative test budget, flake reruns, separate inline
// stdout/stderr and test counts (see Preflight, Execute and Record).
package verify

import (
	"os"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Input is one verification run.
type Input struct {
	Command string
	Fixture string
	Env     []string
	Timeout time.Duration
	Grace   time.Duration // SIGTERM to SIGKILL on timeout; 0 is proc's default
	Log     *os.File      // test.log: the full output (stdout and stderr interleaved)
	LogPath string        // as recorded in the report
	LogCap  int64
	Tracer  ctoharness.Tracer
	// Wrap, when set, turns the command's argv into the sandbox launcher's
	// invocation, the process attributes it needs and the extra files it
	// gets (fd 3, ...; closed once it started).
	Wrap func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error)
	// AfterRun, when set, is called after each run of the command (the
	// first, and each flake rerun), before the next one starts: the
	// caller reads what that run wrote (its test report).
	AfterRun func(attempt int)
}

// NotRun is the record for a verification that was skipped, with why.
func NotRun(command, reason, logPath, profile string) ctoharness.TestsRecord {
	return ctoharness.TestsRecord{Command: command, Classification: ctoharness.TestNotRun, Reason: reason, LogPath: logPath,
		Profile: profile, Findings: []ctoharness.ScanFinding{}, Scripts: []string{}}
}
