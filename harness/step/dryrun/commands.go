package dryrun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/toolenv"
	"github.com/cto-harness/cto-harness/harness/verify"
)

// planCase is Case's command: the fake Case's, the configured one's or a
// coding agent's, with its environment keys and network.
func (p *planning) planCase(contract task.Contract) {
	in, plan, scratch := p.in, p.plan, p.scratch
	argv := in.CaseArgv
	cset, _ := in.Hooks.Tools(egress.CommandCase) // an error is reported with the verification's below
	env := cset.Apply(backend.Env(scratch, filepath.Join(p.runDir, "task.json"), in.Getenv("PATH"), p.repo.Root, separateGitDir(p.repo)))
	if in.Hooks.Agent != nil {
		var refused *ctoharness.Blocker
		if argv, env, refused = in.Hooks.Agent(contract, scratch, env); refused != nil {
			plan.Blockers = append(plan.Blockers, *refused)
		}
	}
	plan.Commands = append(plan.Commands, Command{Role: "case", Argv: argv, Dir: plan.CopyTarget,
		TimeoutSeconds: p.spec.CaseTimeoutSeconds, Sandboxed: !in.Unsandboxed, Rlimits: p.rl, EnvKeys: backend.EnvKeys(env)})
}

// planVerification is the setup and verification commands, run in a fresh
// checkout of the result with a scratch of their own (package checkout),
// and what would likely break them.
func (p *planning) planVerification(ctx context.Context) {
	in, plan, spec := p.in, p.plan, p.spec
	netPol, nerr := in.Hooks.Net(spec.Network)
	if nerr != nil {
		p.block(ctoharness.AsBlocker(nerr, ctoharness.StepContract))
	}
	p.netPol = netPol
	for i := range plan.Commands {
		plan.Commands[i].NetworkAllow = nonNil(netPol.Case.Strings())
		if vars, err := in.Hooks.Eco(ctx); err == nil && !in.Unsandboxed {
			// An error is reported with the verification's below.
			ckeys := vars(backend.EnvValue(backend.Env(p.scratch, "", "", ""), "HOME"), netPol.Case.HasHost)
			plan.Commands[i].EnvKeys = backend.EnvKeys(backend.ReplaceEnv(plan.Commands[i].EnvKeys, ckeys))
		}
	}
	vdir, vscratch := checkout.Dirs(filepath.Join(in.RunsDir, runlist.WorkDir, in.RunID))
	p.vscratch = vscratch
	venv, senv, vset := p.verificationEnv(ctx, vscratch)
	p.venv, p.vset = venv, vset
	if !in.Unsandboxed {
		plan.Warnings = append(plan.Warnings, in.Hooks.Unresolved(scan.CommandPrograms(spec.Verification.Command), vset, venv, plan.ToolchainsFound)...)
		plan.Warnings = append(plan.Warnings, in.Hooks.CacheWarnings(*spec, netPol)...)
	}
	if seg := hiddenSegment(vdir); seg != "" {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("the setup and verification run in %s, below the hidden directory %s: "+
			"some test suites refuse every file under a name that starts with a dot (express's res.sendFile answers 404); "+
			"choose a runs directory outside hidden directories (--runs-dir)", vdir, seg))
	}
	if s := spec.Setup; s != nil {
		plan.Commands = append(plan.Commands, Command{Role: "setup", Argv: []string{"/bin/sh", "-c", s.Command},
			Dir: vdir, TimeoutSeconds: s.TimeoutSeconds, Sandboxed: !in.Unsandboxed, Rlimits: p.rl, EnvKeys: backend.EnvKeys(senv),
			NetworkAllow: nonNil(netPol.Setup.Strings())})
	}
	plan.Commands = append(plan.Commands, Command{Role: "verification", Argv: []string{"/bin/sh", "-c", spec.Verification.Command},
		Dir: vdir, TimeoutSeconds: spec.Verification.TimeoutSeconds, Sandboxed: !in.Unsandboxed, Rlimits: p.rl, EnvKeys: backend.EnvKeys(venv),
		NetworkAllow: nonNil(netPol.Verify.Strings())})
}

// verificationEnv is the verification's and the setup's environments, with
// the toolchains and warm caches the config declares.
func (p *planning) verificationEnv(ctx context.Context, vscratch string) (venv, senv []string, vset toolenv.Set) {
	in := p.in
	vset, terr := in.Hooks.Tools(egress.CommandVerify)
	if terr != nil {
		p.block(ctoharness.AsBlocker(terr, ctoharness.StepGate))
	}
	venv = vset.Apply(backend.Env(vscratch, "", in.Getenv("PATH"), p.repo.Root, separateGitDir(p.repo)))
	if g, ok, err := in.Hooks.GoCaches(ctx); err != nil {
		p.block(ctoharness.AsBlocker(err, ctoharness.StepGate))
	} else if ok && !in.Unsandboxed {
		venv = backend.ReplaceEnv(venv, g)
	}
	senv = venv
	if vars, err := in.Hooks.Eco(ctx); err != nil {
		p.block(ctoharness.AsBlocker(err, ctoharness.StepGate))
	} else if !in.Unsandboxed {
		senv = backend.ReplaceEnv(venv, vars(backend.EnvValue(venv, "HOME"), p.netPol.Setup.HasHost))
		venv = backend.ReplaceEnv(venv, vars(backend.EnvValue(venv, "HOME"), p.netPol.Verify.HasHost))
	}
	return venv, senv, vset
}

// planAdversary is the adversary and its tests, which run after a passing
// verification: the adversary, then its tests on the baseline and the
// result, none with network.
func (p *planning) planAdversary() {
	in, plan, spec := p.in, p.plan, p.spec
	a := spec.Adversary
	if a == nil {
		return
	}
	secs := a.TimeoutSeconds
	if secs == 0 {
		secs = in.Adversary.DefaultTimeout
	}
	argv, allow := a.Command, []string{}
	if ag := a.Agent; ag != nil {
		// The agent's own command line is made when it runs; its one
		// endpoint is its model, through the harness's meter.
		argv, allow = []string{ag.Name, "--model", ag.Model}, []string{ag.BaseURL + " (through the harness's model meter)"}
	}
	advEnv := append(append([]string{}, p.venv...), in.Adversary.EnvKeys...)
	plan.Commands = append(plan.Commands,
		Command{Role: "adversary", Argv: argv, Dir: in.Adversary.TestsDir, TimeoutSeconds: secs, Sandboxed: !in.Unsandboxed, Rlimits: p.rl,
			EnvKeys: backend.EnvKeys(advEnv), NetworkAllow: allow},
		Command{Role: "adversarial-tests", Argv: []string{"/bin/sh", "-c", a.TestCommand}, Dir: in.Adversary.BaselineDir,
			TimeoutSeconds: spec.Verification.TimeoutSeconds, Sandboxed: !in.Unsandboxed, Rlimits: p.rl, EnvKeys: backend.EnvKeys(p.venv), NetworkAllow: []string{}})
	if in.Unsandboxed {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryFailed, Step: ctoharness.StepVerify,
			Message: "the task's adversary runs only in a sandbox of its own; run without --unsandboxed"})
	}
	if !in.Confirmed {
		p.block(ctoharness.Blocker{Code: ctoharness.BlockAdversaryNotConfirmed, Step: ctoharness.StepContract,
			Message: "the task's adversary writes tests that run only once a person confirms them, and there is no terminal to ask on; run with --auto-confirm (or \"auto_confirm\": true in the config)"})
	}
}

// scan is the script scanner's verdict on the verification: it reads the
// source's scripts, of which the fixture would be a copy.
func (p *planning) scan(ctx context.Context) error {
	in, spec := p.in, p.spec
	vpol := verify.Policy{Profile: in.Profile, AllowDangerous: in.AllowDangerous, DryRun: true, Roots: backend.ScratchDirs(p.vscratch)}
	if !in.Unsandboxed {
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
	if !in.Unsandboxed {
		p.plan.Warnings = append(p.plan.Warnings, in.Hooks.Unresolved(recipeOnly(vp.Programs, spec.Verification.Command), p.vset, p.venv, p.plan.ToolchainsFound)...)
	}
	code := map[verify.Refusal]ctoharness.BlockerCode{verify.RefusedDangerous: ctoharness.BlockDangerousScript,
		verify.RefusedScope: ctoharness.BlockTestScope, verify.RefusedGovernance: ctoharness.BlockGovernanceUnavailable}[vp.Refusal]
	if code != "" {
		p.block(ctoharness.Blocker{Code: code, Step: ctoharness.StepVerify, Message: vp.Reason})
	}
	return nil
}

// recipeOnly are the programs of make recipes that the command does not
// start itself: those are warned of with the command.
func recipeOnly(progs []scan.Program, command string) []scan.Program {
	own := scan.Programs(command)
	var out []scan.Program
	for _, p := range progs {
		if !slices.Contains(own, p.Name) {
			out = append(out, p)
		}
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
