package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/step/hidden"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/harness/verify"
	"github.com/cto-harness/cto-harness/schemas"
)

// Where the adversary's sandbox shows the result and its own directory.
const (
	adversaryCheckoutInView = "/cto-harness/result"
	adversaryTestsInView    = "/cto-harness/adversary"
	adversaryClaimsInView   = "/cto-harness/claims.json"
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
	r.tr.Trace(ctoharness.TraceRead, filepath.Join(r.scratch, claimsFile))
	data, n, problem := adversary.ReadClaims(r.scratch, claimsFile, r.o.Schemas.Validator(schemas.Claims))
	if problem != "" {
		return "", 0, problem
	}
	if err := r.dir.WriteFile(ctx, claimsArtifact, data); err != nil {
		r.blockWrite(err, ctoharness.StepVerify)
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
	if a == nil || !r.ok() || r.rep.Commits.ResultCommit == "" || r.interrupted() {
		return
	}
	r.o.Progress.Step("adversary")
	claims, n, problem := r.readClaims(ctx)
	var set hidden.Set
	rec, blocker := adversary.Run(ctx, adversary.Input{Command: a.Command, Log: evidence.AdversaryLog,
		AutoConfirm: r.autoConfirm(), Ask: r.ask(), TestCommand: a.TestCommand,
		Generate: func(ctx context.Context) (adversary.Generated, error) {
			gen, s, err := r.runAdversary(ctx, own, claims)
			if err != nil {
				return gen, err
			}
			set = s
			if err := r.dir.WriteStream(ctx, evidence.AdversaryTar, func(w io.Writer) error { return hidden.WriteArchive(w, set) }); err != nil {
				r.blockWrite(err, ctoharness.StepVerify)
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
			t := testsRun{dir: "adversary-baseline", commit: r.rep.Commits.BaselineCommit, lay: []hidden.Set{lay}, command: a.TestCommand,
				results: a.TestResults, log: evidence.AdversaryBaselineLog, what: "the adversary's tests on the baseline"}
			if onResult {
				t.dir, t.commit, t.log, t.what = "adversary-result", r.rep.Commits.ResultCommit, evidence.AdversaryResultLog, "the adversary's tests on the result"
			}
			done, err := r.testsOn(ctx, own, t)
			return done.tests, done.log, err
		}})
	rec.ClaimsArtifact, rec.Claims, rec.ClaimsProblem = claims, n, problem
	r.rep.Adversarial = rec
	if blocker != nil {
		r.block(*blocker)
	}
}

// runAdversary runs the adversary's command and reads what it wrote.
func (r *run) runAdversary(ctx context.Context, own record, claims string) (adversary.Generated, hidden.Set, error) {
	var gen adversary.Generated
	a := r.spec.Adversary
	if r.o.Unsandboxed {
		return gen, hidden.Set{}, fmt.Errorf("not run: --unsandboxed (the adversary runs only in a sandbox of its own)")
	}
	base := filepath.Join(r.rep.RuntimeWorkspaceRoot, "adversary")
	defer func() { _ = RemoveTree(filepath.Join(base, "result")) }()
	work, tests, scratch := filepath.Join(base, "result"), filepath.Join(base, "tests"), filepath.Join(base, "scratch")
	in := checkout.Input{SourceRoot: r.repo.Root, SourceGitDir: r.repo.GitDir, Dest: work, BaselineTime: own.baselineAt, Tracer: r.tr, Getenv: r.o.Getenv,
		History: r.history(), Base: r.otherBase(), Overlay: true, SourceManifest: r.before.Manifest}
	cb := checkout.Begin(ctx, in)
	defer func() { _ = cb.Stop() }()
	in.Store, in.Baseline, in.Result, in.ResultTime = own.store, r.rep.Commits.BaselineCommit, r.rep.Commits.ResultCommit, own.baselineAt
	if _, err := cb.Finish(ctx, in); err != nil {
		return gen, hidden.Set{}, fmt.Errorf("the result's checkout for the adversary could not be made: %w", err)
	}
	dirs := append([]string{tests}, backend.ScratchDirs(scratch)...)
	for _, d := range dirs {
		r.tr.Trace(ctoharness.TraceMkdir, d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return gen, hidden.Set{}, fmt.Errorf("the adversary's directory %s could not be made: %w", d, err)
		}
	}
	v, _, err := r.planView(true, a.Command)
	if err != nil {
		return gen, hidden.Set{}, fmt.Errorf("the adversary's sandbox view cannot be planned: %w", err)
	}
	// The result is bound read-only; the tests directory is its only
	// writable place besides its scratch.
	v.Files = append(v.Files, sandbox.Bind{Path: adversaryCheckoutInView, Source: work})
	if claims != "" {
		v.Files = append(v.Files, sandbox.Bind{Path: adversaryClaimsInView, Source: r.dir.Path(claims)})
	}
	v.Moved = []sandbox.Bind{{Path: adversaryTestsInView, Source: tests}}
	v.Cwd, v.Expect = adversaryTestsInView, ""
	pol := r.policy(true)
	pol.Writable = dirs // the result's checkout is not among them: read-only
	pol.View = v
	f, err := r.dir.OpenAppend(evidence.AdversaryLog)
	if err != nil {
		return gen, hidden.Set{}, fmt.Errorf("%s could not be opened: %w", evidence.AdversaryLog, err)
	}
	env, vpol := r.verifyEnv(egress.CommandVerify, scratch)
	env = append(env, adversary.EnvTask+"="+r.spec.Task, adversary.EnvCheckout+"="+adversaryCheckoutInView, adversary.EnvTestsDir+"="+adversaryTestsInView)
	if claims != "" {
		env = append(env, adversary.EnvClaims+"="+adversaryClaimsInView)
	}
	vpol.NetAllowed = nil
	vpol.Profile.FlakeReruns = 0
	secs := a.TimeoutSeconds
	if secs == 0 {
		secs = defaultAdversaryTimeout
	}
	timeout := time.Duration(secs) * time.Second
	vin := verify.Input{Command: shellJoin(a.Command), Fixture: tests, Env: env, Timeout: timeout, Log: f, LogPath: evidence.AdversaryLog, Tracer: r.tr,
		Wrap: func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
			launch, attr, pf, err := sandbox.Command(r.o.SelfExe, pol, argv)
			return launch, attr, []*os.File{pf}, err
		}}
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

// shellJoin quotes argv for sh -c, one single-quoted word per argument.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
