package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/step/agentcase"
	"github.com/cto-harness/cto-harness/harness/step/launch"
	"github.com/cto-harness/cto-harness/harness/step/warm"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/toolenv"
	"github.com/cto-harness/cto-harness/harness/verify"
	"github.com/cto-harness/cto-harness/schemas"
)

// StatusDryRun is the status of a plan: nothing was executed.
const StatusDryRun = "dry_run"

// PlannedCommand is one process a run would start.
type PlannedCommand struct {
	Role           string          `json:"role"` // "case", "setup", "verification", "adversary" or "adversarial-tests"
	Argv           []string        `json:"argv"`
	Dir            string          `json:"dir"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	Sandboxed      bool            `json:"sandboxed"`
	Rlimits        sandbox.Rlimits `json:"rlimits"`
	EnvKeys        []string        `json:"env_keys"`
	// NetworkAllow is the command's egress allowlist (empty: no network).
	NetworkAllow []string `json:"network_allow"`
}

// DryRun is what `run --dry-run` prints.
type DryRun struct {
	Status         string               `json:"status"`
	Stage          int                  `json:"stage"`
	Blockers       []ctoharness.Blocker `json:"blockers"`
	Steps          []string             `json:"steps"`
	Source         string               `json:"source"`
	SourceClean    bool                 `json:"source_clean"`
	CopyTarget     string               `json:"copy_target"`
	TaskContract   *task.Contract       `json:"task_contract"`
	Commands       []PlannedCommand     `json:"commands"`
	Profile        profile.Record       `json:"profile"`
	Verification   verify.Plan          `json:"verification"`
	Unsandboxed    bool                 `json:"unsandboxed"`
	AllowDangerous bool                 `json:"allow_dangerous"`
	// ToolchainsFound are toolchains on this host (in the user's home) that
	// the config does not declare, in the config's own form.
	ToolchainsFound []config.Toolchain `json:"toolchains_found"`
	// Warnings are what would likely break the run though nothing blocks
	// it yet: a verification program that does not resolve in the view.
	Warnings []string `json:"warnings"`
}

// Plan checks the gates and the source without writing anything (read-only),
// and describes what Run would do: the steps, the copy target, the task
// contract, every command with its limits, and the script scanner's findings.
// It executes nothing and writes no fixture and no run directory. The
// embedded artificial fixture of stages 1–2 is materialized in a temporary
// directory so its scripts can be scanned, and removed again.
func Plan(ctx context.Context, o Options) (*DryRun, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if _, err := gates.Lookup(o.Stage); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	prof, err := o.lookupProfile()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := runsDirOutsideSource(o.RunsDir, o.Source); err != nil {
		return nil, err
	}
	p := &planning{o: o, prof: prof, runID: o.NewRunID(o.Stage, o.Clock())}
	p.plan = &DryRun{Status: StatusDryRun, Stage: o.Stage, Blockers: []ctoharness.Blocker{}, Profile: prof.Record(),
		Unsandboxed: o.Unsandboxed, AllowDangerous: o.AllowDangerous, Commands: []PlannedCommand{},
		ToolchainsFound: toolenv.Detect(o.Getenv("HOME"), o.Config.Toolchains), Warnings: []string{},
		Steps: []string{"gate check", "classify source", "source proof (before)", "copy", "baseline commit", "clean-start proof",
			"write task contract", "change (Case)", "collect", "checkout of the result", "verification", "clean-end proof", "source proof (after)",
			"non-mutation proof", "report"}}
	d := gates.Check(ctx, gates.Request{Stage: o.Stage, Getenv: o.Getenv, Records: o.recordCheck(), Signing: o.Signing})
	p.block(d.Blockers...)
	if len(p.plan.Blockers) > 0 {
		return p.plan, nil
	}
	path, cleanup, err := p.sourceAndSpec(ctx, d.Stage)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	if path == "" {
		return p.plan, nil
	}
	if !p.proveSource(ctx, path) {
		return p.plan, nil
	}
	p.runDir = filepath.Join(o.RunsDir, p.runID)
	p.plan.CopyTarget = filepath.Join(p.runDir, "fixture")
	contract := task.NewContract(*p.spec, p.runID, p.plan.CopyTarget)
	p.plan.TaskContract = &contract
	p.rl = sandbox.DefaultRlimits()
	p.scratch = filepath.Join(o.RunsDir, runlist.WorkDir, p.runID, "scratch")
	if d.Stage.Backend == ctoharness.BackendCase {
		p.planCase(contract)
	}
	p.planVerification()
	p.planAdversary()
	if err := p.scan(ctx); err != nil {
		return nil, err
	}
	return p.plan, nil
}

// planning is one dry run being described.
type planning struct {
	o        Options
	prof     profile.Policy
	plan     *DryRun
	runID    string
	runDir   string
	spec     *task.Spec
	pol      source.Policy
	repo     source.Repo
	rl       sandbox.Rlimits
	netPol   egress.Policy
	venv     []string // the verification's environment
	scratch  string   // Case's scratch
	vscratch string
}

func (p *planning) block(b ...ctoharness.Blocker) { p.plan.Blockers = append(p.plan.Blockers, b...) }

// sourceAndSpec is the source to classify and the task: the stages 1–2
// artificial fixture is materialized in a temporary directory (removed by
// cleanup). An empty path means a blocker ended the plan.
func (p *planning) sourceAndSpec(ctx context.Context, stage gates.Stage) (path string, cleanup func(), err error) {
	o := p.o
	cleanup = func() {}
	p.pol = source.Policy{Owned: o.Config.OwnedSources, TargetRoots: o.Config.TargetRoots, ExternalRoots: o.Config.ExternalRoots, Now: o.Clock, ConfigFile: o.Config.Path}
	path, p.spec = o.Source, o.Spec
	if path == "" {
		if stage.Fixture != gates.FixtureArtificial {
			p.block(ctoharness.Blocker{Code: ctoharness.BlockSourceNotFound, Step: ctoharness.StepClassify,
				Message: fmt.Sprintf("%s copies an owned repository: pass --source PATH", stage)})
			return "", cleanup, nil
		}
		tmp, err := os.MkdirTemp("", "cto-harness-dry-run-")
		if err != nil {
			return "", cleanup, err
		}
		cleanup = func() { os.RemoveAll(tmp) }
		path = filepath.Join(tmp, "artificial-source")
		archive, _ := fixtures.Archive(fixtures.Artificial)
		if _, err := fixtures.Materialize(ctx, archive, path, artificialCommitTime); err != nil {
			return "", cleanup, err
		}
		p.pol.Owned = append(append([]string(nil), p.pol.Owned...), path)
		if p.spec == nil {
			data, _ := fixtures.TaskSpec(fixtures.Artificial)
			s, err := task.Parse(data, "embedded artificial task", o.Schemas.Validator(schemas.TaskSpec))
			if err != nil {
				return "", cleanup, err
			}
			p.spec = &s
		}
	}
	if p.spec == nil && o.RequireTask {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockTaskRequired, Step: ctoharness.StepClassify,
			Message: "no task was given: give --task FILE (see docs/tasks.md), or --sample-task to run the built-in sample task on purpose"})
		return "", cleanup, nil
	}
	if p.spec == nil {
		s := DefaultSpec()
		p.spec = &s
	}
	return path, cleanup, nil
}

// proveSource classifies the source and proves it read-only, and checks
// the task's base and history; false when the plan ends there.
func (p *planning) proveSource(ctx context.Context, path string) bool {
	o, spec, nop := p.o, p.spec, ctoharness.NopTracer{}
	repo, err := source.Classify(ctx, path, p.pol, nop)
	if err != nil {
		p.block(ctoharness.AsBlocker(err, ctoharness.StepClassify))
		return false
	}
	p.repo, p.plan.Source = repo, repo.Root
	proof, err := source.Prove(ctx, repo, source.ProofOptions{RunID: p.runID, Kind: source.KindBefore, Now: o.Clock(), Getenv: o.Getenv}, nop)
	if err != nil {
		p.block(ctoharness.AsBlocker(err, ctoharness.StepSourceProof))
		return false
	}
	p.plan.SourceClean = proof.StatusClean
	if !proof.StatusClean {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockSourceDirty, Step: ctoharness.StepSourceProof,
			Message: fmt.Sprintf("source %s is not clean (%s)", repo.Root, describeStatus(proof.Status))})
	}
	rev := o.Rev
	if rev == "" {
		rev = spec.Base
	}
	if rev != "" {
		if _, _, err := fixture.ResolveBase(repo.Root, repo.GitDir, rev); err != nil {
			p.block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepSourceProof,
				Message: fmt.Sprintf("the task's base %s; give a commit, branch or tag of %s", err, repo.Root)})
		}
	}
	if _, err := fixture.ParseHistory(spec.HistoryText()); err != nil {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockTaskInvalid, Step: ctoharness.StepClassify, Message: err.Error()})
	}
	return true
}

// planCase is Case's command: the fake Case's, the configured one's or a
// coding agent's, with its environment keys and network.
func (p *planning) planCase(contract task.Contract) {
	o, plan, scratch := p.o, p.plan, p.scratch
	argv := []string{o.SelfExe, backend.FakeSubcommand, o.Scenario}
	if o.Lane == ctoharness.LaneReal {
		argv = o.CaseCmd
		if len(argv) == 0 {
			argv = o.Config.CaseCommand
		}
	}
	cset, _ := tools(o, egress.CommandCase) // an error is reported with the verification's below
	env := cset.Apply(backend.Env(scratch, filepath.Join(p.runDir, "task.json"), o.Getenv("PATH"), p.repo.Root, separateGitDir(p.repo)))
	if o.Agent.Name != "" {
		var refused *ctoharness.Blocker
		if argv, env, refused = agentcase.Plan(o.Agent, o.Getenv, contract, scratch, env); refused != nil {
			plan.Blockers = append(plan.Blockers, *refused)
		}
	}
	plan.Commands = append(plan.Commands, PlannedCommand{Role: "case", Argv: argv, Dir: plan.CopyTarget,
		TimeoutSeconds: p.spec.CaseTimeoutSeconds, Sandboxed: !o.Unsandboxed, Rlimits: p.rl, EnvKeys: backend.EnvKeys(env)})
}

// planVerification is the setup and verification commands, run in a fresh
// checkout of the result with a scratch of their own (package checkout),
// and what would likely break them.
func (p *planning) planVerification() {
	o, plan, spec := p.o, p.plan, p.spec
	netPol, nerr := launch.NetPolicy(netGrants(o), spec.Network)
	if nerr != nil {
		p.block(ctoharness.AsBlocker(nerr, ctoharness.StepContract))
	}
	p.netPol = netPol
	for i := range plan.Commands {
		plan.Commands[i].NetworkAllow = nonNil(netPol.Case.Strings())
		if e, err := warm.DetectEco(context.Background(), p.warmInput()); err == nil && !o.Unsandboxed {
			// An error is reported with the verification's below.
			ckeys := e.Env(warm.EnvValue(backend.Env(p.scratch, "", "", ""), "HOME"), netPol.Case.HasHost)
			plan.Commands[i].EnvKeys = backend.EnvKeys(warm.ReplaceEnv(plan.Commands[i].EnvKeys, ckeys))
		}
	}
	vdir, vscratch := checkout.Dirs(filepath.Join(o.RunsDir, runlist.WorkDir, p.runID))
	p.vscratch = vscratch
	venv, senv, vset := p.verificationEnv(vscratch)
	p.venv = venv
	if !o.Unsandboxed {
		plan.Warnings = append(plan.Warnings, unresolved(o, spec.Verification.Command, vset, launch.PathOf(venv), plan.ToolchainsFound)...)
		plan.Warnings = append(plan.Warnings, warm.Warnings(o.Config.Caches, *spec, netPol)...)
	}
	if seg := hiddenSegment(vdir); seg != "" {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("the setup and verification run in %s, below the hidden directory %s: "+
			"some test suites refuse every file under a name that starts with a dot (express's res.sendFile answers 404); "+
			"choose a runs directory outside hidden directories (--runs-dir)", vdir, seg))
	}
	if s := spec.Setup; s != nil {
		plan.Commands = append(plan.Commands, PlannedCommand{Role: "setup", Argv: []string{"/bin/sh", "-c", s.Command},
			Dir: vdir, TimeoutSeconds: s.TimeoutSeconds, Sandboxed: !o.Unsandboxed, Rlimits: p.rl, EnvKeys: backend.EnvKeys(senv),
			NetworkAllow: nonNil(netPol.Setup.Strings())})
	}
	plan.Commands = append(plan.Commands, PlannedCommand{Role: "verification", Argv: []string{"/bin/sh", "-c", spec.Verification.Command},
		Dir: vdir, TimeoutSeconds: spec.Verification.TimeoutSeconds, Sandboxed: !o.Unsandboxed, Rlimits: p.rl, EnvKeys: backend.EnvKeys(venv),
		NetworkAllow: nonNil(netPol.Verify.Strings())})
}

// verificationEnv is the verification's and the setup's environments, with
// the toolchains and warm caches the config declares.
func (p *planning) verificationEnv(vscratch string) (venv, senv []string, vset toolenv.Set) {
	o := p.o
	vset, terr := tools(o, egress.CommandVerify)
	if terr != nil {
		p.block(ctoharness.AsBlocker(terr, ctoharness.StepGate))
	}
	venv = vset.Apply(backend.Env(vscratch, "", o.Getenv("PATH"), p.repo.Root, separateGitDir(p.repo)))
	if g, ok, err := warm.GoCaches(context.Background(), o.Config, o.Getenv); err != nil {
		p.block(ctoharness.AsBlocker(err, ctoharness.StepGate))
	} else if ok && !o.Unsandboxed {
		venv = warm.ReplaceEnv(venv, g.Env())
	}
	senv = venv
	if e, err := warm.DetectEco(context.Background(), p.warmInput()); err != nil {
		p.block(ctoharness.AsBlocker(err, ctoharness.StepGate))
	} else if !o.Unsandboxed {
		senv = warm.ReplaceEnv(venv, e.Env(warm.EnvValue(venv, "HOME"), p.netPol.Setup.HasHost))
		venv = warm.ReplaceEnv(venv, e.Env(warm.EnvValue(venv, "HOME"), p.netPol.Verify.HasHost))
	}
	return venv, senv, vset
}

// warmInput is what the dry run offers the warm caches from: the gate's
// inputs, without pinning (nothing runs after the plan).
func (p *planning) warmInput() warm.Input {
	o := p.o
	return warm.Input{Config: o.Config, Getenv: o.Getenv, Source: o.Source, RunsDir: o.RunsDir, Unsandboxed: o.Unsandboxed}
}

// planAdversary is the adversary and its tests, which run after a passing
// verification: the adversary, then its tests on the baseline and the
// result, none with network.
func (p *planning) planAdversary() {
	o, plan, spec := p.o, p.plan, p.spec
	a := spec.Adversary
	if a == nil {
		return
	}
	secs := a.TimeoutSeconds
	if secs == 0 {
		secs = defaultAdversaryTimeout
	}
	argv, allow := a.Command, []string{}
	if ag := a.Agent; ag != nil {
		// The agent's own command line is made when it runs; its one
		// endpoint is its model, through the harness's meter.
		argv, allow = []string{ag.Name, "--model", ag.Model}, []string{ag.BaseURL + " (through the harness's model meter)"}
	}
	plan.Commands = append(plan.Commands,
		PlannedCommand{Role: "adversary", Argv: argv, Dir: adversaryTestsInView, TimeoutSeconds: secs, Sandboxed: !o.Unsandboxed, Rlimits: p.rl,
			EnvKeys: backend.EnvKeys(append(p.venv, adversary.EnvTask+"=", adversary.EnvCheckout+"=", adversary.EnvTestsDir+"=")), NetworkAllow: allow},
		PlannedCommand{Role: "adversarial-tests", Argv: []string{"/bin/sh", "-c", a.TestCommand}, Dir: baselineInView,
			TimeoutSeconds: spec.Verification.TimeoutSeconds, Sandboxed: !o.Unsandboxed, Rlimits: p.rl, EnvKeys: backend.EnvKeys(p.venv), NetworkAllow: []string{}})
	if o.Unsandboxed {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryFailed, Step: ctoharness.StepVerify,
			Message: "the task's adversary runs only in a sandbox of its own; run without --unsandboxed"})
	}
	if !o.AutoConfirm && !o.Config.AutoConfirm && o.Confirm == nil {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryNotConfirmed, Step: ctoharness.StepContract,
			Message: "the task's adversary writes tests that run only once a person confirms them, and there is no terminal to ask on; run with --auto-confirm (or \"auto_confirm\": true in the config)"})
	}
}

// scan is the script scanner's verdict on the verification: it reads the
// source's scripts, of which the fixture would be a copy.
func (p *planning) scan(ctx context.Context) error {
	o, spec := p.o, p.spec
	vpol := verify.Policy{Profile: p.prof, AllowDangerous: o.AllowDangerous, DryRun: true, Roots: backend.ScratchDirs(p.vscratch)}
	if !o.Unsandboxed {
		vpol.NetAllowed = p.netPol.Verify.HasHost
	}
	if spec.Layout != nil {
		vpol.Aliases = spec.Layout.Aliases(p.repo.Root)
	}
	vp, err := verify.Preflight(ctx, verify.Input{Command: spec.Verification.Command, Fixture: p.repo.Root,
		Timeout: time.Duration(spec.Verification.TimeoutSeconds) * time.Second, Tracer: ctoharness.NopTracer{}}, vpol)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	p.plan.Verification = vp
	code := map[verify.Refusal]ctoharness.BlockerCode{verify.RefusedDangerous: ctoharness.BlockDangerousScript,
		verify.RefusedScope: ctoharness.BlockTestScope, verify.RefusedGovernance: ctoharness.BlockGovernanceUnavailable}[vp.Refusal]
	if code != "" {
		p.block(ctoharness.Blocker{Code: code, Step: ctoharness.StepVerify, Message: vp.Reason})
	}
	return nil
}

// unresolved warns about each program of the verification command that
// does not resolve inside the verification's view on its PATH: such a run
// ends TEST_NOT_RUN (exit 127). A path relative to the checkout is the
// repository's own and is not checked.
func unresolved(o Options, command string, tc toolenv.Set, path string, found []config.Toolchain) []string {
	lists := o.Config.Lists(true)
	system := append(sandbox.DefaultSystem(), launch.ToolchainRoots(path)...)
	shown := append(append([]string{}, lists.ReadPaths...), tc.Read...)
	hide := append(append(sandbox.DefaultHide(), lists.HidePaths...), tc.Hide...)
	if home := o.Getenv("HOME"); filepath.IsAbs(home) && filepath.Clean(home) != "/" {
		hide = append(hide, filepath.Clean(home))
	}
	visible := func(p string) bool {
		for _, q := range []string{p, launch.RealPath(p)} {
			if sandbox.WithinAny(q, shown) || sandbox.WithinAny(q, system) && !sandbox.WithinAny(q, hide) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, prog := range scan.Programs(command) {
		if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
			continue
		}
		if in := toolenv.Resolve(prog, path, visible); in != "" {
			// Found, but maybe not the one the user runs: pyenv's python3
			// on the host, the system's in the sandbox.
			if host := launch.LookIn(prog, o.Getenv("PATH")); host != "" && host != in && !strings.Contains(prog, "/") && !visible(host) {
				out = append(out, fmt.Sprintf("the verification's %s is %s inside the sandbox but %s on this host, which the sandbox does not show; declare its toolchain in the config's \"toolchains\" to use it", prog, in, host))
			}
			continue
		}
		msg := fmt.Sprintf("the verification runs %s, which does not resolve inside the sandbox's view (PATH %s): the run would end TEST_NOT_RUN (exit 127)", prog, path)
		if host := launch.LookIn(prog, o.Getenv("PATH")); host != "" && !strings.Contains(prog, "/") {
			msg += "; on this host it is " + host
		}
		for _, t := range found {
			for _, d := range t.Path {
				if launch.LookIn(filepath.Base(prog), d) != "" {
					msg += fmt.Sprintf("; it is in the %s toolchain listed under toolchains_found: add that entry to the config's \"toolchains\"", t.Name)
				}
			}
		}
		out = append(out, msg)
	}
	return out
}

// separateGitDir is repo's git directory when it is kept outside the
// worktree, or "".
func separateGitDir(repo source.Repo) string {
	if repo.Separate() {
		return repo.GitDir
	}
	return ""
}

// hiddenSegment is the outermost directory on path p whose name starts
// with a dot ("" when there is none).
func hiddenSegment(p string) string {
	dir := string(filepath.Separator)
	for _, name := range strings.Split(filepath.Clean(p), string(filepath.Separator)) {
		if name == "" {
			continue
		}
		dir = filepath.Join(dir, name)
		if strings.HasPrefix(name, ".") {
			return dir
		}
	}
	return ""
}
