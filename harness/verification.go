package harness

import (
	"context"
	"io"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/hidden"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/step/results"
	"github.com/cto-harness/cto-harness/harness/step/testverdict"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/step/warm"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// verify grades Case's result (package harness/step/verification).
func (r *run) verify(ctx context.Context, own record, col *collected, kept *warm.Warming) {
	r.verifier().Verify(ctx, r.own(own), col.At, kept.Wait)
}

// verifyEnv is the environment and policy of a command run in a
// verification checkout (verification.Verifier.Env).
func (r *run) verifyEnv(cmd egress.Command, work, scratch string) ([]string, verify.Policy) {
	return r.verifier().Env(cmd, work, scratch)
}

// own is the verification's view of the harness's record of the fixture.
func (r *run) own(rec record) verification.Own {
	return verification.Own{Checkout: rec.Checkout, Store: rec.Store, BaselineAt: rec.BaselineAt, History: rec.History, Base: rec.Base}
}

// verifier is the verification of this run as it stands: the task, the
// profile and the source's proof, with the launcher, the warm caches and
// the hidden tests, results and verdict steps as its hooks.
func (r *run) verifier() *verification.Verifier {
	l := r.launcher
	return verification.New(r.Sink, verification.Input{Spec: r.spec, Profile: r.profile, Unsandboxed: r.o.Unsandboxed,
		AllowDangerous: r.o.AllowDangerous, SelfExe: r.o.SelfExe, Getenv: r.o.Getenv, Clock: r.o.Clock, Progress: r.o.Progress,
		Repo: r.repo, SourceProof: r.before,
		Hooks: verification.Hooks{
			Roots:  func() (string, string) { return r.roots(true) },
			Policy: func() sandbox.Policy { return r.policy(true) },
			View: func(ctx context.Context, argv []string) error {
				_, err := l.View(ctx, true, argv)
				return err
			},
			PlanView: func(argv []string) (*sandbox.View, error) {
				v, _, err := r.planView(true, argv)
				return v, err
			},
			ToolEnv: r.toolEnv, NetEnv: l.NetEnv, NetAllowed: l.NetAllowed, HasAllowlist: l.HasAllowlist,
			WrapFor: l.WrapFor, WrapIn: l.WrapIn, Unreachable: l.Unreachable,
			Hidden: verification.Hidden{
				Again: func(ctx context.Context, h *ctoharness.HiddenTests) (verification.Tests, error) {
					set, err := hidden.Again(ctx, h)
					return hiddenSet{set}, err
				},
				MakeDirs: hidden.MakeDirs},
			Results: verification.Results{Clear: results.Clear, Read: results.Read, Flaky: results.Flaky, Grade: results.Grade,
				FlakyListed: results.FlakyListed, GradingVerdict: results.GradingVerdict, Verdict: results.Verdict},
			Judge: func(rec ctoharness.TestsRecord, err error, unreached string) *ctoharness.Blocker {
				return testverdict.Judge(testverdict.Input{Rec: rec, Err: err, Sandboxed: !r.o.Unsandboxed, Profile: string(r.profile.Name),
					Unreached: unreached, Log: r.Dir.Path(evidence.TestLog)})
			},
			RemoveTree: RemoveTree,
		}})
}

// hiddenSet is a set of test files (package harness/hidden) as the
// verification lays them.
type hiddenSet struct{ hidden.Set }

func (s hiddenSet) Lay(ctx context.Context, checkout string) ([]string, error) {
	return hidden.Lay(ctx, s.Set, checkout)
}

func (s hiddenSet) WriteArchive(w io.Writer) error { return hidden.WriteArchive(w, s.Set) }
