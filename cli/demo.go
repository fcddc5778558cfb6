package cli

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cto-harness/cto-harness/validators"
)

// DemoCmd is `cto-harness demo`.
type DemoCmd struct {
	Agent string `name:"agent" enum:"${agents}" default:"" help:"After stages 1 and 2, run this coding agent (${agents_help}) at stage 3 on the sample repository against the built-in scripted model server, and validate its evidence. The agent must be installed (cto-harness agents install)." placeholder:"NAME"`
	agentsDirFlag
}

// Help explains the demo.
func (DemoCmd) Help() string {
	return `Materializes the embedded artificial fixture and owned sample repository (real git repositories made
with go-git), then validates stage 1, stage 2 and stage 3 in order on the fake lane. Each stage runs its
pass route, checks its gates and evidence, and writes the validation record the next stage needs.`
}

// Run executes the command.
func (c DemoCmd) Run(g *Globals, env *Env) error {
	set, cfg, runs, err := g.setup(env)
	if err != nil {
		return err
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "cto-harness demo: evidence under %s\n", runs)
	last := 3
	if c.Agent != "" {
		last = 2
	}
	line := stageProgress(env)
	for n := 1; n <= last; n++ {
		res := validators.Stage(env.Ctx, n, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: env.Self, HostEnv: env.Getenv, Config: cfg, Signing: keys,
			Progress: line})
		line.Close() // the stage's summary starts on a clean line
		verdict := "validated"
		if !res.OK {
			verdict = "FAILED"
		}
		fmt.Fprintf(env.Stdout, "\nstage %d: %s (%d checks)\n", n, verdict, len(res.Checked))
		fmt.Fprintf(env.Stdout, "  pass run evidence:     %s\n", res.PassArtifactPath)
		fmt.Fprintf(env.Stdout, "  %s\n", verifiedLine(res.Signed, res.KeyID, res.SignatureOK))
		if res.SourceNonMutationProofPath != "" {
			fmt.Fprintf(env.Stdout, "  source unchanged:      %s\n", res.SourceNonMutationProofPath)
		}
		rows := 0
		for _, name := range sortedKeys(res.FailureArtifactPaths) {
			if strings.HasPrefix(name, "gate_") {
				fmt.Fprintf(env.Stdout, "  blocked as expected:   %s -> %s\n", name, res.FailureArtifactPaths[name])
			} else {
				rows++
			}
		}
		if rows > 0 {
			fmt.Fprintf(env.Stdout, "  failure matrix:        %d rows held as the matrix expects (evidence under %s)\n", rows, filepath.Join(runs, "matrix"))
		}
		if res.RecordPath != "" {
			fmt.Fprintf(env.Stdout, "  validation record:     %s\n", res.RecordPath)
		}
		pruned, err := pruneSuperseded(runs, res)
		if err != nil {
			fmt.Fprintf(env.Stderr, "cto-harness: %v\n", err)
		}
		if note := supersededLine(pruned); note != "" {
			fmt.Fprintf(env.Stdout, "  %s\n", note)
		}
		for _, e := range res.Errors {
			fmt.Fprintf(env.Stdout, "  error: %s\n", term(e))
		}
		if !res.OK {
			fmt.Fprintf(env.Stderr, "cto-harness: demo stopped: stage %d did not validate\n", n)
			return exitError{ExitFailed}
		}
	}
	if c.Agent != "" {
		dir, err := c.dir(env)
		if err != nil {
			return err
		}
		rep, err := demoAgent(env.Ctx, env, set, cfg, keys, runs, c.Agent, dir)
		if rep == nil {
			return err
		}
		return printAgentRun(env, set, rep)
	}
	fmt.Fprintf(env.Stdout, "\nall three stages validated; list the runs with: cto-harness runs; look at one with: cto-harness show <run id> --open; check one with: cto-harness validate <run dir>\n")
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
