package agentcase

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/modelmeter"
	"github.com/cto-harness/cto-harness/harness/proc"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Command builds the agent's command line and environment from the
// contract and the environment Case would get (baseEnv), and makes its
// state directories and settings files inside Case's scratch; the
// adapter's notes go to rec. The error is a CASE_START_FAILED blocker.
func (a *Agent) Command(c *task.Contract, fixture string, baseEnv []string, rec *ctoharness.AgentRecord) ([]string, []string, error) {
	argv, env, err := a.command(c, fixture, baseEnv, rec)
	if err != nil {
		return nil, nil, ctoharness.Block(ctoharness.BlockCaseStartFailed, ctoharness.StepCase, err, "cannot prepare the %s agent", a.spec.Name)
	}
	return argv, env, nil
}

func (a *Agent) command(c *task.Contract, fixture string, baseEnv []string, rec *ctoharness.AgentRecord) ([]string, []string, error) {
	state := filepath.Join(a.in.Scratch, "home", ".cto-harness-agent")
	l := agent.Launch{Exe: a.exe, Prompt: agent.Prompt(c.Task, c.AllowedPaths, c.ForbiddenActions),
		Model: a.in.Options.Model, BaseURL: a.meter.BaseURL(), Key: a.key, Fixture: fixture, State: state,
		BaseEnv: baseEnv, Root: os.Geteuid() == 0}
	cmd, err := a.adapter.Command(l)
	if err != nil {
		return nil, nil, err
	}
	if err := Prepare(a.s.Trace, state, cmd); err != nil {
		return nil, nil, err
	}
	rec.Notes = append(rec.Notes, cmd.Notes...)
	sort.Strings(cmd.Env)
	return cmd.Argv, cmd.Env, nil
}

// Prepare makes an agent's state directory and the directories and
// settings files its adapter asks for, all inside the scratch it runs in
// (Case's agent's and the adversary's agent's alike).
func Prepare(tr ctoharness.Tracer, state string, cmd agent.Command) error {
	for _, d := range append([]string{state}, cmd.Dirs...) {
		tr.Trace(ctoharness.TraceMkdir, d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	for _, f := range cmd.Files {
		tr.Trace(ctoharness.TraceWrite, f.Path)
		if err := os.WriteFile(f.Path, f.Data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

// Wire makes the backend read the agent's native stream: every line goes
// verbatim to the stream file and through the translator; case.finished is
// held back until the files changed by shell commands have been found. The
// error is a CASE_START_FAILED blocker.
func (a *Agent) Wire(in *backend.Input, fixture string) error {
	if err := a.wire(in, fixture); err != nil {
		return ctoharness.Block(ctoharness.BlockCaseStartFailed, ctoharness.StepCase, err, "cannot start reading the %s stream", a.spec.Name)
	}
	return nil
}

func (a *Agent) wire(in *backend.Input, fixture string) error {
	f, err := a.s.Dir.OpenAppend(Stream)
	if err != nil {
		return err
	}
	a.stream = proc.NewCappedFile(f, proc.DefaultLogCap)
	a.tr = a.adapter.NewTranslator(fixture)
	if a.before, err = agent.Take(fixture); err != nil {
		return fmt.Errorf("snapshot the fixture before the agent: %w", err)
	}
	in.MaxLine = maxLine
	in.Translate = a.translate
	in.AfterExit = func() []backend.CaseEvent { return a.afterExit(fixture) }
	return nil
}

// translate keeps one native line and turns it into Case events.
func (a *Agent) translate(line []byte) []backend.CaseEvent {
	a.lines++
	a.stream.Write(append(append([]byte(nil), line...), '\n'))
	var out []backend.CaseEvent
	for _, ev := range a.tr.Line(line) {
		if m, _ := ev.Data["model"].(string); ev.Type == ctoharness.EvCaseStarted && m == "" {
			ev.Data["model"] = a.in.Options.Model
		}
		ce := a.caseEvent(ev)
		if ev.Type == ctoharness.EvCaseFinished {
			a.finished = &ce
			continue
		}
		if p, _ := ev.Data["path"].(string); ev.Type == ctoharness.EvCaseFileChanged {
			a.reported[p] = true
		}
		out = append(out, ce)
	}
	return out
}

// afterExit adds the files the agent changed that its stream did not
// name (shell commands), then the held-back case.finished.
func (a *Agent) afterExit(fixture string) []backend.CaseEvent {
	var out []backend.CaseEvent
	after, err := agent.Take(fixture)
	if err != nil {
		out = append(out, a.caseEvent(agent.Event{Type: ctoharness.EvCaseLog,
			Data: map[string]any{"message": "the fixture could not be rescanned after the agent: " + err.Error()}}))
	}
	a.changed = agent.Changed(a.before, after)
	for _, p := range a.changed {
		if !a.reported[p] {
			out = append(out, a.caseEvent(agent.Event{Type: ctoharness.EvCaseFileChanged,
				Data: map[string]any{"path": p, "source": "fixture_scan"}}))
		}
	}
	if a.finished != nil {
		out = append(out, *a.finished)
	}
	return out
}

// caseEvent encodes a translated event as a Case event line, redacted.
func (a *Agent) caseEvent(ev agent.Event) backend.CaseEvent {
	d := map[string]any{}
	for k, v := range ev.Data {
		d[k] = v
	}
	d["type"] = string(ev.Type)
	raw, _ := json.Marshal(d)
	return backend.CaseEvent{Type: ev.Type, Raw: a.red.Bytes(raw)}
}

// StopWith arms the model watch with the function that stops Case: a
// failing provider stops Case now, not at its timeout.
func (a *Agent) StopWith(kill func()) { a.model.stopWith(kill) }

// modelWatch is what the model meter said while Case ran: the provider's
// failure, once, and the way to stop Case for it.
type modelWatch struct {
	mu   sync.Mutex
	stop *modelmeter.Stop
	kill func()
}

// failed records the meter's verdict and stops Case.
func (w *modelWatch) failed(s modelmeter.Stop) {
	w.mu.Lock()
	if w.stop == nil {
		w.stop = &s
	}
	kill := w.kill
	w.mu.Unlock()
	if kill != nil {
		kill()
	}
}

// stopWith arms the watch with the function that stops Case; a failure
// seen before it was armed stops Case at once.
func (w *modelWatch) stopWith(kill func()) {
	w.mu.Lock()
	w.kill = kill
	early := w.stop != nil
	w.mu.Unlock()
	if early {
		kill()
	}
}

func (w *modelWatch) verdict() *modelmeter.Stop {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stop
}
