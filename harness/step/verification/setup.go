package verification

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// Env is the environment and policy of a command run in the verification
// checkout (the setup or the verification, and the adversary's commands):
// the checkout's scratch, and cmd's own network allowlist.
func (v *Verifier) Env(cmd egress.Command, work, scratch string) ([]string, verify.Policy) {
	env := append(v.in.Hooks.ToolEnv(cmd, backend.Env(scratch, "", v.in.Getenv("PATH"), v.in.Repo.Root, v.Report.SourceGitDir)), v.in.Hooks.NetEnv(cmd)...)
	pol := verify.Policy{Profile: v.in.Profile, AllowDangerous: v.in.AllowDangerous, Roots: backend.ScratchDirs(scratch)}
	if lay := v.in.Spec.Layout; lay != nil && work != "" {
		pol.Aliases = lay.Aliases(work)
	}
	pol.NetAllowed = v.in.Hooks.NetAllowed(cmd)
	return env, pol
}

// setup runs the task's setup command (installing dependencies, say) in the
// verification checkout before the verification command: the same sandbox,
// view and scratch as the verification, its own network allowlist
// (setup_allow), its own timeout, its own log (setup.log), no reruns.
// Dependencies Case installed in its fixture never reach the checkout, so
// this is where they come from. It reports whether the verification may
// run; a setup that fails, times out or is refused blocks the run with
// SETUP_FAILED.
func (v *Verifier) setup(ctx context.Context, work, scratch string) bool {
	s := v.in.Spec.Setup
	if s == nil || !v.in.Profile.RunTests {
		return true // no setup, or a profile that runs no verification either
	}
	f, err := v.Dir.OpenAppend(evidence.SetupLog)
	if err != nil {
		v.BlockWrite(err, ctoharness.StepVerify)
		v.skip("setup.log could not be opened")
		return false
	}
	env, pol := v.Env(egress.CommandSetup, work, scratch)
	timeout := time.Duration(s.TimeoutSeconds) * time.Second
	in := verify.Input{Command: s.Command, Fixture: work, Env: env, Timeout: timeout, Log: f, LogPath: evidence.SetupLog,
		Tracer: v.Trace, Wrap: v.in.Hooks.WrapFor(egress.CommandSetup)}
	pol.Profile.FlakeReruns = 0 // a setup that fails once has failed
	v.step("setup")
	before := v.checkoutGit(ctx, work)
	out, err := verify.RunWithPolicy(ctx, in, pol, verify.NewBudget(timeout, 1))
	rec := &ctoharness.SetupRecord{Command: s.Command, ExitCode: out.ExitCode, Classification: out.Classification, Reason: out.Reason,
		DurationMs: out.DurationMs, TimeoutSeconds: s.TimeoutSeconds, TimedOut: out.TimedOut, LogPath: evidence.SetupLog}
	v.Report.Setup = rec
	v.Emit(ctx, ctoharness.EvSetupDone, map[string]any{"classification": string(rec.Classification), "exit_code": rec.ExitCode,
		"duration_ms": rec.DurationMs, "log": evidence.SetupLog, "checkout_git_changes": v.checkoutGitChanges(ctx, work, before)})
	if v.Interrupted() {
		v.skip("the setup was stopped by an interrupt")
		return false
	}
	fail := func(format string, args ...any) bool {
		v.Block(ctoharness.Blocker{Code: ctoharness.BlockSetupFailed, Step: ctoharness.StepVerify, Message: fmt.Sprintf(format, args...)})
		v.skip("the setup command did not succeed, so the verification did not run")
		return false
	}
	if msg, ok := sandbox.IsSetupFailure(exitCode(rec.ExitCode), out.StderrInline); ok && !v.in.Unsandboxed {
		v.Block(ctoharness.Blocker{Code: ctoharness.BlockSandboxUnavailable, Step: ctoharness.StepVerify, Message: msg})
		v.skip("the setup command's sandbox could not be set up")
		return false
	}
	switch {
	case err != nil:
		return fail("the setup command %q could not run: %v", s.Command, err)
	case rec.Classification != ctoharness.TestPass:
		return fail("the setup command %q did not succeed (%s%s)%s%s; see %s", s.Command, rec.Classification, reasonSuffix(rec.Reason),
			errorLines(out.StderrInline, out.StdoutInline), v.unreachableSuffix(egress.CommandSetup), evidence.SetupLog)
	}
	return true
}

// unreachableSuffix says which allowed endpoints cmd could not reach: the
// policy let the connection through and this machine's network failed it
// (no route, a name that does not resolve), which no config change fixes.
func (v *Verifier) unreachableSuffix(cmd egress.Command) string {
	eps := v.in.Hooks.Unreachable(cmd)
	if len(eps) == 0 {
		return ""
	}
	var parts []string
	for _, e := range eps {
		parts = append(parts, e.Endpoint+" could not be reached from this machine ("+e.Reason+")")
	}
	return "; " + strings.Join(parts, "; ") + ": the network outside the harness, not the sandbox, stopped the connection (see network.jsonl)"
}

// errorLines is ": " and the first two lines of a failed setup's output
// that say "error" (stderr first), joined on one line, or "". An installer
// says why it stopped there (npm's "404 Not Found - GET …", pip's "ERROR: No
// matching distribution …"); the exit status alone does not.
func errorLines(outputs ...string) string {
	var lines []string
	for _, out := range outputs {
		for _, l := range strings.Split(out, "\n") {
			l = strings.TrimSpace(l)
			if len(lines) == 2 || !strings.Contains(strings.ToLower(l), "error") || slices.Contains(lines, l) {
				continue
			}
			if r := []rune(l); len(r) > 200 {
				l = string(r[:200]) + "…"
			}
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return ": " + strings.Join(lines, "; ")
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// checkoutGit lists the verification checkout's .git before a step runs
// in it (nil if it cannot be listed).
func (v *Verifier) checkoutGit(ctx context.Context, work string) []ctoharness.ManifestEntry {
	m, err := fixture.GitSnapshot(ctx, work, v.Trace)
	if err != nil {
		return nil
	}
	return m
}

// checkoutGitChanges names what a step (setup, verification) changed in
// the checkout's .git, such as an install that sets core.hooksPath: the
// step's own doing, recorded with it. The checkout is the verification's
// alone and is never collected, so this blames nothing on Case and blocks
// nothing; Case's fixture is proven separately.
func (v *Verifier) checkoutGitChanges(ctx context.Context, work string, before []ctoharness.ManifestEntry) []string {
	out := []string{}
	if before == nil {
		return out
	}
	after, err := fixture.GitSnapshot(ctx, work, v.Trace)
	if err != nil {
		return append(out, "the checkout's .git could not be listed: "+err.Error())
	}
	for i, ch := range fixture.DiffGit(before, after) {
		if i == 100 {
			out = append(out, "…")
			break
		}
		out = append(out, ".git/"+ch.Path+" "+ch.Change)
	}
	return out
}

func exitCode(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
