// Package verification is the step that grades Case's result: a fresh
// checkout of the result commit made from the harness's store, the hidden
// tests and the task's layout laid over it, the task's setup, then the
// verification command under the profile's policy (the script-safety scan,
// the test scope, the test budget and flake reruns) in the sandbox, with a
// HOME, TMPDIR and caches of its own, its test report read and graded
// and, with fail-to-pass tests, the verification run once more on the
// baseline. Nothing of Case's fixture or scratch is visible to it.
//
// The launches, the warm caches and the steps that lay hidden tests, read
// test reports and judge the record are the pipeline's to decide: they
// come in as Hooks. What the step finds goes into the sink's report
// (Tests, Setup, the hidden tests' archive); the adversary reuses its
// checkouts of the store's commits (TestsOn).
package verification

import (
	"context"
	"io"
	"os"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/progress"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// Wrap launches a command's argv (in the sandbox, or under the supervisor).
type Wrap = func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error)

// Input is what the verification reads of the run.
type Input struct {
	Spec           task.Spec
	Profile        profile.Policy
	Unsandboxed    bool
	AllowDangerous bool
	SelfExe        string // the sandbox's launcher
	Getenv         func(string) string
	Clock          func() time.Time
	Progress       *progress.Line
	// Repo is the source; a fresh checkout of a store's commit starts
	// from its worktree (an overlay held to SourceProof), with the
	// copy's history and base (Own).
	Repo        source.Repo
	SourceProof *ctoharness.SourceProof
	Hooks       Hooks
}

// Hooks are what other steps decide: the launcher's sandbox, view and
// network for the verification, the warm caches' environment, and the
// steps that lay hidden tests, read test reports and judge the record.
type Hooks struct {
	Roots        func() (work, scratch string) // the verification checkout and its scratch
	Policy       func() sandbox.Policy         // what the verification may touch
	View         func(ctx context.Context, argv []string) error
	PlanView     func(argv []string) (*sandbox.View, error)
	ToolEnv      func(cmd egress.Command, env []string) []string
	NetEnv       func(cmd egress.Command) []string
	NetAllowed   func(cmd egress.Command) func(host string) bool // nil: no allowlist in force
	HasAllowlist func(cmd egress.Command) bool
	WrapFor      func(cmd egress.Command) Wrap
	WrapIn       func(cmd egress.Command, own *sandbox.Policy) Wrap
	Unreachable  func(cmd egress.Command) []egress.Unreachable
	Hidden       Hidden
	Results      Results
	// Judge blocks what the verification's record means for the run
	// (nil: nothing), given the command's start failure and the
	// endpoints it could not reach.
	Judge      func(rec ctoharness.TestsRecord, err error, unreached string) *ctoharness.Blocker
	RemoveTree func(string) error
}

// Tests are test files to lay over a checkout: the task's hidden tests,
// or the adversary's.
type Tests interface {
	Lay(ctx context.Context, checkout string) (overridden []string, err error)
	WriteArchive(w io.Writer) error
}

// Hidden reads the task's hidden tests again (checked against the digest
// recorded before Case started) and makes the layout's directories empty
// (but for keep, the test report's path), returning what it removed.
type Hidden struct {
	Again    func(ctx context.Context, rec *ctoharness.HiddenTests) (Tests, error)
	MakeDirs func(ctx context.Context, checkout string, rels, keep []string) ([]string, error)
}

// Results reads and grades the task's machine-readable test report.
type Results struct {
	Clear          func(checkout string, tr task.TestResults) (planted bool, err error)
	Read           func(checkout string, tr task.TestResults, runID string, planted bool) (testresults.File, ctoharness.TestResultsSummary)
	Flaky          func(runs [][]testresults.Result) []string
	Grade          func(failToPass, passToPass []string, tests []testresults.Result) *ctoharness.Grading
	FlakyListed    func(flaky []string, g *ctoharness.Grading) []string
	GradingVerdict func(g *ctoharness.Grading) string
	Verdict        func(sum ctoharness.TestResultsSummary) (ctoharness.BlockerCode, string)
}

// Own is the harness's record of the fixture the checkouts come from:
// the baseline checkout begun beside the fixture, the store holding the
// baseline and the result, and when the baseline was made.
type Own struct {
	Checkout   *checkout.Baseline
	Store      string
	BaselineAt time.Time
	// History and Base are the copy's: the task's history, and the base
	// commit when it is not the source's HEAD ("").
	History fixture.History
	Base    string
}

// Verifier runs the verification of one run.
type Verifier struct {
	*runsink.Sink
	in Input
}

// New is the verification of the run whose evidence goes to sink.
func New(sink *runsink.Sink, in Input) *Verifier { return &Verifier{Sink: sink, in: in} }

// Skip records a verification that did not run, and why.
func Skip(rep *ctoharness.Report, spec task.Spec, prof profile.Policy, reason string) {
	rep.Tests = verify.NotRun(spec.Verification.Command, reason, evidence.TestLog, string(prof.Name))
}

func (v *Verifier) skip(reason string) { Skip(v.Report, v.in.Spec, v.in.Profile, reason) }

func (v *Verifier) step(name string) { v.in.Progress.Step(name) }
