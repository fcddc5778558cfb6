package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// TestMain lets this test binary be the fake Case: the pipeline re-executes
// SelfExe (this binary) with the hidden subcommand, as a real child process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == backend.FakeSubcommand {
		os.Exit(fakecase.Main(os.Args[2:], os.Stdout, os.Stderr, os.Getenv))
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.Subcommand {
		os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == supervise.Subcommand {
		os.Exit(supervise.Main(os.Args[2:], os.Stderr))
	}
	code := m.Run()
	for _, d := range sharedDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// sharedDirs hold what the package's tests share (sharedGoRepo,
// sharedStage2), made on first use and removed once every test has run.
var sharedDirs []string

type env map[string]string

func (e env) get(k string) string {
	if k == "PATH" {
		return os.Getenv("PATH")
	}
	return e[k]
}

func compile(t *testing.T) *schemas.Set {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func options(t *testing.T, set *schemas.Set, runs string, stage int, e env) harness.Options {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return harness.Options{Stage: stage, RunsDir: runs, Schemas: set, SelfExe: exe, Getenv: e.get,
		VerifyRun: validators.StageRunVerifier(set)}
}

// testKeys are in-memory signing keys: the stage 2 record they sign opens
// stage 3's gate, as the machine key's does outside tests.
func testKeys(t testing.TB) attest.Keys {
	t.Helper()
	k, err := attest.Ephemeral()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func materialize(t *testing.T, name, dir string) string {
	t.Helper()
	archive, err := fixtures.Archive(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fixtures.Materialize(context.Background(), archive, dir, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func codes(rep *ctoharness.Report) []ctoharness.BlockerCode {
	var out []ctoharness.BlockerCode
	for _, b := range rep.Blockers {
		out = append(out, b.Code)
	}
	return out
}

func hasCode(rep *ctoharness.Report, c ctoharness.BlockerCode) bool {
	for _, b := range rep.Blockers {
		if b.Code == c {
			return true
		}
	}
	return false
}

func mustValidate(t *testing.T, set *schemas.Set, rep *ctoharness.Report, expectPass bool) {
	t.Helper()
	res := validators.Run(context.Background(), rep.RunArtifactDir, set, validators.RunOptions{ExpectPass: expectPass})
	if !res.OK {
		t.Fatalf("run %s does not validate: %v", rep.RunArtifactDir, res.Errors)
	}
}

func TestStage1Pass(t *testing.T) {
	set := compile(t)
	rep, err := harness.Run(context.Background(), options(t, set, t.TempDir(), 1, env{}))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("status %s: %v", rep.Status, rep.Blockers)
	}
	if rep.CaseProcessStarted || rep.Backend != ctoharness.BackendFake || rep.CaseLane != ctoharness.LaneNone {
		t.Fatalf("stage 1 must not start Case: %+v", rep)
	}
	if len(rep.ChangedFiles) != 1 || rep.ChangedFiles[0].Path != "notes/CASE_NOTES.md" || !rep.ChangedFiles[0].Allowed {
		t.Fatalf("changed files %+v", rep.ChangedFiles)
	}
	if rep.Commits.BaselineTree != rep.Commits.SourceTree || rep.Commits.ResultCommit == rep.Commits.BaselineCommit {
		t.Fatalf("commits %+v", rep.Commits)
	}
	mustValidate(t, set, rep, true)
}

// Stage 2 and 3 gates: every missing piece is reported, the run is blocked
// before any Case process, and the blocked run is valid evidence.
func TestGateRefusals(t *testing.T) {
	set := compile(t)
	tests := []struct {
		name  string
		stage int
		env   env
		want  []ctoharness.BlockerCode
	}{
		{"stage2 nothing set", 2, env{}, []ctoharness.BlockerCode{ctoharness.BlockAllowCaseMissing, ctoharness.BlockCaseStageMissing, ctoharness.BlockPrevStageMissing}},
		{"stage2 wrong stage", 2, env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}, []ctoharness.BlockerCode{ctoharness.BlockCaseStageMismatch, ctoharness.BlockPrevStageMissing}},
		{"stage2 allow=yes", 2, env{gates.EnvAllowCase: "yes", gates.EnvCaseStage: "2"}, []ctoharness.BlockerCode{ctoharness.BlockAllowCaseMissing, ctoharness.BlockPrevStageMissing}},
		{"stage4", 4, env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "4"}, []ctoharness.BlockerCode{ctoharness.BlockStageNotApproved}},
		{"stage6", 6, env{}, []ctoharness.BlockerCode{ctoharness.BlockStageNotApproved}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := harness.Run(context.Background(), options(t, set, t.TempDir(), tc.stage, tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if got := codes(rep); strings.Join(codeStrings(got), ",") != strings.Join(codeStrings(tc.want), ",") {
				t.Fatalf("blockers %v, want %v", got, tc.want)
			}
			if rep.CaseProcessStarted || rep.Status != ctoharness.StatusBlocked || rep.SourcePath != "" {
				t.Fatalf("gate refusal went further: %+v", rep)
			}
			mustValidate(t, set, rep, false)
		})
	}
}

func codeStrings(cs []ctoharness.BlockerCode) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c))
	}
	return out
}

// stage3 prepares a runs directory whose stage 2 is validated and an owned
// sample source, and returns options for a stage 3 run on it.
func stage3(t *testing.T, set *schemas.Set) (harness.Options, string) {
	t.Helper()
	runs := t.TempDir()
	keys := testKeys(t)
	validateStage2(t, set, runs, keys)
	return stage3In(t, set, runs, keys)
}

// validateStage2 validates stage 2 (and so stage 1) in runs.
func validateStage2(t *testing.T, set *schemas.Set, runs string, keys attest.Keys) {
	t.Helper()
	exe, _ := os.Executable()
	res := validators.Stage(context.Background(), 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys})
	if !res.OK {
		t.Fatalf("stage 2 validation: %v", res.Errors)
	}
}

// sharedStage2 is a runs directory whose stage 2 is validated once per test
// binary (in a directory TestMain removes), with its keys.
var sharedStage2 struct {
	once sync.Once
	runs string // empty until validated
	keys attest.Keys
}

// sharedStage3 is stage3 in the shared runs directory: for the tests that
// read only their own runs' evidence, never the runs directory around it
// (what another test's runs or kept layers there could change).
func sharedStage3(t *testing.T, set *schemas.Set) (harness.Options, string) {
	t.Helper()
	sharedStage2.once.Do(func() {
		dir, err := os.MkdirTemp("", "cto-harness-stage2-")
		if err != nil {
			t.Fatal(err)
		}
		sharedDirs = append(sharedDirs, dir)
		keys := testKeys(t)
		validateStage2(t, set, dir, keys)
		sharedStage2.runs, sharedStage2.keys = dir, keys
	})
	if sharedStage2.runs == "" {
		t.Fatal("the shared stage 2 validation failed: see the first test that made it")
	}
	return stage3In(t, set, sharedStage2.runs, sharedStage2.keys)
}

// stage3In is a stage 3 run's options in runs, where stage 2 is validated,
// on a fresh owned copy of the sample repository with its task.
func stage3In(t *testing.T, set *schemas.Set, runs string, keys attest.Keys) (harness.Options, string) {
	t.Helper()
	src := materialize(t, fixtures.SampleOwned, filepath.Join(t.TempDir(), "owned"))
	o := options(t, set, runs, 3, env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"})
	o.Signing = keys
	o.Source = src
	o.Config = config.Config{OwnedSources: []string{src}}
	data, _ := fixtures.TaskSpec(fixtures.SampleOwned)
	spec, err := task.Parse(data, "sample", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	o.Spec = &spec
	return o, src
}

func TestStage3PassAndFailures(t *testing.T) {
	set := compile(t)
	base, src := stage3(t, set)

	t.Run("pass", func(t *testing.T) {
		rep, err := harness.Run(context.Background(), base)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != ctoharness.StatusPass || !rep.CaseProcessStarted || rep.SourceRepositoryMutated {
			t.Fatalf("status %s blockers %v", rep.Status, rep.Blockers)
		}
		data, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, "task.json"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), src) {
			t.Fatal("task.json reveals the source path")
		}
		for _, k := range rep.Case.EnvKeys {
			if strings.HasPrefix(k, "CTO_HARNESS") {
				t.Fatalf("harness variable %s passed to Case", k)
			}
		}
		mustValidate(t, set, rep, true)
	})

	// A file added to the source between the before and after proofs.
	t.Run("source mutated", func(t *testing.T) {
		o := base
		o.Scenario = "mutate-source=" + filepath.Join(src, "added-during-run.txt")
		o.Unsandboxed = true // detection on its own: the sandbox would refuse the write
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.SourceRepositoryMutated || !hasCode(rep, ctoharness.BlockSourceMutated) || rep.Status == ctoharness.StatusPass {
			t.Fatalf("mutation not caught: mutated=%v blockers=%v", rep.SourceRepositoryMutated, rep.Blockers)
		}
		mustValidate(t, set, rep, false)
		if err := os.Remove(filepath.Join(src, "added-during-run.txt")); err != nil {
			t.Fatal(err)
		}
	})

	failures := []struct {
		scenario string
		want     ctoharness.BlockerCode
		status   ctoharness.Status
	}{
		{"disallowed", ctoharness.BlockDisallowedChange, ctoharness.StatusBlocked},
		{"omit-finished", ctoharness.BlockMissingRequiredEvent, ctoharness.StatusBlocked},
		{"exit-nonzero", ctoharness.BlockCaseExitNonZero, ctoharness.StatusFailed},
		{"break-verification", ctoharness.BlockTestsFailed, ctoharness.StatusFailed},
		{"touch-git", ctoharness.BlockFixtureDirtyEnd, ctoharness.StatusBlocked},
	}
	for _, tc := range failures {
		t.Run(tc.scenario, func(t *testing.T) {
			o := base
			o.Scenario = tc.scenario
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !hasCode(rep, tc.want) || rep.Status != tc.status || rep.SourceRepositoryMutated {
				t.Fatalf("status %s blockers %v, want %s with %s", rep.Status, rep.Blockers, tc.status, tc.want)
			}
			mustValidate(t, set, rep, false)
		})
	}

	t.Run("timeout", func(t *testing.T) {
		o := base
		spec := *o.Spec
		spec.CaseTimeoutSeconds = 1
		o.Spec = &spec
		o.Scenario = "hang"
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if !hasCode(rep, ctoharness.BlockCaseTimeout) || !rep.Case.TimedOut {
			t.Fatalf("blockers %v", rep.Blockers)
		}
		mustValidate(t, set, rep, false)
	})

	// A task text that names the source is refused before Case starts; one
	// that names a sibling whose name begins with the source's is not.
	for _, tc := range []struct {
		text  string
		block bool
	}{
		{"Keep " + src + "/docs tidy.", true},
		{"Keep notes in " + src + "-notes.", false},
	} {
		t.Run("task text "+tc.text, func(t *testing.T) {
			o := base
			spec := *o.Spec
			spec.Task = tc.text
			o.Spec = &spec
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if tc.block != hasCode(rep, ctoharness.BlockTaskInvalid) || tc.block == rep.CaseProcessStarted {
				t.Fatalf("status %s blockers %v, want blocked %v", rep.Status, rep.Blockers, tc.block)
			}
			mustValidate(t, set, rep, !tc.block)
		})
	}

	t.Run("artifact write failure", func(t *testing.T) {
		o := base
		o.Fault = harness.FaultArtifactPrefix + "patch.diff"
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if !hasCode(rep, ctoharness.BlockArtifactWriteFailed) || rep.Status == ctoharness.StatusPass || rep.Qualifies {
			t.Fatalf("blockers %v", rep.Blockers)
		}
	})
}

func TestRunsDirInsideSourceRefused(t *testing.T) {
	set := compile(t)
	src := materialize(t, fixtures.SampleOwned, filepath.Join(t.TempDir(), "owned"))
	o := options(t, set, filepath.Join(src, "runs"), 1, env{})
	o.Source = src
	if _, err := harness.Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "inside the source") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(src, "runs")); err == nil {
		t.Fatal("a runs directory was created inside the source")
	}
}

func compileB(b *testing.B) *schemas.Set {
	b.Helper()
	set, err := schemas.Compile()
	if err != nil {
		b.Fatal(err)
	}
	return set
}

// A machine (here: a launcher binary) that cannot establish the sandbox
// blocks the run at the gate, before the source or any Case process.
func TestSandboxUnavailableBlocksAtGate(t *testing.T) {
	set := compile(t)
	o, _ := stage3(t, set)
	o.SelfExe = "/bin/true" // not a launcher: the probe's trial run cannot succeed
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !hasCode(rep, ctoharness.BlockSandboxUnavailable) || rep.CaseProcessStarted || rep.SourcePath != "" {
		t.Fatalf("blockers %v, case started %v, source %q", rep.Blockers, rep.CaseProcessStarted, rep.SourcePath)
	}
	if rep.Blockers[0].Step != ctoharness.StepGate || rep.Qualifies {
		t.Fatalf("blocker %+v qualifies %v", rep.Blockers[0], rep.Qualifies)
	}
	mustValidate(t, set, rep, false)
}

// A signed stage 3 run says in its signed predicate that the gate verified
// the stage 2 record, and by which key; an unsandboxed run is never signed
// and says why.
func TestStage3SignedPredicateAndUnsandboxed(t *testing.T) {
	set := compile(t)
	o, _ := stage3(t, set)
	rep, err := harness.Run(context.Background(), o)
	if err != nil || rep.Status != ctoharness.StatusPass || !rep.Signed || rep.UnsignedReason != "" {
		t.Fatalf("signed pass: %v %s %v signed=%v %q", err, rep.Status, rep.Blockers, rep.Signed, rep.UnsignedReason)
	}
	data, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, "attestation.dsse.json"))
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.ParseEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Verify(context.Background(), o.Signing.Trusted); err != nil {
		t.Fatal(err)
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var pred attest.RunPredicate
	if err := json.Unmarshal(st.Predicate, &pred); err != nil {
		t.Fatal(err)
	}
	prev := pred.Gate.PreviousRecord
	if prev == nil || prev.Stage != 2 || !prev.SignatureVerified || prev.KeyID != o.Signing.Signer.Public().ID {
		t.Fatalf("previous stage record in the signed predicate: %+v", prev)
	}
	res := validators.Run(context.Background(), rep.RunArtifactDir, set, validators.RunOptions{ExpectPass: true, Trusted: o.Signing.Trusted, RequireSignature: true})
	if !res.OK || !res.SignatureOK {
		t.Fatalf("signed run does not validate: %v", res.Errors)
	}

	u := o
	u.Unsandboxed = true
	rep, err = harness.Run(context.Background(), u)
	if err != nil || rep.Status != ctoharness.StatusPass {
		t.Fatalf("unsandboxed run: %v %s %v", err, rep.Status, rep.Blockers)
	}
	if rep.Signed || !strings.Contains(rep.UnsignedReason, "--unsandboxed") {
		t.Fatalf("an unsandboxed run is signed=%v, reason %q", rep.Signed, rep.UnsignedReason)
	}
	if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, "attestation.dsse.json")); !os.IsNotExist(err) {
		t.Fatalf("an unsandboxed run has an attestation: %v", err)
	}
	res = validators.Run(context.Background(), rep.RunArtifactDir, set, validators.RunOptions{ExpectPass: true, Trusted: o.Signing.Trusted, RequireSignature: true})
	if res.OK {
		t.Fatal("an unsigned run validated with a signature required")
	}
	mustValidate(t, set, rep, true)
}
