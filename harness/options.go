// Package harness runs one staged proof route end to end: gate check, source
// classification and proofs, copy and baseline, the change (in-process for
// stage 1, a Case process otherwise), collection, verification, clean-end and
// non-mutation proofs, and the report. Each step lives in its own file; the
// run type only carries what later steps need from earlier ones.
package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/checked"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/progress"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// MemoryLimit is the collector's soft target for a process that runs the
// harness (the command sets it unless GOMEMLIMIT is set): what a run holds
// is far less, and what it reads and lets go (a long history's trees, a
// copy's buffers) would otherwise grow the heap to twice its peak before
// it is collected.
const MemoryLimit = 192 << 20

// Options configure one run. Clock and the id generators are injected so that
// tests are deterministic.
type Options struct {
	Stage  int
	Source string     // required for stage 3; stages 1–2 default to the embedded artificial fixture
	Spec   *task.Spec // nil selects the built-in task for the source
	// RequireTask refuses (TASK_REQUIRED) a run on the user's own
	// repository with no Spec, before Case starts: the built-in sample
	// task would grade none of the repository's tests. The CLI sets it
	// unless --sample-task is given.
	RequireTask bool
	// Rev is the commit the task starts from (run --rev): a hash, branch,
	// tag or HEAD~N of the source, read from its object store; it wins
	// over the spec's base. Empty is the spec's base, or HEAD.
	Rev string
	// TaskCheck is the task check record the run requires (run
	// --require-task-check); nil requires none. It must be valid and of
	// this task, its hidden tests and its base, or the run is refused
	// before Case starts.
	TaskCheck *checked.Record
	Lane      ctoharness.Lane
	CaseCmd   []string // the real lane's Case command
	RunsDir   string
	Config    config.Config
	Getenv    func(string) string
	Deep      bool
	SelfExe   string // the harness binary, re-executed as the fake Case
	Schemas   *schemas.Set
	Clock     func() time.Time
	NewRunID  func(stage int, now time.Time) string
	NewNonce  func() string

	// Scenario and Fault are for the failure machinery only: they pick the
	// fake Case's behaviour and inject a fault ("artifact:NAME" makes that
	// artifact's write fail; "fixture_dirty_start" leaves an untracked file in
	// the fixture after the baseline commit). A fault is recorded in the report
	// and a run with one never qualifies as stage evidence.
	Scenario string
	Fault    string

	// Trial binds the run to the batch trial attempt that asked for it
	// (nil outside a batch): recorded in the report, the run_started event
	// and the signed predicate.
	Trial *ctoharness.TrialBinding

	// AutoConfirm lets the tests a task's adversary writes run without
	// asking (as Config.AutoConfirm does); otherwise Confirm shows a person
	// their summary and says whether they may run. With neither, a task
	// with an adversary is refused before Case (ADVERSARY_NOT_CONFIRMED).
	AutoConfirm bool
	Confirm     func(ctx context.Context, s adversary.Summary) (bool, error)
	// AdversaryCommand is the executable of a task's adversary agent
	// instead of its installed pinned release (a stand-in, in tests); the
	// agents directory is Agent.Dir's.
	AdversaryCommand []string

	// Profile names the execution profile ("" is fast, or agent with an
	// agent); AllowDangerous runs a
	// verification the script scanner flags as dangerous (recorded).
	Profile string
	// KeepWork keeps the run's workspace (RUNS_DIR/work/<id>) after the
	// run, scrubbed of the agent's key; by default it is removed.
	KeepWork       bool
	AllowDangerous bool

	// Unsandboxed runs Case and the verification command without the sandbox
	// launcher. It is an explicit opt-out: recorded in the report, and such a
	// run never qualifies as stage evidence.
	Unsandboxed bool

	// Agent runs a supported coding agent as Case on the real lane.
	Agent AgentOptions

	// Progress draws a status line during the long steps (copy, baseline
	// commit, Case, verification); nil draws nothing.
	Progress *progress.Line
	// VerifyRun validates the run a previous stage's record names (the
	// validators' run check, injected: the validators depend on this
	// package). Without it the gate of stage 2 and up blocks.
	VerifyRun func(ctx context.Context, runDir string) (ctoharness.Report, error)
	// RecordsDir and RecordRunsDir override where the previous stage's record
	// is read and which runs directory its run must live in (default:
	// RunsDir/validation and RunsDir). The failure matrix uses them to test
	// forged records without touching the real ones.
	RecordsDir    string
	RecordRunsDir string

	// AllowNetCase and AllowNetVerify are HOST:PORT endpoints Case and the
	// verification command may reach through the harness's egress forwarder
	// (run --allow-net / --verify-allow-net), on top of the config's lists.
	// Empty lists keep the command's network namespace empty. AllowNetOrigin
	// names where an entry (as written) came from, for the record; entries
	// without one are recorded as "flag".
	AllowNetCase   []string
	AllowNetVerify []string
	AllowNetSetup  []string // run --setup-allow-net: the task's setup command
	AllowNetOrigin map[string]string

	// AllowedCheck replaces the allowed-path policy when set. It exists so a
	// test can break the check on purpose and show the failure matrix notice.
	AllowedCheck func(path string) (bool, string)

	// Signing holds the key that signs the run's attestation (nil: unsigned)
	// and the keys the gate trusts for the previous stage's record.
	Signing attest.Keys

	// SandboxProbe, when set, answers what the sandbox can enforce instead
	// of probing the kernel for this run: a batch probes once for all its
	// trials (sandbox.Reuse).
	SandboxProbe func() sandbox.Facts

	// ViewTrials, when set, is shared by the runs of a batch: a view of a
	// shape already tried (and planned alike here) is planned instead of
	// tried in a throwaway launcher (sandbox.Trials).
	ViewTrials *sandbox.Trials

	// ViewTrialsRoot, with ViewTrials, is a directory taken out of the view
	// shapes as the run id is: each row of a failure-matrix replay works in
	// a folder of its own, laid out as the others are, and shares one
	// sandbox.Trials with them.
	ViewTrialsRoot string

	// Sync replaces fsync(2) for the run's evidence (evidence.Syncer): the
	// benchmark times it. A run with one never qualifies as stage evidence.
	Sync evidence.Syncer
}

// Fault points.
const (
	FaultArtifactPrefix    = "artifact:"
	FaultFixtureDirtyStart = "fixture_dirty_start"
	FaultDiskFullPrefix    = "disk_full:"            // that artifact's write fails with ENOSPC
	FaultInterruptCase     = "interrupt_during_case" // the run is cancelled once Case has started
)

func (o *Options) checkFault() error {
	switch {
	case o.Fault == "", o.Fault == FaultFixtureDirtyStart, o.Fault == FaultInterruptCase:
		return nil
	case strings.HasPrefix(o.Fault, FaultArtifactPrefix) && len(o.Fault) > len(FaultArtifactPrefix):
		return nil
	case strings.HasPrefix(o.Fault, FaultDiskFullPrefix) && len(o.Fault) > len(FaultDiskFullPrefix):
		return nil
	}
	return fmt.Errorf("%w: unknown fault %q; use %q or %qNAME", ErrUsage, o.Fault, FaultFixtureDirtyStart, FaultArtifactPrefix)
}

// recordCheck is how this run's gate checks the previous stage's record.
func (o *Options) recordCheck() gates.RecordCheck {
	dir, runs := o.RecordsDir, o.RecordRunsDir
	if dir == "" {
		dir = RecordsDir(o.RunsDir)
	}
	if runs == "" {
		runs = o.RunsDir
	}
	return gates.RecordCheck{Dir: dir, RunsDir: runs, ConfigFile: o.Config.Path, MaxAge: o.Config.MaxAge(), Now: o.Clock(),
		Validate: o.Schemas.Validator(schemas.StageRecord), VerifyRun: o.VerifyRun}
}

// RecordsDir is where stage validation records live.
func RecordsDir(runsDir string) string { return filepath.Join(runsDir, "validation") }

// DefaultRunID is "<UTC time>-s<stage>-<random>".
func DefaultRunID(stage int, now time.Time) string {
	return fmt.Sprintf("%s-s%d-%s", now.UTC().Format("20060102T150405Z"), stage, randomHex(4))
}

// DefaultNonce is 16 random bytes.
func DefaultNonce() string { return randomHex(16) }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the kernel RNG never fails on Linux
	}
	return hex.EncodeToString(b)
}

func (o *Options) defaults() error {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.NewRunID == nil {
		o.NewRunID = DefaultRunID
	}
	if o.NewNonce == nil {
		o.NewNonce = DefaultNonce
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Lane == "" && o.Agent.Name != "" {
		o.Lane = ctoharness.LaneReal
	}
	if o.Lane == "" {
		o.Lane = ctoharness.LaneFake
	}
	if o.Scenario == "" {
		o.Scenario = "pass"
	}
	if o.RunsDir == "" {
		o.RunsDir = "runs"
	}
	if o.Schemas == nil {
		return fmt.Errorf("harness: no compiled schemas")
	}
	if o.SelfExe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("harness: cannot find its own executable to start the fake Case: %w", err)
		}
		o.SelfExe = exe
	}
	abs, err := filepath.Abs(o.RunsDir)
	if err != nil {
		return err
	}
	o.RunsDir = abs
	return nil
}

// sourcePolicy is how the source is classified: against the config's
// owned, Target and external roots, at the run's clock.
func (o Options) sourcePolicy() source.Policy {
	return source.Policy{Owned: o.Config.OwnedSources, TargetRoots: o.Config.TargetRoots, ExternalRoots: o.Config.ExternalRoots, Now: o.Clock, ConfigFile: o.Config.Path}
}

// DefaultSpec is the built-in task for a user's own repository: add a note
// file at the root, checked by a grep.
func DefaultSpec() task.Spec {
	return task.Spec{
		Task:         "Add a short note to CASE_NOTES.md at the repository root.",
		AllowedPaths: []string{"CASE_NOTES.md"},
		Verification: task.Verification{
			Command:        "grep -q 'note added by the fake Case' CASE_NOTES.md",
			TimeoutSeconds: 60,
		},
		CaseTimeoutSeconds: 120,
	}
}

// lookupProfile resolves the run's profile: the named one, else the default
// for the run (agent with --agent), adjusted to the network allowlist.
func (o Options) lookupProfile() (profile.Policy, error) {
	name := o.Profile
	if name == "" {
		name = string(profile.DefaultFor(o.Agent.Name != ""))
	}
	p, err := profile.Lookup(name)
	if err != nil {
		return p, err
	}
	// Case's endpoints as granted: the flags, the config's, and the task's
	// (which can only narrow the first two, so asking is enough).
	eps := append([]string(nil), o.AllowNetCase...)
	if n := o.Config.Network; n != nil {
		eps = append(eps, n.CaseAllow...)
	}
	if o.Spec != nil && o.Spec.Network != nil {
		eps = append(eps, o.Spec.Network.CaseAllow...)
	}
	return profile.ForEndpoints(p, eps), nil
}

// usable refuses a request nothing can be run for (ErrUsage: nothing is
// written), and returns the execution profile it names.
func (o *Options) usable() (profile.Policy, error) {
	if err := o.defaults(); err != nil {
		return profile.Policy{}, err
	}
	if _, err := gates.Lookup(o.Stage); err != nil {
		return profile.Policy{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if o.Lane != ctoharness.LaneFake && o.Lane != ctoharness.LaneReal {
		return profile.Policy{}, fmt.Errorf("%w: unknown lane %q; use fake or real", ErrUsage, o.Lane)
	}
	if err := o.checkFault(); err != nil {
		return profile.Policy{}, err
	}
	if o.Agent.Name != "" && o.Lane != ctoharness.LaneReal {
		return profile.Policy{}, fmt.Errorf("%w: an agent (%s) runs on the real lane, not %q", ErrUsage, o.Agent.Name, o.Lane)
	}
	if err := o.checkNet(); err != nil {
		return profile.Policy{}, err
	}
	prof, err := o.lookupProfile()
	if err != nil {
		return profile.Policy{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := runlist.OutsideSource(o.RunsDir, o.Source); err != nil {
		return profile.Policy{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return prof, nil
}
