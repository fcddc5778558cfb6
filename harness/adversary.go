package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/hidden"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/verification"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/harness/verify"
	"github.com/cto-harness/cto-harness/schemas"
)

// Where the adversary's sandbox shows the result and its own directory.
const (
	adversaryCheckoutInView = "/cto-harness/result"
	adversaryTestsInView    = "/cto-harness/adversary"
	adversaryClaimsInView   = "/cto-harness/claims.json"
	adversaryDiffInView     = "/cto-harness/patch.diff"
)

// claimsFile is where, in Case's scratch (its HOME, which it may write),
// the contract lets Case write its claims; claimsArtifact is their copy in
// the run directory.
const (
	claimsFile     = "home/claims.json"
	claimsArtifact = "claims.json"
)

// readClaims keeps Case's claims (package adversary reads them) as
// claims.json in the run directory.
func (r *run) readClaims(ctx context.Context) (artifact string, n int, problem string) {
	r.Trace.Trace(ctoharness.TraceRead, filepath.Join(r.scratch, claimsFile))
	data, n, problem := adversary.ReadClaims(r.scratch, claimsFile, r.o.Schemas.Validator(schemas.Claims))
	if problem != "" {
		return "", 0, problem
	}
	if err := r.Dir.WriteFile(ctx, claimsArtifact, data); err != nil {
		r.BlockWrite(err, ctoharness.StepVerify)
		return "", 0, "Case's claims could not be kept: " + err.Error()
	}
	return claimsArtifact, n, ""
}

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

// AdversaryRequests lists every model request of the adversary's agent.
const AdversaryRequests = "backend/adversary-requests.jsonl"

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

// defaultAdversaryTimeout bounds an adversary whose task gives none.
const defaultAdversaryTimeout = 600

// adversarial runs the task's adversary once the verification passed
// (package adversary holds the step's rules and record): the pipeline's
// part is to run the adversary's command in a sandbox of its own, which
// sees the task text and a read-only checkout of the result (never Case's
// fixture, scratch or transcript) and writes tests into its own directory,
// and to run those tests on fresh checkouts of the baseline and the result.
// Nothing of it changes the result.
func (r *run) adversarial(ctx context.Context, own record) {
	a := r.spec.Adversary
	if a == nil || !r.OK() || r.Report.Commits.ResultCommit == "" || r.Interrupted() {
		return
	}
	r.o.Progress.Step("adversary")
	start := r.o.Clock()
	var testsMs int64
	claims, n, problem := r.readClaims(ctx)
	var set hidden.Set
	command := a.Command
	if ag := a.Agent; ag != nil {
		command = []string{ag.Name, "--model", ag.Model} // its own command line is the adapter's
	}
	rec, blocker := adversary.Run(ctx, adversary.Input{Command: command, Log: evidence.AdversaryLog,
		AutoConfirm: r.autoConfirm(), Ask: r.ask(), TestCommand: a.TestCommand,
		Generate: func(ctx context.Context) (adversary.Generated, error) {
			gen, s, err := r.runAdversary(ctx, own, claims)
			if err != nil {
				return gen, err
			}
			set = s
			if err := r.Dir.WriteStream(ctx, evidence.AdversaryTar, func(w io.Writer) error { return hidden.WriteArchive(w, set) }); err != nil {
				r.BlockWrite(err, ctoharness.StepVerify)
				return gen, fmt.Errorf("%s could not be written: %w", evidence.AdversaryTar, err)
			}
			gen.Archive = evidence.AdversaryTar
			return gen, nil
		},
		Tests: func(ctx context.Context, onResult bool, kept []string) ([]testresults.Result, string, error) {
			keep := make(map[string]bool, len(kept))
			for _, p := range kept {
				keep[p] = true
			}
			lay := set.Keep(func(f hidden.File) bool { return keep[f.Path] })
			t := verification.TestsRun{Dir: "adversary-baseline", Commit: r.Report.Commits.BaselineCommit, Lay: []verification.Tests{hiddenSet{lay}},
				Command: a.TestCommand, Results: a.TestResults, Log: evidence.AdversaryBaselineLog, What: "the adversary's tests on the baseline"}
			if onResult {
				t.Dir, t.Commit, t.Log, t.What = "adversary-result", r.Report.Commits.ResultCommit, evidence.AdversaryResultLog, "the adversary's tests on the result"
			}
			done, err := r.verifier().TestsOn(ctx, r.own(own), t)
			testsMs += done.CommandMs
			return done.Tests, done.Log, err
		}})
	rec.StepMs, rec.TestsMs = r.o.Clock().Sub(start).Milliseconds(), testsMs
	rec.ClaimsArtifact, rec.Claims, rec.ClaimsProblem = claims, n, problem
	r.adversaryAgentRecord(ctx, rec)
	r.Report.Adversarial = rec
	if blocker != nil {
		r.Block(*blocker)
	}
}

// runAdversary runs the adversary's command and reads what it wrote.
func (r *run) runAdversary(ctx context.Context, own record, claims string) (adversary.Generated, hidden.Set, error) {
	var gen adversary.Generated
	a := r.spec.Adversary
	if r.o.Unsandboxed {
		return gen, hidden.Set{}, fmt.Errorf("not run: --unsandboxed (the adversary runs only in a sandbox of its own)")
	}
	base := filepath.Join(r.Report.RuntimeWorkspaceRoot, "adversary")
	defer func() { _ = RemoveTree(filepath.Join(base, "result")) }()
	work, tests, scratch := filepath.Join(base, "result"), filepath.Join(base, "tests"), filepath.Join(base, "scratch")
	cb, dirs, err := r.adversaryCheckout(ctx, own, work, tests, scratch)
	defer func() { _ = cb.Stop() }() // unmounts the result's overlay checkout once the adversary is done
	if err != nil {
		return gen, hidden.Set{}, err
	}
	argv, env, vpol, pol, err := r.adversaryLaunch(a, claims, work, tests, scratch, dirs)
	if err != nil {
		return gen, hidden.Set{}, err
	}
	f, err := r.Dir.OpenAppend(evidence.AdversaryLog)
	if err != nil {
		return gen, hidden.Set{}, fmt.Errorf("%s could not be opened: %w", evidence.AdversaryLog, err)
	}
	vpol.NetAllowed = nil
	vpol.Profile.FlakeReruns = 0
	secs := a.TimeoutSeconds
	if secs == 0 {
		secs = defaultAdversaryTimeout
	}
	timeout := time.Duration(secs) * time.Second
	// A command adversary has no network; an agent reaches its meter alone.
	vin := verify.Input{Command: shellJoin(argv), Fixture: tests, Env: env, Timeout: timeout, Log: f, LogPath: evidence.AdversaryLog, Tracer: r.Trace,
		Wrap: r.verifier().WrapExtra(egress.CommandAdversary, pol, r.adv != nil)}
	out, err := verify.RunWithPolicy(ctx, vin, vpol, verify.NewBudget(timeout, 1))
	gen.ExitCode, gen.DurationMs, gen.TimedOut = out.ExitCode, out.DurationMs, out.Classification == ctoharness.TestTimeout
	switch {
	case err != nil:
		return gen, hidden.Set{}, fmt.Errorf("the adversary could not run: %w", err)
	case out.Refusal != "":
		return gen, hidden.Set{}, fmt.Errorf("the adversary's command was refused (%s: %s)", out.Refusal, out.Reason)
	case out.ExitCode == nil || *out.ExitCode != 0:
		return gen, hidden.Set{}, fmt.Errorf("the adversary did not finish (%s: %s); see %s", out.Classification, out.Reason, evidence.AdversaryLog)
	}
	set, err := hidden.Read(ctx, tests)
	if err != nil {
		return gen, hidden.Set{}, fmt.Errorf("what the adversary wrote cannot be used: %w", err)
	}
	gen.Digest = set.Digest
	for _, f := range set.Files {
		gen.Files = append(gen.Files, adversary.File{Path: f.Path, Data: f.Data()})
	}
	return gen, set, nil
}

// adversaryCheckout makes the result's checkout the adversary reads, and
// its tests and scratch directories (the writable ones, returned). The
// caller stops the checkout once nothing more runs in it.
func (r *run) adversaryCheckout(ctx context.Context, own record, work, tests, scratch string) (*checkout.Baseline, []string, error) {
	in := checkout.Input{SourceRoot: r.repo.Root, SourceGitDir: r.repo.GitDir, Dest: work, BaselineTime: own.BaselineAt, Tracer: r.Trace, Getenv: r.o.Getenv,
		History: own.History, Base: own.Base, Overlay: true, SourceManifest: r.before.Manifest}
	cb := checkout.Begin(ctx, in)
	in.Store, in.Baseline, in.Result, in.ResultTime = own.Store, r.Report.Commits.BaselineCommit, r.Report.Commits.ResultCommit, own.BaselineAt
	if _, err := cb.Finish(ctx, in); err != nil {
		return cb, nil, fmt.Errorf("the result's checkout for the adversary could not be made: %w", err)
	}
	dirs := append([]string{tests}, backend.ScratchDirs(scratch)...)
	for _, d := range dirs {
		r.Trace.Trace(ctoharness.TraceMkdir, d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return cb, nil, fmt.Errorf("the adversary's directory %s could not be made: %w", d, err)
		}
	}
	return cb, dirs, nil
}

// adversaryLaunch is the adversary's command, environment and sandbox: the
// result is bound read-only, and the tests directory is its only writable
// place besides its scratch.
func (r *run) adversaryLaunch(a *task.SpecAdversary, claims, work, tests, scratch string, dirs []string) ([]string, []string, verify.Policy, sandbox.Policy, error) {
	env, vpol := r.verifyEnv(egress.CommandVerify, "", scratch)
	env = append(env, adversary.EnvTask+"="+r.spec.Task, adversary.EnvCheckout+"="+adversaryCheckoutInView, adversary.EnvTestsDir+"="+adversaryTestsInView)
	if claims != "" {
		env = append(env, adversary.EnvClaims+"="+adversaryClaimsInView)
	}
	if a.ShowDiff {
		env = append(env, adversary.EnvDiff+"="+adversaryDiffInView)
	}
	argv, env, err := r.adversaryArgv(a, env, scratch)
	if err != nil {
		return nil, nil, vpol, sandbox.Policy{}, err
	}
	v, _, err := r.planView(true, argv)
	if err != nil {
		return nil, nil, vpol, sandbox.Policy{}, fmt.Errorf("the adversary's sandbox view cannot be planned: %w", err)
	}
	v.Files = append(v.Files, sandbox.Bind{Path: adversaryCheckoutInView, Source: work})
	if claims != "" {
		v.Files = append(v.Files, sandbox.Bind{Path: adversaryClaimsInView, Source: r.Dir.Path(claims)})
	}
	if a.ShowDiff {
		v.Files = append(v.Files, sandbox.Bind{Path: adversaryDiffInView, Source: r.Dir.Path(evidence.PatchFile)})
	}
	v.Moved = []sandbox.Bind{{Path: adversaryTestsInView, Source: tests}}
	v.Cwd, v.Expect = adversaryTestsInView, ""
	v.Links = nil // a task's layout is the verification's, not the adversary's
	pol := r.policy(true)
	pol.Writable = dirs // the result's checkout is not among them: read-only
	pol.View = v
	return argv, env, vpol, pol, nil
}

// adversaryArgv is the adversary's command line and environment: the
// task's command as given, or its agent's, started in the tests
// directory with the harness's prompt, its state in the adversary's own
// scratch HOME and its model requests through its meter.
func (r *run) adversaryArgv(a *task.SpecAdversary, env []string, scratch string) ([]string, []string, error) {
	if r.adv == nil {
		return a.Command, env, nil
	}
	state := filepath.Join(scratch, "home", ".cto-harness-agent")
	brief := adversary.Brief{Task: r.spec.Task, Checkout: adversaryCheckoutInView, TestCommand: a.TestCommand, TestResults: a.TestResults}
	if a.ShowDiff {
		brief.Diff = adversaryDiffInView
	}
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, adversary.EnvClaims+"=") }) {
		brief.Claims = adversaryClaimsInView
	}
	cmd, err := r.adv.Command(adversary.Launch{WorkDir: adversaryTestsInView, State: state, BaseEnv: append(env, r.launcher.NetEnv(egress.CommandAdversary)...),
		Brief: brief, Root: os.Geteuid() == 0})
	if err != nil {
		return nil, nil, fmt.Errorf("the adversary's agent command cannot be built: %w", err)
	}
	if err := agentcase.Prepare(r.Trace, state, cmd); err != nil {
		return nil, nil, fmt.Errorf("the adversary agent's state could not be made: %w", err)
	}
	return cmd.Argv, cmd.Env, nil
}

// adversaryAgentRecord records the adversary agent's usage (and the
// requests as evidence) once it has run.
func (r *run) adversaryAgentRecord(ctx context.Context, rec *ctoharness.AdversarialRecord) {
	if r.adv == nil {
		return
	}
	var caseAgent, caseModel string
	if a := r.Report.Agent; a != nil {
		caseAgent, caseModel = a.Name, a.Model
	}
	ag, lines := r.adv.Record(agentcase.Price(r.o.Config.Agent, r.spec.Adversary.Agent.Model), caseAgent, caseModel)
	if err := r.Dir.WriteFile(ctx, AdversaryRequests, lines); err != nil {
		r.BlockWrite(err, ctoharness.StepVerify)
	} else {
		ag.Requests = AdversaryRequests
	}
	rec.Agent = ag
}

// shellJoin quotes argv for sh -c, one single-quoted word per argument.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
