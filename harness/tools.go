package harness

import (
	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/toolenv"
)

// tools is what the config's toolchains and variables give cmd (package
// toolenv). It is a function of the config and the harness's environment,
// so the gate's check (checkTools) holds for every later call.
func tools(o Options, cmd egress.Command) (toolenv.Set, error) {
	s, err := toolenv.For(o.Config, string(cmd), o.Getenv)
	if err != nil {
		return s, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepGate, err, "the config's toolchains or env cannot be used")
	}
	return s, nil
}

// checkTools refuses, at the gate, a run whose toolchains or variables
// cannot be given to every command.
func (r *run) checkTools() {
	for _, cmd := range []egress.Command{egress.CommandCase, egress.CommandSetup, egress.CommandVerify} {
		if _, err := tools(r.o, cmd); err != nil {
			r.blockErr(err, ctoharness.StepGate)
			return
		}
	}
}

// toolEnv is env with cmd's toolchains and variables in it; the gate has
// checked that they resolve.
func (r *run) toolEnv(cmd egress.Command, env []string) []string {
	s, _ := tools(r.o, cmd)
	return s.Apply(env)
}
