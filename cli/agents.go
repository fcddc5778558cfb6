package cli

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
)

// AgentsCmd is `cto-harness agents`.
type AgentsCmd struct {
	List    AgentsListCmd    `cmd:"" help:"List the supported agents, their pinned versions, and whether each is installed."`
	Install AgentsInstallCmd `cmd:"" help:"Install pinned agent releases with npm (all four when no name is given)."`
}

// agentsDirFlag is shared by the agents commands and run.
type agentsDirFlag struct {
	AgentsDir string `name:"agents-dir" help:"Where agents are installed (default: $CTO_HARNESS_AGENTS_DIR, else $XDG_CACHE_HOME/cto-harness/agents, else ~/.cache/cto-harness/agents)." type:"path" placeholder:"DIR"`
}

func (f agentsDirFlag) dir(env *Env) (string, error) {
	d, err := agent.Dir(f.AgentsDir, env.Getenv)
	if err != nil {
		return "", usageError{err}
	}
	return d, nil
}

// AgentsListCmd is `cto-harness agents list`.
type AgentsListCmd struct {
	agentsDirFlag
	JSON    bool `name:"json" help:"Print one JSON line per agent."`
	Offline bool `name:"offline" help:"Do not ask the npm registry (or $CTO_HARNESS_NPM_REGISTRY) whether a newer release exists."`
}

// agentLine is one agent in `agents list --json`.
type agentLine struct {
	Name      string `json:"name"`
	Package   string `json:"package"`
	Version   string `json:"version"`
	Installed bool   `json:"installed"`
	Path      string `json:"path"`
	// Latest is the registry's latest release ("" when not checked or
	// unknown); Newer says it is newer than the pin; Check says why the
	// registry could not be asked.
	Latest string `json:"latest,omitempty"`
	Newer  bool   `json:"newer_release,omitempty"`
	Check  string `json:"check_error,omitempty"`
}

// Run executes the command.
func (c *AgentsListCmd) Run(env *Env) error {
	dir, err := c.dir(env)
	if err != nil {
		return err
	}
	specs := agent.All()
	latest := make([]agentLine, len(specs))
	if !c.Offline {
		registry := env.Getenv(agent.EnvRegistry)
		if registry == "" {
			registry = agent.DefaultRegistry
		}
		var wg sync.WaitGroup
		for i, s := range specs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := agent.Latest(env.Ctx, registry, s.Package)
				if err != nil {
					latest[i].Check = err.Error()
					return
				}
				latest[i].Latest, latest[i].Newer = v, agent.Newer(v, s.Version)
			}()
		}
		wg.Wait()
	}
	for i, s := range specs {
		line := agentLine{Name: string(s.Name), Package: s.Package, Version: s.Version, Installed: s.Installed(dir), Path: s.InstallDir(dir),
			Latest: latest[i].Latest, Newer: latest[i].Newer, Check: latest[i].Check}
		if line.Installed {
			line.Path = s.BinPath(dir)
		}
		if c.JSON {
			if err := printJSON(env.Stdout, line); err != nil {
				return err
			}
			continue
		}
		state := "not installed (would go to " + line.Path + ")"
		if line.Installed {
			state = "installed at " + line.Path
		}
		switch {
		case c.Offline:
		case line.Check != "":
			state += "; could not check for a newer release: " + line.Check
		case line.Newer:
			state += "; a newer release exists: " + line.Latest + " (the pin is tested; a newer release is not until the pin moves)"
		default:
			state += "; the latest release"
		}
		fmt.Fprintf(env.Stdout, "%-12s %s@%s  %s\n", line.Name, line.Package, line.Version, term(state))
	}
	return nil
}

// AgentsInstallCmd is `cto-harness agents install [NAME...]`.
type AgentsInstallCmd struct {
	agentsDirFlag
	Names []string `arg:"" optional:"" name:"name" help:"Agents to install: qwen-code, codex, claude-code, gemini-cli (default: all)."`
}

// Run executes the command.
func (c *AgentsInstallCmd) Run(env *Env) error {
	dir, err := c.dir(env)
	if err != nil {
		return err
	}
	specs := agent.All()
	if len(c.Names) > 0 {
		specs = specs[:0]
		for _, n := range c.Names {
			s, err := agent.Lookup(n)
			if err != nil {
				return usageError{err}
			}
			specs = append(specs, s)
		}
	}
	in := agent.Installer{Dir: dir, Output: env.Stderr}
	var failed []string
	for _, s := range specs {
		already, err := in.Install(env.Ctx, s)
		switch {
		case errors.Is(err, agent.ErrNpmMissing):
			return usageError{err}
		case err != nil:
			fmt.Fprintf(env.Stderr, "cto-harness: %v\n", err)
			failed = append(failed, string(s.Name))
		case already:
			fmt.Fprintf(env.Stdout, "%s %s already installed at %s\n", s.Name, s.Version, s.BinPath(dir))
		default:
			fmt.Fprintf(env.Stdout, "%s %s installed at %s\n", s.Name, s.Version, s.BinPath(dir))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(env.Stderr, "cto-harness: could not install %s\n", strings.Join(failed, ", "))
		return exitError{ExitFailed}
	}
	return nil
}

// agentOptions merges the run flags over the task spec's agent, and that
// over the config's. The API key's variable must be set here: a run that
// cannot hand its agent a key is bad input, refused before anything is
// written, with the place that named the variable.
func (c *RunCmd) agentOptions(env *Env, g *Globals, cfg config.Config, spec *task.Spec) (harness.AgentOptions, error) {
	var o harness.AgentOptions
	keyNamedBy := ""
	if a := cfg.Agent; a != nil {
		o = harness.AgentOptions{Name: a.Name, Model: a.Model, BaseURL: a.BaseURL, APIKeyEnv: a.APIKeyEnv, Command: a.Command}
		if a.APIKeyEnv != "" {
			path, _ := g.configFile(env)
			keyNamedBy = "agent.api_key_env in the config " + path
		}
	}
	if spec != nil && spec.Agent != nil {
		a := spec.Agent
		if a.Name != o.Name {
			o = harness.AgentOptions{} // the config's settings belong to the config's agent
			keyNamedBy = ""
		}
		o.Name = a.Name
		o.Model = firstNonEmpty(a.Model, o.Model)
		o.BaseURL = firstNonEmpty(a.BaseURL, o.BaseURL)
		if a.APIKeyEnv != "" {
			o.APIKeyEnv, keyNamedBy = a.APIKeyEnv, "agent.api_key_env in the task spec "+c.Task
		}
	}
	if c.Agent != "" {
		if c.Agent != o.Name {
			o.Command = nil // the config's command belongs to the config's agent
		}
		o.Name = c.Agent
	}
	o.Model = firstNonEmpty(c.Model, o.Model)
	o.BaseURL = firstNonEmpty(c.BaseURL, o.BaseURL)
	if c.APIKeyEnv != "" {
		o.APIKeyEnv, keyNamedBy = c.APIKeyEnv, "--api-key-env"
	}
	if o.Name == "" {
		if c.Model != "" || c.BaseURL != "" || c.APIKeyEnv != "" {
			return o, usagef("--model, --base-url and --api-key-env go with --agent NAME (%s)", strings.Join(agent.Names(), ", "))
		}
		return o, nil
	}
	if o.APIKeyEnv != "" && env.Getenv(o.APIKeyEnv) == "" {
		return o, usagef("agent %s: the variable %s (named by %s) is not set in this environment; export %s=<your API key>, or name the variable that holds it with --api-key-env",
			o.Name, o.APIKeyEnv, keyNamedBy, o.APIKeyEnv)
	}
	dir, err := c.dir(env)
	if err != nil {
		return o, err
	}
	o.Dir = dir
	return o, nil
}
