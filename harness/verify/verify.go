// Package verify runs the task contract's verification command in the
// fixture, with a timeout and a whole-tree kill, and classifies the outcome.
//
// Run is the plain runner. RunWithPolicy adds the policy around it: the
// execution profile, the script-safety scan (harness/scan), the test-target
// scope check, a cumulative test budget, flake reruns, separate inline
// stdout/stderr and test counts (see Preflight, Execute and Record).
package verify

import (
	"context"
	"fmt"
	"os"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/proc"
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
}

// Run executes the command with /bin/sh -c in the fixture.
func Run(ctx context.Context, in Input) (ctoharness.TestsRecord, error) {
	rec := ctoharness.TestsRecord{Command: in.Command, TimeoutSeconds: int(in.Timeout / time.Second), LogPath: in.LogPath}
	if in.LogCap == 0 {
		in.LogCap = proc.DefaultLogCap
	}
	log := proc.NewCappedFile(in.Log, in.LogCap)
	argv := []string{"/bin/sh", "-c", in.Command}
	in.Tracer.TraceExec(argv, in.Fixture)
	fmt.Fprintf(log, "$ %s\n", in.Command)
	res, err := proc.Run(ctx, proc.Spec{Argv: argv, Dir: in.Fixture, Env: in.Env, Timeout: in.Timeout, Grace: in.Grace, Stdout: log, Stderr: log})
	switch {
	case res.TimedOut:
		fmt.Fprintf(log, "[cto-harness: killed after the %s timeout]\n", in.Timeout)
	case res.ExitCode != nil:
		fmt.Fprintf(log, "[cto-harness: exit status %d after %s]\n", *res.ExitCode, res.Duration.Round(time.Millisecond))
	case res.Signal != "":
		fmt.Fprintf(log, "[cto-harness: killed by %s]\n", res.Signal)
	}
	cerr := log.Close()
	rec.DurationMs = res.Duration.Milliseconds()
	rec.TimedOut = res.TimedOut
	rec.Truncated = log.Truncated()
	rec.ExitCode = res.ExitCode
	switch {
	case err != nil:
		rec.Classification = ctoharness.TestNotRun
		rec.Reason = err.Error()
		return rec, err
	case res.TimedOut:
		rec.Classification = ctoharness.TestTimeout
		rec.Reason = fmt.Sprintf("killed after the %s timeout", in.Timeout)
	case res.ExitCode != nil && *res.ExitCode == 0:
		rec.Classification = ctoharness.TestPass
	default:
		rec.Classification = ctoharness.TestFailure
		if res.ExitCode != nil {
			rec.Reason = fmt.Sprintf("exit status %d", *res.ExitCode)
		} else {
			rec.Reason = "killed by " + res.Signal
		}
	}
	if cerr != nil {
		return rec, fmt.Errorf("write %s: %w", in.LogPath, cerr)
	}
	return rec, nil
}

// NotRun is the record for a verification that was skipped, with why.
func NotRun(command, reason, logPath string) ctoharness.TestsRecord {
	return ctoharness.TestsRecord{Command: command, Classification: ctoharness.TestNotRun, Reason: reason, LogPath: logPath}
}
