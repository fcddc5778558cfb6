package adversary

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/hidden"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// Where the adversary's sandbox shows the result and its own directory.
const (
	CheckoutInView = "/cto-harness/result"
	TestsInView    = "/cto-harness/adversary"
	ClaimsInView   = "/cto-harness/claims.json"
	DiffInView     = "/cto-harness/patch.diff"
)

// ClaimsFile is where, in Case's scratch (its HOME, which it may write),
// the contract lets Case write its claims; ClaimsArtifact is their copy in
// the run directory.
const (
	ClaimsFile     = "home/claims.json"
	ClaimsArtifact = "claims.json"
)

// Requests lists every model request of the adversary's agent.
const Requests = "backend/adversary-requests.jsonl"

// DefaultTimeout bounds an adversary whose task gives none, in seconds.
const DefaultTimeout = 600

// StepInput is the adversary step of one run: the task, Case's scratch
// (where its claims are), the result's checkout as the pipeline knows it,
// and the verification's parts as hooks.
type StepInput struct {
	Spec        task.Spec // its Adversary is set
	Agent       *Agent    // the adversary's agent, started at the contract (nil: a command)
	Scratch     string
	Unsandboxed bool
	AutoConfirm bool
	Ask         func(ctx context.Context, s Summary) (bool, error)
	// ValidateClaims checks Case's claims against their schema.
	ValidateClaims func([]byte) error
	// Checkout is the result's checkout: the source, history and base the
	// run's checkouts take, and the store with the baseline and result.
	Checkout checkout.Input
	Price    *config.Price // the adversary agent's model price
	Clock    func() time.Time
	Hooks    StepHooks
}

// StepHooks are the verification's parts the adversary's command and its
// tests run with.
type StepHooks struct {
	// Env is a verification command's environment and policy.
	Env func(cmd egress.Command, work, scratch string) ([]string, verify.Policy)
	// PlanView and Policy are the verification's view and sandbox.
	PlanView func(argv []string) (*sandbox.View, error)
	Policy   func() sandbox.Policy
	// Wrap launches cmd in pol, through the run's forwarder when net is set.
	Wrap   func(cmd egress.Command, pol sandbox.Policy, net bool) func([]string) ([]string, *syscall.SysProcAttr, []*os.File, error)
	NetEnv func(egress.Command) []string
	// Tests runs a set of test files on a fresh checkout of a commit.
	Tests func(ctx context.Context, t TestRun) (tests []testresults.Result, log string, commandMs int64, err error)
	// Prepare makes an agent's state directory for its command.
	Prepare    func(tr ctoharness.Tracer, state string, cmd agent.Command) error
	RemoveTree func(string) error
}

// TestRun is one run of the adversary's kept tests.
type TestRun struct {
	Dir, Commit string // its directory in the workspace, the store's commit
	Set         hidden.Set
	Command     string
	Results     task.TestResults
	Log, What   string
}

// Step runs the task's adversary once the verification passed (Run holds
// the step's rules and record): its command runs in a sandbox of its own,
// which sees the task text and a read-only checkout of the result (never
// Case's fixture, scratch or transcript) and writes tests into its own
// directory, and those tests run on fresh checkouts of the baseline and
// the result. Nothing of it changes the result.
func Step(ctx context.Context, s *runsink.Sink, in StepInput) {
	a := in.Spec.Adversary
	start := in.Clock()
	var testsMs int64
	claims, n, problem := readClaims(ctx, s, in)
	var set hidden.Set
	command := a.Command
	if ag := a.Agent; ag != nil {
		command = []string{ag.Name, "--model", ag.Model} // its own command line is the adapter's
	}
	rec, blocker := Run(ctx, Input{Command: command, Log: evidence.AdversaryLog,
		AutoConfirm: in.AutoConfirm, Ask: in.Ask, TestCommand: a.TestCommand,
		Generate: func(ctx context.Context) (Generated, error) {
			gen, got, err := generate(ctx, s, in, claims)
			if err != nil {
				return gen, err
			}
			set = got
			if err := s.Dir.WriteStream(ctx, evidence.AdversaryTar, func(w io.Writer) error { return hidden.WriteArchive(w, set) }); err != nil {
				s.BlockWrite(err, ctoharness.StepVerify)
				return gen, fmt.Errorf("%s could not be written: %w", evidence.AdversaryTar, err)
			}
			gen.Archive = evidence.AdversaryTar
			return gen, nil
		},
		Tests: func(ctx context.Context, onResult bool, kept []string) ([]testresults.Result, string, error) {
			t := keptRun(s.Report.Commits, a, set, kept, onResult)
			tests, log, ms, err := in.Hooks.Tests(ctx, t)
			testsMs += ms
			return tests, log, err
		}})
	rec.StepMs, rec.TestsMs = in.Clock().Sub(start).Milliseconds(), testsMs
	rec.ClaimsArtifact, rec.Claims, rec.ClaimsProblem = claims, n, problem
	agentRecord(ctx, s, in, rec)
	s.Report.Adversarial = rec
	if blocker != nil {
		s.Block(*blocker)
	}
}

// keptRun is the run of the kept files' tests on the baseline or the result.
func keptRun(c ctoharness.Commits, a *task.SpecAdversary, set hidden.Set, kept []string, onResult bool) TestRun {
	keep := make(map[string]bool, len(kept))
	for _, p := range kept {
		keep[p] = true
	}
	lay := set.Keep(func(f hidden.File) bool { return keep[f.Path] })
	t := TestRun{Dir: "adversary-baseline", Commit: c.BaselineCommit, Set: lay,
		Command: a.TestCommand, Results: a.TestResults, Log: evidence.AdversaryBaselineLog, What: "the adversary's tests on the baseline"}
	if onResult {
		t.Dir, t.Commit, t.Log, t.What = "adversary-result", c.ResultCommit, evidence.AdversaryResultLog, "the adversary's tests on the result"
	}
	return t
}

// readClaims keeps Case's claims (ReadClaims reads them) as claims.json in
// the run directory.
func readClaims(ctx context.Context, s *runsink.Sink, in StepInput) (artifact string, n int, problem string) {
	s.Trace.Trace(ctoharness.TraceRead, filepath.Join(in.Scratch, ClaimsFile))
	data, n, problem := ReadClaims(in.Scratch, ClaimsFile, in.ValidateClaims)
	if problem != "" {
		return "", 0, problem
	}
	if err := s.Dir.WriteFile(ctx, ClaimsArtifact, data); err != nil {
		s.BlockWrite(err, ctoharness.StepVerify)
		return "", 0, "Case's claims could not be kept: " + err.Error()
	}
	return ClaimsArtifact, n, ""
}

// generate runs the adversary's command and reads what it wrote.
func generate(ctx context.Context, s *runsink.Sink, in StepInput, claims string) (Generated, hidden.Set, error) {
	var gen Generated
	a := in.Spec.Adversary
	if in.Unsandboxed {
		return gen, hidden.Set{}, fmt.Errorf("not run: --unsandboxed (the adversary runs only in a sandbox of its own)")
	}
	base := filepath.Join(s.Report.RuntimeWorkspaceRoot, "adversary")
	defer func() { _ = in.Hooks.RemoveTree(filepath.Join(base, "result")) }()
	d := dirs{work: filepath.Join(base, "result"), tests: filepath.Join(base, "tests"), scratch: filepath.Join(base, "scratch")}
	cb, err := resultCheckout(ctx, s, in, &d)
	defer func() { _ = cb.Stop() }() // unmounts the result's overlay checkout once the adversary is done
	if err != nil {
		return gen, hidden.Set{}, err
	}
	argv, env, vpol, pol, err := launch(s, in, claims, d)
	if err != nil {
		return gen, hidden.Set{}, err
	}
	f, err := s.Dir.OpenAppend(evidence.AdversaryLog)
	if err != nil {
		return gen, hidden.Set{}, fmt.Errorf("%s could not be opened: %w", evidence.AdversaryLog, err)
	}
	vpol.NetAllowed = nil
	vpol.Profile.FlakeReruns = 0
	secs := a.TimeoutSeconds
	if secs == 0 {
		secs = DefaultTimeout
	}
	timeout := time.Duration(secs) * time.Second
	// A command adversary has no network; an agent reaches its meter alone.
	vin := verify.Input{Command: shellJoin(argv), Fixture: d.tests, Env: env, Timeout: timeout, Log: f, LogPath: evidence.AdversaryLog, Tracer: s.Trace,
		Wrap: in.Hooks.Wrap(egress.CommandAdversary, pol, in.Agent != nil)}
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
	return written(ctx, gen, d.tests)
}

// written reads the tests the adversary wrote.
func written(ctx context.Context, gen Generated, tests string) (Generated, hidden.Set, error) {
	set, err := hidden.Read(ctx, tests)
	if err != nil {
		return gen, hidden.Set{}, fmt.Errorf("what the adversary wrote cannot be used: %w", err)
	}
	gen.Digest = set.Digest
	for _, f := range set.Files {
		gen.Files = append(gen.Files, File{Path: f.Path, Data: f.Data()})
	}
	return gen, set, nil
}

// dirs are the adversary's directories in the workspace: the result's
// checkout it reads, the tests it writes and its scratch; writable are the
// ones it may write.
type dirs struct {
	work, tests, scratch string
	writable             []string
}

// resultCheckout makes the result's checkout the adversary reads, and its
// tests and scratch directories. The caller stops the checkout once
// nothing more runs in it.
func resultCheckout(ctx context.Context, s *runsink.Sink, in StepInput, d *dirs) (*checkout.Baseline, error) {
	co := in.Checkout
	co.Dest, co.Tracer = d.work, s.Trace
	begin := co
	begin.Store, begin.Baseline, begin.Result, begin.ResultTime = "", "", "", time.Time{}
	cb := checkout.Begin(ctx, begin)
	if _, err := cb.Finish(ctx, co); err != nil {
		return cb, fmt.Errorf("the result's checkout for the adversary could not be made: %w", err)
	}
	d.writable = append([]string{d.tests}, backend.ScratchDirs(d.scratch)...)
	for _, p := range d.writable {
		s.Trace.Trace(ctoharness.TraceMkdir, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return cb, fmt.Errorf("the adversary's directory %s could not be made: %w", p, err)
		}
	}
	return cb, nil
}

// launch is the adversary's command, environment and sandbox: the result
// is bound read-only, and the tests directory is its only writable place
// besides its scratch.
func launch(s *runsink.Sink, in StepInput, claims string, d dirs) ([]string, []string, verify.Policy, sandbox.Policy, error) {
	a := in.Spec.Adversary
	env, vpol := in.Hooks.Env(egress.CommandVerify, "", d.scratch)
	env = append(env, EnvTask+"="+in.Spec.Task, EnvCheckout+"="+CheckoutInView, EnvTestsDir+"="+TestsInView)
	if claims != "" {
		env = append(env, EnvClaims+"="+ClaimsInView)
	}
	if a.ShowDiff {
		env = append(env, EnvDiff+"="+DiffInView)
	}
	argv, env, err := argvFor(s, in, env, d.scratch)
	if err != nil {
		return nil, nil, vpol, sandbox.Policy{}, err
	}
	v, err := in.Hooks.PlanView(argv)
	if err != nil {
		return nil, nil, vpol, sandbox.Policy{}, fmt.Errorf("the adversary's sandbox view cannot be planned: %w", err)
	}
	v.Files = append(v.Files, sandbox.Bind{Path: CheckoutInView, Source: d.work})
	if claims != "" {
		v.Files = append(v.Files, sandbox.Bind{Path: ClaimsInView, Source: s.Dir.Path(claims)})
	}
	if a.ShowDiff {
		v.Files = append(v.Files, sandbox.Bind{Path: DiffInView, Source: s.Dir.Path(evidence.PatchFile)})
	}
	v.Moved = []sandbox.Bind{{Path: TestsInView, Source: d.tests}}
	v.Cwd, v.Expect = TestsInView, ""
	v.Links = nil // a task's layout is the verification's, not the adversary's
	pol := in.Hooks.Policy()
	pol.Writable = d.writable // the result's checkout is not among them: read-only
	pol.View = v
	return argv, env, vpol, pol, nil
}

// argvFor is the adversary's command line and environment: the task's
// command as given, or its agent's, started in the tests directory with
// the harness's prompt, its state in the adversary's own scratch HOME and
// its model requests through its meter.
func argvFor(s *runsink.Sink, in StepInput, env []string, scratch string) ([]string, []string, error) {
	a := in.Spec.Adversary
	if in.Agent == nil {
		return a.Command, env, nil
	}
	state := filepath.Join(scratch, "home", ".cto-harness-agent")
	brief := Brief{Task: in.Spec.Task, Checkout: CheckoutInView, TestCommand: a.TestCommand, TestResults: a.TestResults}
	if a.ShowDiff {
		brief.Diff = DiffInView
	}
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, EnvClaims+"=") }) {
		brief.Claims = ClaimsInView
	}
	cmd, err := in.Agent.Command(Launch{WorkDir: TestsInView, State: state, BaseEnv: append(env, in.Hooks.NetEnv(egress.CommandAdversary)...),
		Brief: brief, Root: os.Geteuid() == 0})
	if err != nil {
		return nil, nil, fmt.Errorf("the adversary's agent command cannot be built: %w", err)
	}
	if err := in.Hooks.Prepare(s.Trace, state, cmd); err != nil {
		return nil, nil, fmt.Errorf("the adversary agent's state could not be made: %w", err)
	}
	return cmd.Argv, cmd.Env, nil
}

// agentRecord records the adversary agent's usage (and the requests as
// evidence) once it has run.
func agentRecord(ctx context.Context, s *runsink.Sink, in StepInput, rec *ctoharness.AdversarialRecord) {
	if in.Agent == nil {
		return
	}
	var caseAgent, caseModel string
	if a := s.Report.Agent; a != nil {
		caseAgent, caseModel = a.Name, a.Model
	}
	ag, lines := in.Agent.Record(in.Price, caseAgent, caseModel)
	if err := s.Dir.WriteFile(ctx, Requests, lines); err != nil {
		s.BlockWrite(err, ctoharness.StepVerify)
	} else {
		ag.Requests = Requests
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
