package agentcase

import (
	"fmt"
	"os"
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Plan is the dry run's view of an agent: the command line and environment
// keys it would get (the key itself stands as its redaction marker), or
// the gate's refusal (with no command and env unchanged). Nothing is
// started or written.
func Plan(o Options, getenv func(string) string, c task.Contract, scratch string, env []string) ([]string, []string, *ctoharness.Blocker) {
	refuse := func(code ctoharness.BlockerCode, err error) ([]string, []string, *ctoharness.Blocker) {
		return []string{}, env, &ctoharness.Blocker{Code: code, Step: ctoharness.StepGate, Message: err.Error()}
	}
	spec, err := agent.Lookup(o.Name)
	if err != nil {
		return refuse(ctoharness.BlockAgentConfigInvalid, err)
	}
	dir := o.Dir
	if dir == "" && len(o.Command) == 0 {
		if dir, err = agent.Dir("", getenv); err != nil {
			return refuse(ctoharness.BlockAgentNotInstalled, err)
		}
	}
	exe, err := spec.Resolve(dir, o.Command)
	if err != nil {
		return refuse(ctoharness.BlockAgentNotInstalled, err)
	}
	if o.APIKeyEnv == "" || getenv(o.APIKeyEnv) == "" {
		return refuse(ctoharness.BlockAgentConfigInvalid, fmt.Errorf("the variable named by --api-key-env (%q) is not set", o.APIKeyEnv))
	}
	cmd, err := AdapterFor(spec).Command(agent.Launch{Exe: exe, Prompt: agent.Prompt(c.Task, c.AllowedPaths, c.ForbiddenActions),
		Model: o.Model, BaseURL: o.BaseURL, Key: agent.Marker(o.APIKeyEnv), Fixture: c.FixturePath,
		State: filepath.Join(scratch, "home", ".cto-harness-agent"), BaseEnv: env, Root: os.Geteuid() == 0})
	if err != nil {
		return refuse(ctoharness.BlockAgentConfigInvalid, err)
	}
	return cmd.Argv, cmd.Env, nil
}
