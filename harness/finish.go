package harness

import (
	"context"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/report"
)

// finish stops what the steps still hold (the egress, the agents' meters,
// the progress line) and closes the run (package report).
func (r *run) finish(ctx context.Context, jumps func() []ctoharness.ClockJump) (*ctoharness.Report, error) {
	r.SetStep(ctoharness.StepReport)
	r.launcher.StopEgress()
	r.agent.Close()
	r.adv.Close()
	r.FreeSpace()
	r.o.Progress.Close()
	if r.Report.Tests.Classification == "" {
		r.skipVerify("the run did not reach verification")
	}
	o := r.o
	return report.Finish(ctx, r.Sink, report.Input{
		Qualifiable: o.Scenario == "pass" && o.Fault == "" && o.AllowedCheck == nil && o.Sync == nil && !o.Unsandboxed && r.profile.Qualifies && !o.AllowDangerous,
		Unsandboxed: o.Unsandboxed, RunsDir: o.RunsDir, Signing: o.Signing, Schemas: o.Schemas, Getenv: o.Getenv, Clock: o.Clock,
		SelfExe: o.SelfExe, Previous: r.prev, Jumps: jumps,
		Redact:       func(names ...string) { agentcase.Sweep(r.Sink, r.secrets(), names...) },
		RedactReport: func(rep *ctoharness.Report) { agentcase.RedactReport(rep, r.secrets()) }})
}
