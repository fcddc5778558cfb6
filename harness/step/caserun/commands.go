package caserun

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unicode/utf8"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/execwatch"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/profile"
)

// Commands holds Case's command budget for one Case process: the
// commands the exec watch observes (the count, enforced by refusing the
// exec) and the ones Case's case.command events claim (kept beside it).
// Where nothing is observed (unsandboxed) the claims are all there is, and
// the only way to hold Case to the budget is to stop it.
type Commands struct {
	// Observed says an exec watch sees Case's execs (sandboxed); else the
	// claims are all there is.
	Observed bool
	counter  *profile.Counter
	emit     func(ctoharness.EventType, map[string]any)
	profile  profile.Name
	execs    *execwatch.Watch // the exec watch's handler
	watch    *notify.Watch    // the launch's seccomp watch, which serves execs (and Case's connection watch)

	// mu serializes the event log between Case's event reader and the exec
	// watch, and guards the fields below.
	mu            sync.Mutex
	claims        ctoharness.CommandClaims
	refusalEvents int
	refused       []ctoharness.RefusedCommand
	stats         execwatch.Stats
}

// NewCommands holds one Case process to pol's command budget (the
// verification command is not counted against it). Sandboxed, Case's execs
// are observed: the exec watch shares the launcher's one seccomp listener
// with the connection watch when Case has an allowlist. Unsandboxed there
// is no launcher to watch them. emit records a command_refused event.
func NewCommands(pol profile.Policy, verification string, observed bool, emit func(ctoharness.EventType, map[string]any)) *Commands {
	return &Commands{Observed: observed, counter: profile.NewCounter(pol, verification), emit: emit, profile: pol.Name}
}

// Attach gives the commands the launch's seccomp watch and the exec watch
// it serves, which Close stops.
func (c *Commands) Attach(watch *notify.Watch, execs *execwatch.Watch) {
	c.watch, c.execs = watch, execs
}

// Locker serialises the run's event log between Case's event reader and
// the exec watch (Watch.Lock).
func (c *Commands) Locker() sync.Locker { return &c.mu }

// Decide is the exec watch's verdict on one observed command: the profile
// counts it, or refuses it; a refusal is recorded as a command_refused
// event (at most MaxCommandRefusalEvents of them).
func (c *Commands) Decide(cmd execwatch.Command) error {
	cl := c.counter.Classify(cmd.Line)
	if cmd.Truncated {
		cl = profile.Unknown() // what was not read may be anything
	}
	ok, reason := c.counter.Account(cmd.Line, cl)
	if ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	line := clipCommand(cmd.Line)
	if len(c.refused) < ctoharness.MaxRefusedListed {
		c.refused = append(c.refused, ctoharness.RefusedCommand{Command: line, Reason: reason})
	}
	if c.refusalEvents < ctoharness.MaxCommandRefusalEvents {
		c.refusalEvents++
		c.emit(ctoharness.EvCommandRefused, map[string]any{"command": line, "shell": cmd.Shell,
			"path": clipCommand(cmd.Path), "argv": clipArgv(cmd.Argv), "truncated": cmd.Truncated, "reason": reason,
			"profile": string(c.profile)})
	}
	tellRefused(cmd.Pid, reason)
	return errors.New(reason)
}

// tellRefused writes why the command was refused to the refused process's
// stderr, so the agent reads a reason beside the bare "Permission denied"
// its shell prints (its tool output is what the model sees). Best effort
// and never blocking: the caller is waiting on the verdict.
func tellRefused(pid int, reason string) {
	if pid <= 0 {
		return
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", pid), os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString("cto-harness: this command was refused and did not run: " + reason + "\n")
}

// Claim records one case.command event. Unsandboxed, it is also counted
// against the budget: it returns the reason Case must be stopped, if any.
func (c *Commands) Claim(cmd string) string {
	c.claims.Commands++
	cl := c.counter.Classify(cmd)
	if cl.Test {
		c.claims.Tests++
	}
	if cl.Heavy {
		c.claims.Heavy++
	}
	if cl.Install {
		c.claims.Installs++
	}
	if c.Observed {
		return ""
	}
	if ok, reason := c.counter.Account(cmd, cl); !ok {
		return reason
	}
	return ""
}

// Close stops the exec watch once Case's processes are gone; an error is
// a watch that could not be trusted to have seen everything.
func (c *Commands) Close() error {
	var err error
	if c.watch != nil {
		err = c.watch.Close()
		c.watch = nil
	}
	if c.execs != nil {
		stats := c.execs.Stats()
		c.mu.Lock()
		c.stats = stats
		c.mu.Unlock()
	}
	return err
}

// Record is the report's account.
func (c *Commands) Record() *ctoharness.CommandsRecord {
	u := c.counter.Usage()
	c.mu.Lock()
	defer c.mu.Unlock()
	return &ctoharness.CommandsRecord{Observed: c.Observed, Budget: u.Budget, Used: u.Used, Commands: u.Commands,
		Heavy: u.Heavy, Tests: u.Tests, Refused: u.Refused, Execs: c.stats.Execs, Inside: c.stats.Inside,
		RefusalEvents: c.refusalEvents, Claimed: c.claims, RefusedCommands: append([]ctoharness.RefusedCommand{}, c.refused...)}
}

// clipCommand is s when it fits in MaxRefusedCommandBytes, else its start
// and its end around a note of what was left out (see
// ctoharness.MaxRefusedCommandBytes). Cuts fall on UTF-8 boundaries.
func clipCommand(s string) string {
	max := ctoharness.MaxRefusedCommandBytes
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	// The note is measured with the longest count it can hold.
	note := fmt.Sprintf(" …[%d of %d bytes left out; sha256 %x]… ", len(s), len(s), sum)
	keep := max - len(note)
	head, tail := keep/4, keep-keep/4
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	note = fmt.Sprintf(" …[%d of %d bytes left out; sha256 %x]… ", start-head, len(s), sum)
	return s[:head] + note + s[start:]
}

// clipArgv keeps argv within MaxRefusedCommandBytes in all: the arguments
// that fit (the last one clipped), then one entry saying how many were left
// out.
func clipArgv(argv []string) []string {
	budget := ctoharness.MaxRefusedCommandBytes
	var out []string
	for i, a := range argv {
		if len(a) > budget {
			left := len(argv) - i
			if budget > 64 {
				out = append(out, clipTo(a, budget-64))
				left--
			}
			if left > 0 {
				out = append(out, fmt.Sprintf("…[%d more arguments left out]", left))
			}
			return out
		}
		budget -= len(a)
		out = append(out, a)
	}
	return out
}

// clipTo is the first n bytes of s (at a UTF-8 boundary) and a mark.
func clipTo(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
