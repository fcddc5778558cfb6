// Package cli is the command line of cto-harness. The mains are thin: they
// call Main with the process's arguments, streams and environment, and exit
// with its code. Only main calls os.Exit.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
	"github.com/cto-harness/cto-harness/schemas"
)

// Exit codes.
const (
	ExitOK       = 0 // pass / valid / healthy
	ExitFailed   = 1 // the run was blocked or failed, or validation found errors
	ExitUsage    = 2 // bad input: nothing was run
	ExitEvidence = 3 // evidence could not be written completely
)

// Env names read by the CLI.
const (
	EnvRunsDir = "CTO_HARNESS_RUNS_DIR"
	EnvCaseCmd = "CTO_HARNESS_CASE_CMD"
)

// usageError is bad input: reported in one line with exit code 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitError carries a non-zero exit code for an outcome already reported.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Env is the process context a command runs in.
type Env struct {
	Ctx    context.Context
	Stdout io.Writer
	Stderr io.Writer
	Stdin  io.Reader // where a question to a person is answered (run's confirmation)
	Getenv func(string) string
	Self   string // path of the harness executable
}

// Globals are flags every command accepts.
type Globals struct {
	RunsDir string   `name:"runs-dir" help:"Directory for run evidence and stage records (default: $CTO_HARNESS_RUNS_DIR or ./runs)." type:"path" placeholder:"DIR"`
	Config  string   `name:"config" help:"Harness config file: owned sources and Target Repository roots (default: $CTO_HARNESS_CONFIG)." type:"path" placeholder:"FILE"`
	PubKeys []string `name:"pubkey" sep:"none" type:"path" placeholder:"FILE" help:"Trusted ed25519 public key (PEM) for verifying signed runs and stage records; repeatable; added to the signing key's own and the config's signing.trusted_keys."`
}

// CLI is the command tree.
type CLI struct {
	Globals

	Run           RunCmd           `cmd:"" help:"Run one stage of the proof route and write its evidence."`
	Validate      ValidateCmd      `cmd:"" help:"Validate one run directory's evidence."`
	ValidateStage ValidateStageCmd `cmd:"" name:"validate-stage" help:"Validate a whole stage (runs it on the fake lane) and write its validation record."`
	Health        HealthCmd        `cmd:"" help:"Check that this machine can produce valid evidence."`
	Fixtures      FixturesCmd      `cmd:"" help:"List and replay the failure matrix."`
	Demo          DemoCmd          `cmd:"" help:"Run stages 1, 2 and 3 on the embedded sample repositories and validate each."`
	Agents        AgentsCmd        `cmd:"" help:"List and install the supported coding agents (qwen-code, codex, claude-code, gemini-cli)."`
	Show          ShowCmd          `cmd:"" help:"Summarize one run in the terminal; --open opens its report.html."`
	Runs          RunsCmd          `cmd:"" help:"List the runs in the runs directory, newest first; 'runs prune' removes old ones."`
	Version       VersionCmd       `cmd:"" help:"Print the harness and evidence schema versions."`
	Keygen        KeygenCmd        `cmd:"" help:"Create an ed25519 key pair for signing evidence."`
	Task          TaskCmd          `cmd:"" aliases:"tasks" help:"Pre-flight a task: its reference solution must pass, its tests must tell it from no change, every repeat alike."`
	Batch         BatchCmd         `cmd:"" help:"Run a batch of stage-3 trials (sources x tasks x agents x repeats), resume it, and summarize it."`
	Worker        WorkerCmd        `cmd:"" help:"Take batch trials from NATS JetStream, run them here, and upload their signed evidence."`
	ModelServer   ModelServerCmd   `cmd:"" name:"modelserver" help:"Serve a scripted model (OpenAI, Anthropic, Gemini APIs) for trying coding agents without a provider."`
}

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == backend.FakeSubcommand {
		return fakecase.Main(args[1:], stdout, stderr, getenv)
	}
	if len(args) > 0 && args[0] == sandbox.Subcommand {
		return sandbox.Main(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == supervise.Subcommand {
		return supervise.Main(args[1:], stderr)
	}
	return runCLI(ctx, args, stdout, stderr, getenv, &CLI{}, kong.Name("cto-harness"),
		kong.Description("Lets a coding agent (Case) work on a copy of a local git repository and proves, with evidence, that the gates held, the source was not changed, and the writes stayed in bounds."))
}

// runCLI parses args against a grammar (each binary has its own, so that its
// help names it) and runs the selected command.
func runCLI(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, grammar globalsHolder, opts ...kong.Option) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "cto-harness: cannot locate its own executable: %v\n", err)
		return ExitUsage
	}
	env := &Env{Ctx: ctx, Stdout: stdout, Stderr: stderr, Stdin: os.Stdin, Getenv: getenv, Self: self}
	exited := -1
	parser, err := kong.New(grammar, append([]kong.Option{
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exited = code }),
		kong.UsageOnError(),
		kong.Bind(env),
		kong.Vars{"agents": "," + strings.Join(agent.Names(), ","), "agents_help": strings.Join(agent.Names(), ", ")},
	}, opts...)...)
	if err != nil {
		fmt.Fprintf(stderr, "cto-harness: %v\n", err)
		return ExitUsage
	}
	kctx, err := parser.Parse(args)
	if exited >= 0 {
		return exited // --help printed
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", parser.Model.Name, err)
		return ExitUsage
	}
	err = kctx.Run(grammar.globals())
	return exitCode(stderr, parser.Model.Name, err)
}

// globalsHolder is a command tree that carries the global flags.
type globalsHolder interface{ globals() *Globals }

func (c *CLI) globals() *Globals { return &c.Globals }

func exitCode(stderr io.Writer, name string, err error) int {
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\n", name, oneLine(err))
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, oneLine(err))
		return ExitEvidence
	}
}

// oneLine is an error on one terminal line: its newlines become "; " and
// anything else a terminal would act on is escaped, since an error may quote
// a file name or a message Case chose.
func oneLine(err error) string { return display.Terminal(strings.ReplaceAll(err.Error(), "\n", "; ")) }

// term is v as the CLI prints it: everything a run's evidence holds (file
// names, blocker messages, validator findings that quote them) could have
// been chosen by Case, so control, format and bidi characters are shown as
// escapes (display.Terminal) and no name can repaint the terminal.
func term(v any) string { return display.Terminal(fmt.Sprint(v)) }

func (g *Globals) runsDir(env *Env) string {
	if g.RunsDir != "" {
		return g.RunsDir
	}
	if v := env.Getenv(EnvRunsDir); v != "" {
		return v
	}
	return "runs"
}

// configFile is the config file in use and where it was named (--config or
// $CTO_HARNESS_CONFIG); "" when there is none.
func (g *Globals) configFile(env *Env) (path, namedBy string) {
	if g.Config != "" {
		return g.Config, "--config"
	}
	if v := env.Getenv(config.EnvConfig); v != "" {
		return v, "$" + config.EnvConfig
	}
	return "", ""
}

func (g *Globals) config(env *Env, set *schemas.Set) (config.Config, error) {
	path, namedBy := g.configFile(env)
	if path == "" {
		return config.Config{}, nil
	}
	if fi, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return config.Config{}, usagef("config file %s (named by %s) does not exist; create it, for example with {\"owned_sources\": [\"/home/me/src\"], \"target_repository_roots\": []}, or name an existing file", path, namedBy)
	} else if err == nil && fi.IsDir() {
		return config.Config{}, usagef("config file %s (named by %s) is a directory; name the config's JSON file", path, namedBy)
	}
	c, err := config.Load(path, set.Validator(schemas.Config))
	if err != nil {
		return c, usageError{err}
	}
	return c, nil
}

// setup is what most commands need first: the compiled schemas, the config
// and the absolute runs directory.
func (g *Globals) setup(env *Env) (*schemas.Set, config.Config, string, error) {
	set, err := compileSchemas()
	if err != nil {
		return nil, config.Config{}, "", err
	}
	cfg, err := g.config(env, set)
	if err != nil {
		return nil, cfg, "", err
	}
	runs, err := filepath.Abs(g.runsDir(env))
	if err != nil {
		return nil, cfg, "", usageError{err}
	}
	return set, cfg, runs, nil
}

func compileSchemas() (*schemas.Set, error) {
	set, err := schemas.Compile()
	if err != nil {
		return nil, fmt.Errorf("the embedded schemas do not compile (a broken build): %w", err)
	}
	return set, nil
}

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(display.JSON(b))) // no raw bidi or format character reaches the terminal
	return err
}

// Stage3CLI is the validate-case-stage3 binary: `validate-stage 3` with a
// grammar of its own, so that its help and errors carry its own name.
type Stage3CLI struct {
	Globals
	StageFlags
}

func (c *Stage3CLI) globals() *Globals { return &c.Globals }

// Run validates stage 3.
func (c *Stage3CLI) Run(g *Globals, env *Env) error { return c.StageFlags.validate(g, env, 3) }

// MainStage3 is the validate-case-stage3 binary: exactly `cto-harness validate-stage 3`.
func MainStage3(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && (args[0] == backend.FakeSubcommand || args[0] == sandbox.Subcommand || args[0] == supervise.Subcommand) {
		return Main(ctx, args, stdout, stderr, getenv)
	}
	return runCLI(ctx, args, stdout, stderr, getenv, &Stage3CLI{}, kong.Name("validate-case-stage3"),
		kong.Description("Validates stage 3 of the proof route, exactly as 'cto-harness validate-stage 3' does, for CI.\n\n"+stageHelp))
}
