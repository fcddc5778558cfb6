package cli

import (
	"fmt"
	"io"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/validators"
)

// FixturesCmd groups the failure-matrix commands.
type FixturesCmd struct {
	List   FixturesListCmd   `cmd:"" help:"List the failure matrix: every class that must fail closed."`
	Replay FixturesReplayCmd `cmd:"" help:"Replay one failure row and compare expected with actual blockers and events."`
}

// FixturesListCmd is `cto-harness fixtures list`.
type FixturesListCmd struct {
	JSON     bool `name:"json" help:"Print the matrix as one JSON line."`
	Markdown bool `name:"markdown" help:"Print the matrix as the markdown table of docs/failure-matrix.md."`
}

// Run executes the command.
func (c *FixturesListCmd) Run(env *Env) error {
	rows, err := fixtures.Matrix()
	if err != nil {
		return err
	}
	switch {
	case c.JSON:
		return printJSON(env.Stdout, rows)
	case c.Markdown:
		return WriteMatrixMarkdown(env.Stdout, rows)
	}
	for _, r := range rows {
		fmt.Fprintf(env.Stdout, "%-30s %s\n%30s expects %s, last step %s\n", r.Name, r.Description, "",
			strings.Join(r.ExpectedBlockers, "+"), r.ExpectedLastEvent)
	}
	return nil
}

// WriteMatrixMarkdown renders the failure matrix as the table kept in docs/failure-matrix.md.
func WriteMatrixMarkdown(w io.Writer, rows []fixtures.Row) error {
	var b strings.Builder
	b.WriteString("| row | what happens | set-up | expected blockers | last step event | Case may start |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		may := "no"
		if r.CaseProcessStarted {
			may = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | `%s` | %s |\n", r.Name, r.Description, describeSetup(r.Setup),
			"`"+strings.Join(r.ExpectedBlockers, "`, `")+"`", r.ExpectedLastEvent, may)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func describeSetup(s fixtures.Setup) string {
	var parts []string
	if s.Stage != 0 {
		parts = append(parts, fmt.Sprintf("stage %d", s.Stage))
	}
	if s.AllowCase != nil {
		parts = append(parts, fmt.Sprintf("CTO_HARNESS_ALLOW_CASE=%q", *s.AllowCase))
	}
	if s.CaseStage != nil {
		parts = append(parts, fmt.Sprintf("CTO_HARNESS_CASE_STAGE=%q", *s.CaseStage))
	}
	if s.Stage2Record != "" {
		parts = append(parts, "stage 2 record "+s.Stage2Record)
	}
	if s.Source != "" {
		parts = append(parts, "source "+strings.ReplaceAll(s.Source, "_", " "))
	}
	if s.SourceModify != "" {
		parts = append(parts, "source file "+s.SourceModify+" modified")
	}
	if s.NoTask {
		parts = append(parts, "no task spec (run without --task)")
	}
	if s.SourceUntracked != "" {
		parts = append(parts, "untracked "+s.SourceUntracked+" in the source")
	}
	if s.RunsBesideSource {
		parts = append(parts, "runs directory `<source>-runs`")
	}
	if len(s.WarmCaches) > 0 {
		parts = append(parts, "warm caches "+strings.Join(s.WarmCaches, ", ")+" (host caches made for the row)")
	}
	if s.Scenario != "" {
		parts = append(parts, "fake Case scenario `"+s.Scenario+"`")
	}
	if s.CaseTimeoutSeconds != 0 {
		parts = append(parts, fmt.Sprintf("Case timeout %ds", s.CaseTimeoutSeconds))
	}
	if s.Profile != "" {
		parts = append(parts, "profile "+s.Profile)
	}
	if s.Verification != "" {
		parts = append(parts, "verification `"+strings.ReplaceAll(s.Verification, "|", "\\|")+"`")
	}
	if s.VerifyTimeout != 0 {
		parts = append(parts, fmt.Sprintf("verification timeout %ds", s.VerifyTimeout))
	}
	for _, a := range s.AllowNet {
		parts = append(parts, "`--allow-net "+a+"`")
	}
	for _, a := range s.VerifyAllowNet {
		parts = append(parts, "`--verify-allow-net "+a+"`")
	}
	if s.Unsandboxed {
		parts = append(parts, "`--unsandboxed`")
	}
	if s.Fault != "" {
		parts = append(parts, "fault `"+s.Fault+"`")
	}
	if s.Model != "" {
		parts = append(parts, "stand-in agent, model provider `"+s.Model+"`")
	}
	if s.ModelStallSeconds != 0 {
		parts = append(parts, fmt.Sprintf("`agent.stall_seconds` %d", s.ModelStallSeconds))
	}
	return strings.Join(parts, "; ")
}

// FixturesReplayCmd is `cto-harness fixtures replay NAME`.
type FixturesReplayCmd struct {
	Name string `arg:"" name:"NAME" help:"Row name (see 'cto-harness fixtures list')."`
	Keep bool   `name:"keep" help:"Keep the row's materialized sources and workspace, not only its evidence, and keep its directory when replays are pruned (a file named 'kept' in it)."`
	JSON bool   `name:"json" help:"Print one JSON line: expected and actual blockers and events, evidence path."`
}

// Help explains replay.
func (FixturesReplayCmd) Help() string {
	return `Sets the row up in a directory of its own under RUNS_DIR/matrix/ (validating stage 2 first if its record
is missing), runs it, and checks that it failed closed exactly as the matrix says: the expected blockers and
no others, the expected last step, no Case process where none may start, the source unchanged, and evidence
that validates. A row marked to pass (an honest run) must pass and validate instead. The next full replay
(validate-stage 3) or 'runs prune' removes the directory unless --keep was given. Exit status: 0 when the row
held as the matrix says, 1 otherwise.`
}

// Run executes the command.
func (c *FixturesReplayCmd) Run(g *Globals, env *Env) error {
	row, err := fixtures.Lookup(c.Name)
	if err != nil {
		return usageError{err}
	}
	set, cfg, runs, err := g.setup(env)
	if err != nil {
		return err
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	so := validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: env.Self, HostEnv: env.Getenv, Config: cfg, Signing: keys}
	if err := validators.EnsureStage2(env.Ctx, so); err != nil {
		return err
	}
	res := validators.Replay(env.Ctx, row, validators.ReplayOptions{RunsDir: runs, Schemas: set, SelfExe: env.Self,
		HostEnv: env.Getenv, Keep: c.Keep, Signing: keys})
	if c.JSON {
		_ = printJSON(env.Stdout, res)
	} else {
		verdict := "failed closed as expected"
		if row.ExpectedStatus == string(ctoharness.StatusPass) {
			verdict = "passed as expected" // an honest row: it must pass and validate
		}
		if !res.OK {
			verdict = "NOT as expected"
		}
		fmt.Fprintf(env.Stdout, "row %s: %s\n", row.Name, verdict)
		fmt.Fprintf(env.Stdout, "  blockers:   expected %s, actual %s\n", strings.Join(res.ExpectedBlockers, " "), term(strings.Join(res.ActualBlockers, " ")))
		fmt.Fprintf(env.Stdout, "  last step:  expected %s, actual %s\n", res.ExpectedLastEvent, term(res.ActualLastEvent))
		fmt.Fprintf(env.Stdout, "  Case started: %v, status: %s, evidence valid: %v\n", res.CaseProcessStarted, term(res.Status), res.EvidenceValid)
		fmt.Fprintf(env.Stdout, "  evidence:   %s\n", term(res.RunDir))
		for _, e := range res.Errors {
			fmt.Fprintf(env.Stdout, "  error: %s\n", term(e))
		}
	}
	if !res.OK {
		fmt.Fprintf(env.Stderr, "cto-harness: row %s did not fail closed as expected (see %s)\n", row.Name, term(res.RunDir))
		return exitError{ExitFailed}
	}
	return nil
}
