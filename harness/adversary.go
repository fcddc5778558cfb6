package harness

import (
	"context"
	"errors"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/schemas"
)

// AdversaryRequests lists every model request of the adversary's agent.
const AdversaryRequests = adversary.Requests

// ask is the options' question to a person, with the progress line
// cleared while it waits for the answer (nil when there is nobody).
func (r *run) ask() func(context.Context, adversary.Summary) (bool, error) {
	if r.o.Confirm == nil {
		return nil
	}
	return func(ctx context.Context, s adversary.Summary) (bool, error) {
		r.o.Progress.Close()
		defer r.o.Progress.Step("adversarial tests")
		return r.o.Confirm(ctx, s)
	}
}

// startAdversaryAgent starts the task's adversary agent before Case (its
// key, installation and endpoint checked, its meter up), so that its
// meter's address is in the run's network policy; a command adversary
// needs nothing here.
func (r *run) startAdversaryAgent(ctx context.Context) bool {
	want := r.spec.Adversary.Agent
	if want == nil {
		return true
	}
	a, err := adversary.StartAgent(ctx, adversary.AgentInput{Want: *want, Getenv: r.o.Getenv, Dir: r.o.Agent.Dir, Command: r.o.AdversaryCommand,
		Adapter: agentcase.AdapterFor, Clock: r.o.Clock})
	if err != nil {
		code := ctoharness.BlockAgentConfigInvalid
		var ae *adversary.AgentError
		if errors.As(err, &ae) {
			code = ae.Code
		}
		r.Block(ctoharness.Blocker{Code: code, Step: ctoharness.StepContract, Message: err.Error() + "; Case was not started"})
		return false
	}
	r.adv = a
	return true
}

// autoConfirm says whether the adversary's tests run without asking.
func (r *run) autoConfirm() bool { return r.o.AutoConfirm || r.o.Config.AutoConfirm }

// adversarial runs the task's adversary once the verification passed
// (package adversary), in the verification's sandbox and checkouts.
func (r *run) adversarial(ctx context.Context, own record) {
	a := r.spec.Adversary
	if a == nil || !r.OK() || r.Report.Commits.ResultCommit == "" || r.Interrupted() {
		return
	}
	r.o.Progress.Step("adversary")
	c := r.Report.Commits
	ver := r.verifier()
	in := adversary.StepInput{Spec: r.spec, Agent: r.adv, Scratch: r.scratch, Unsandboxed: r.o.Unsandboxed, AutoConfirm: r.autoConfirm(), Ask: r.ask(),
		ValidateClaims: r.o.Schemas.Validator(schemas.Claims), Clock: r.o.Clock,
		Checkout: checkout.Input{SourceRoot: r.repo.Root, SourceGitDir: r.repo.GitDir, BaselineTime: own.BaselineAt, Getenv: r.o.Getenv,
			History: own.History, Base: own.Base, Overlay: true, SourceProof: r.before,
			Store: own.Store, Baseline: c.BaselineCommit, Result: c.ResultCommit, ResultTime: own.BaselineAt},
		Hooks: adversary.StepHooks{Env: ver.Env, Policy: func() sandbox.Policy { return r.policy(true) },
			PlanView: func(argv []string) (*sandbox.View, error) {
				v, _, err := r.planView(true, argv)
				return v, err
			},
			Wrap: ver.WrapExtra, NetEnv: r.launcher.NetEnv, Prepare: agentcase.Prepare, RemoveTree: RemoveTree,
			Tests: func(ctx context.Context, t adversary.TestRun) ([]testresults.Result, string, int64, error) {
				done, err := ver.TestsOn(ctx, r.own(own), verification.TestsRun{Dir: t.Dir, Commit: t.Commit, Lay: []verification.Tests{hiddenSet{t.Set}},
					Command: t.Command, Results: t.Results, Log: t.Log, What: t.What})
				return done.Tests, done.Log, done.CommandMs, err
			}}}
	if r.adv != nil {
		in.Price = agentcase.Price(r.o.Config.Agent, a.Agent.Model)
	}
	adversary.Step(ctx, r.Sink, in)
}
