package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/reportmd"
)

// ShowCmd is `cto-harness show RUN`.
type ShowCmd struct {
	Target string `arg:"" name:"RUN" help:"A run directory, or a run id under the runs directory."`
	Open   bool   `name:"open" help:"Open the run's report.html with xdg-open."`
}

// Help explains show.
func (ShowCmd) Help() string {
	return `Prints a short summary of one run from its report.json: status, stage, blockers with the step that
raised them, changed files, the verification, and where the page (report.html) is. With --open the page
is opened in the desktop's browser through xdg-open; the page is one self-contained file and needs no
network. Use 'cto-harness validate RUN_DIR' to check the evidence.`
}

// Run executes the command.
func (c *ShowCmd) Run(g *Globals, env *Env) error {
	dir, err := c.resolve(g, env)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
	if err != nil {
		return usagef("%s has no readable report.json (%v); is it a run directory?", dir, err)
	}
	var rep ctoharness.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return usagef("%s/report.json is not valid JSON: %v; 'cto-harness validate %s' says more", dir, err, dir)
	}
	var extra struct {
		Signed bool   `json:"signed"`
		KeyID  string `json:"signing_key_id"`
		Agent  *struct {
			Name  string                 `json:"name"`
			Model string                 `json:"model"`
			Usage *ctoharness.ModelUsage `json:"usage"`
		} `json:"agent"`
	}
	_ = json.Unmarshal(data, &extra)
	// report.json is evidence a Case run wrote names and messages into, and
	// anyone may have edited it since: every string goes through term.
	w := env.Stdout
	fmt.Fprintf(w, "run %s: %s\n", term(rep.RunID), term(strings.ToUpper(string(rep.Status))))
	if rep.Outcome != "" { // reports from before the field have none
		fmt.Fprintf(w, "  outcome %s\n", term(rep.Outcome))
	}
	fmt.Fprintf(w, "  stage %d (%s), backend %s, lane %s", rep.Stage, term(rep.StageName), term(rep.Backend), term(rep.CaseLane))
	if extra.Agent != nil {
		fmt.Fprintf(w, ", agent %s %s", term(extra.Agent.Name), term(extra.Agent.Model))
	}
	fmt.Fprintln(w)
	if extra.Agent != nil {
		if u := extra.Agent.Usage; u != nil {
			fmt.Fprintf(w, "  model: %d requests (%d failed), tokens in %d uncached + %d cache read + %d cache write, out %d; cost %s\n",
				u.Requests, u.Failed, u.InputUncached, u.CacheRead, u.CacheWrite, u.Output, term(reportmd.CostText(u)))
		} else {
			fmt.Fprintln(w, "  model: no requests (the agent was not started)")
		}
	}
	fmt.Fprintf(w, "  started %s, took %s\n", rep.Freshness.StartedAt.UTC().Format(time.RFC3339),
		rep.Freshness.FinishedAt.Sub(rep.Freshness.StartedAt).Round(time.Millisecond))
	sandbox := "not enforced"
	if rep.Sandbox.Enforced {
		sandbox = "enforced (" + strings.Join(rep.Sandbox.Mechanisms, ", ") + ")"
	}
	signed := "not signed"
	if rep.UnsignedReason != "" {
		signed += " (" + rep.UnsignedReason + ")"
	}
	if extra.Signed {
		signed = "signed (key " + extra.KeyID + "; verify with 'cto-harness validate', elsewhere with --pubkey and the signer's public key)"
	}
	fmt.Fprintf(w, "  harness %s, sandbox %s, %s\n", term(rep.Freshness.HarnessVersion), term(sandbox), term(signed))
	if len(rep.Blockers) == 0 {
		fmt.Fprintln(w, "blockers: none")
	}
	for _, b := range rep.Blockers {
		fmt.Fprintf(w, "blocker %s at %s: %s\n", term(b.Code), term(b.Step), term(b.Message))
	}
	fmt.Fprintf(w, "changed files: %d\n", len(rep.ChangedFiles))
	for _, f := range rep.ChangedFiles {
		verdict := "allowed"
		if !f.Allowed {
			verdict = "OUTSIDE the allowed paths"
		}
		fmt.Fprintf(w, "  %-8s %s (%s)\n", term(f.Change), term(f.Path), verdict)
	}
	exit := "none"
	if rep.Tests.ExitCode != nil {
		exit = fmt.Sprint(*rep.Tests.ExitCode)
	}
	fmt.Fprintf(w, "verification: %s (exit %s) %s\n", term(rep.Tests.Classification), exit, term(rep.Tests.Command))
	page := filepath.Join(dir, evidence.ReportHTML)
	fmt.Fprintf(w, "page: %s\n", term(page))
	if !c.Open {
		return nil
	}
	if _, err := os.Stat(page); err != nil {
		return usagef("%s has no report.html to open: %v", dir, err)
	}
	return openPage(env, page)
}

// resolve accepts a run directory or a run id in the runs directory.
func (c *ShowCmd) resolve(g *Globals, env *Env) (string, error) {
	if st, err := os.Stat(c.Target); err == nil && st.IsDir() {
		return filepath.Abs(c.Target)
	}
	if !strings.ContainsRune(c.Target, filepath.Separator) {
		p := filepath.Join(g.runsDir(env), c.Target)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return filepath.Abs(p)
		}
	}
	return "", usagef("%s is neither a run directory nor a run id under %s; 'cto-harness runs' lists them", c.Target, g.runsDir(env))
}

// openPage hands the page to xdg-open; without it, it says how to open it by hand.
func openPage(env *Env, page string) error {
	opener, err := exec.LookPath("xdg-open")
	if errors.Is(err, exec.ErrNotFound) || opener == "" {
		fmt.Fprintf(env.Stderr, "cto-harness: cannot open the page: xdg-open is not installed (Debian: apt-get install xdg-utils); open file://%s in a browser\n", page)
		return exitError{ExitFailed}
	}
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(env.Ctx, opener, page)
	cmd.Stdout, cmd.Stderr = env.Stderr, env.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(env.Stderr, "cto-harness: %s %s failed: %v; open file://%s in a browser\n", opener, page, err, page)
		return exitError{ExitFailed}
	}
	return nil
}
