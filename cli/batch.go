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
	"sync"
	"text/tabwriter"
	"time"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// BatchCmd is `cto-harness batch`.
type BatchCmd struct {
	Run       BatchRunCmd       `cmd:"" help:"Run every trial of a batch spec that has no final result yet, then write batch.json and batch.html."`
	Status    BatchStatusCmd    `cmd:"" help:"Show where a batch stands: trials finished, pending and by outcome."`
	Compare   BatchCompareCmd   `cmd:"" help:"Compare two batches, or two agents, task by task."`
	Verify    BatchVerifyCmd    `cmd:"" help:"Check a batch directory end to end: the signed summary, every trial's run, every count."`
	NatsUsers BatchNatsUsersCmd `cmd:"" name:"nats-users" help:"Make the NATS nkeys and the nats-server authorization block of a coordinator and its workers."`
}

// Help explains batches.
func (BatchCmd) Help() string {
	return `A batch spec (JSON, schemas/batch-spec.schema.json) lists sources, tasks, agents and repeats; each
combination is a trial with an id derived from the source's HEAD, the task's digest, the agent and the
repeat index; each attempt at a trial (a retry is another attempt, not another trial) has the trial's id and
its index as its id, and is an ordinary stage-3 run with its full evidence. Results are kept in
RUNS_DIR/batches/<batch id>/ and a batch resumes where it stopped. See docs/batch.md.`
}

// BatchRunCmd is `cto-harness batch run SPEC`.
type BatchRunCmd struct {
	Spec        string        `arg:"" type:"path" help:"The batch spec file." placeholder:"SPEC"`
	Concurrency int           `name:"concurrency" help:"Trials at once (default: the spec's concurrency, else each coding agent's max_in_flight (8 unless the spec says) summed, plus one per core and per 2 GiB of memory for the fake Case, bounded by memory at 768 MiB a trial). Each agent's max_in_flight holds whatever this is."`
	NATS        string        `name:"nats" help:"Publish the trials to this NATS JetStream server and let 'cto-harness worker' processes run them (see docs/batch.md)." placeholder:"URL"`
	WorkerKeys  []string      `name:"worker-key" sep:"none" type:"path" placeholder:"FILE" help:"With --nats: a worker's public key (PEM), besides the config's signing.worker_keys; a result is counted only when signed by one of these; repeatable."`
	AckWait     time.Duration `name:"ack-wait" default:"2m" help:"With --nats: how long a worker may go silent before its trial is given to another worker."`
	AutoConfirm bool          `name:"auto-confirm" help:"Let the tests a task's adversary writes run without asking: a batch asks nobody, so a batch whose tasks have an adversary needs it (or the config's auto_confirm). With --nats each worker's own config decides."`
	NATSAuth    natsAuthFlags `embed:""`
}

// Help explains a batch run.
func (BatchRunCmd) Help() string {
	return `Every trial is a stage-3 run, so the stage gates apply: set CTO_HARNESS_ALLOW_CASE=1 and
CTO_HARNESS_CASE_STAGE=3. Stages 1 and 2 are validated in the runs directory first when their records are
missing. A trial with a final result whose evidence still validates (and, with a signing key, is signed) is
skipped; only infra_failed and model_failed trials are tried again, up to max_attempts, and every attempt is
kept. SIGINT or SIGTERM stops the batch: the trials that finished stay recorded, and running the same
command again resumes. The summary is RUNS_DIR/batches/<batch id>/batch.json (signed as batch.dsse.json
when a signing key is configured) and batch.html.

Exit status: 0 every trial has a final result, 1 some have none (stopped, or evidence never validated),
2 bad input (nothing run), 3 the summary could not be written.`
}

// batchEnv loads what both batch commands need: schemas, config, the runs
// directory, the spec and its plan.
func batchPlan(g *Globals, env *Env, specPath string) (*schemas.Set, config.Config, string, batch.Plan, batch.Spec, error) {
	set, cfg, runs, err := g.setup(env)
	if err != nil {
		return nil, cfg, "", batch.Plan{}, batch.Spec{}, err
	}
	if err := checkInputFile("batch spec", specPath, "a batch spec JSON file", "docs/batch.md"); err != nil {
		return nil, cfg, "", batch.Plan{}, batch.Spec{}, err
	}
	spec, err := batch.LoadSpec(env.Ctx, specPath, set)
	if err != nil {
		return nil, cfg, "", batch.Plan{}, batch.Spec{}, usageError{err}
	}
	keys, err := g.keys(env, cfg, false)
	if err != nil {
		return nil, cfg, "", batch.Plan{}, batch.Spec{}, err
	}
	plan, err := batch.MakePlan(env.Ctx, spec, set, keys.Trusted...)
	if err != nil {
		return nil, cfg, "", batch.Plan{}, batch.Spec{}, usageError{err}
	}
	return set, cfg, runs, plan, spec, nil
}

// Run executes the command.
func (c *BatchRunCmd) Run(g *Globals, env *Env) error {
	set, cfg, runs, plan, spec, err := batchPlan(g, env, c.Spec)
	if err != nil {
		return err
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	st, err := batch.OpenStore(runs, plan.BatchID)
	if err != nil {
		return err
	}
	conc := c.Concurrency
	var runner batch.Runner
	verify := localVerifier(set, keys)
	if c.NATS != "" {
		workers, err := workerKeys(cfg, c.WorkerKeys)
		if err != nil {
			return err
		}
		if len(workers) == 0 {
			return usagef("--nats needs at least one worker key (--worker-key FILE, or signing.worker_keys in the config): a worker's result is counted only when its signature verifies")
		}
		if keys.Signer == nil {
			return usagef("--nats signs every trial request, and signing is disabled in the config: remove signing.disabled (the machine key is then used), or configure a key (%s or signing.key_file); list its public key in each worker's signing.coordinator_keys", attest.EnvSigningKeyFile)
		}
		co, err := newCoordinator(env, set, st, plan, workers, keys.Signer, c.NATS, c.NATSAuth.auth(), c.AckWait)
		if err != nil {
			return err
		}
		defer co.Close()
		runner = co
		verify = remoteVerifier(set, workers)
		if conc == 0 {
			// The spec's concurrency is one machine's; here the workers
			// bound how many run, and every trial waits in the queue.
			conc = len(plan.Trials)
		}
	} else {
		if err := checkStageGates(env); err != nil {
			return err
		}
		if err := validators.EnsureStage2(env.Ctx, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: env.Self, HostEnv: env.Getenv,
			Config: cfg, Signing: keys}); err != nil {
			return fmt.Errorf("a batch runs stage-3 trials, which need stages 1 and 2 validated in %s: %w; run 'cto-harness demo' or 'cto-harness validate-stage 2' there", runs, err)
		}
		if tasks := adversaryTasks(plan); len(tasks) > 0 && !c.AutoConfirm && !cfg.AutoConfirm {
			return usagef("the tasks %s have an adversary, whose tests run only once someone confirms them, and a batch asks nobody: run with --auto-confirm (or \"auto_confirm\": true in the config)", strings.Join(tasks, ", "))
		}
		local := batch.Local{Base: harness.Options{RunsDir: runs, Config: cfg, Getenv: env.Getenv, SelfExe: env.Self, Schemas: set, AutoConfirm: c.AutoConfirm,
			VerifyRun: validators.RememberStageRuns(validators.StageRunVerifier(set)), Signing: keys, SandboxProbe: sandbox.Reuse(env.Self), ViewTrials: sandbox.NewTrials()}}
		// What would stop a trial is found before any runs: a missing agent
		// would otherwise fail every trial as infra_failed, retried.
		problems, err := local.Precheck(env.Ctx, plan, st)
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			for _, p := range problems {
				fmt.Fprintf(env.Stderr, "cto-harness: %s\n", term(p))
			}
			return usagef("the batch cannot run as its spec and this machine are (%d problems above); nothing was run: fix them and run the same command again", len(problems))
		}
		runner = local
		if conc == 0 {
			conc = spec.Concurrency
		}
		if conc == 0 {
			var why string
			if conc, why = batch.ConcurrencyFor(plan); why != "" {
				fmt.Fprintf(env.Stderr, "cto-harness: %s\n", why)
			}
		}
	}
	fmt.Fprintf(env.Stdout, "batch %s: %d trials (%d sources x %d tasks x %d agents x %d repeats), %d at once, at most %d attempts each\n",
		term(plan.BatchID), len(plan.Trials), len(spec.Sources), len(spec.Tasks), len(spec.Agents), spec.Repeats, conc, plan.MaxAttempts)
	fmt.Fprintf(env.Stdout, "batch directory: %s\n", term(st.Dir))
	counts, execErr := batch.Execute(env.Ctx, plan, st, runner, batch.Options{Concurrency: conc, Verify: verify, OnEvent: progressPrinter(env.Stderr)})
	// The summary is written whatever happened, from what is recorded.
	sum, err := batch.Summarize(plan, st, time.Now())
	if err != nil {
		return err
	}
	keyID, err := batch.WriteSummary(context.WithoutCancel(env.Ctx), st, sum, set, keys.Signer)
	if err != nil {
		return fmt.Errorf("write the batch summary in %s: %w", st.Dir, err)
	}
	printSummary(env.Stdout, sum)
	fmt.Fprintf(env.Stdout, "summary: %s (%s), page: %s\n", term(filepath.Join(st.Dir, batch.SummaryJSON)), batchSigned(keyID), term(filepath.Join(st.Dir, batch.SummaryHTML)))
	if counts.Skipped > 0 {
		fmt.Fprintf(env.Stdout, "%d trials had a final result already and were not run again\n", counts.Skipped)
	}
	switch {
	case errors.Is(execErr, context.Canceled) || env.Ctx.Err() != nil:
		fmt.Fprintf(env.Stderr, "cto-harness: batch stopped with %d of %d trials final; run the same command again to resume\n", sum.Finished, sum.Trials)
		return exitError{ExitFailed}
	case execErr != nil:
		return execErr
	case !sum.Complete:
		fmt.Fprintf(env.Stderr, "cto-harness: %d of %d trials have no final result (their evidence did not validate in %d attempts); see 'cto-harness batch status %s'\n",
			sum.Trials-sum.Finished, sum.Trials, plan.MaxAttempts, term(c.Spec))
		return exitError{ExitFailed}
	}
	return nil
}

func batchSigned(keyID string) string {
	if keyID == "" {
		return "unsigned: no signing key configured"
	}
	return "signed by key " + keyID + " in " + batch.SummarySignature
}

// checkStageGates refuses a local batch without the stage-3 gates: every
// trial would only be blocked at its gate.
func checkStageGates(env *Env) error {
	if env.Getenv(gates.EnvAllowCase) != "1" || env.Getenv(gates.EnvCaseStage) != "3" {
		return usagef("a batch runs stage-3 trials: set %s=1 and %s=3 (got %q and %q)", gates.EnvAllowCase, gates.EnvCaseStage,
			env.Getenv(gates.EnvAllowCase), env.Getenv(gates.EnvCaseStage))
	}
	return nil
}

// localVerifier re-validates a recorded local attempt on resume: the full run
// validation, and the signature when this machine signs.
func localVerifier(set *schemas.Set, keys attest.Keys) batch.Verifier {
	trusted := localTrust(keys)
	return func(ctx context.Context, t batch.Trial, a batch.Attempt) []string {
		d := batch.Describe(ctx, a.RunDir, set, keys.Signer != nil, trusted)
		return boundTo(t, a, d)
	}
}

// progressPrinter prints one line per finished trial, with the running totals.
func progressPrinter(w io.Writer) func(batch.Event) {
	var mu sync.Mutex
	return func(e batch.Event) {
		mu.Lock()
		defer mu.Unlock()
		c := e.Counts
		queued := ""
		if c.Queued > 0 {
			queued = fmt.Sprintf(", %d queued", c.Queued)
		}
		head := fmt.Sprintf("[%d/%d done, %d running%s, %d not passed, %d retries | tokens %d | cost $%.4f%s]", c.Done, c.Total, c.Running, queued,
			c.Failed, c.Retries, c.Tokens, c.CostUSD, unknownCost(c.CostUnknown))
		name := fmt.Sprintf("%s %s/%s#%d", e.Trial.ID, e.Trial.Agent.Name, e.Trial.Task, e.Trial.Repeat)
		switch e.Kind {
		case "skip":
			fmt.Fprintf(w, "%s %s: %s (recorded earlier)\n", head, term(name), term(e.Attempt.Outcome))
		case "start":
			fmt.Fprintf(w, "%s %s: started\n", head, term(name))
		case "retry":
			fmt.Fprintf(w, "%s %s: retrying after %s\n", head, term(name), term(e.Attempt.Outcome))
		case "done":
			fmt.Fprintf(w, "%s %s: %s in attempt %d (%s, run %s)\n", head, term(name), term(e.Attempt.Outcome), e.Attempt.N, term(e.Attempt.ID), term(e.Attempt.RunDir))
		}
	}
}

func unknownCost(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" + %d unknown", n)
}

func printSummary(w io.Writer, s batch.Summary) {
	fmt.Fprintf(w, "\n%d of %d trials final\n", s.Finished, s.Trials)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tTASK\tPASSED\tPASS@1\tPASS@K\tPASS^K\tAGENT_FAILED\tMODEL_FAILED\tINFRA_FAILED\tPOLICY_BLOCKED\tTASK_INVALID\tTOKENS\tCOST\tTIME\tQUEUED")
	for _, c := range s.Cells {
		p1, pk, phk := "-", estimate("@", c.PassAtK), estimate("^", c.PassHatK)
		if len(c.PassAtK) > 0 && c.PassAtK[0].Value != nil {
			p1 = fmt.Sprintf("%.2f", *c.PassAtK[0].Value)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.1fs\t%.1fs\n", term(c.Agent), term(c.Task), passed(c.Totals), p1, pk, phk,
			c.Outcomes.AgentFailed, c.Outcomes.ModelFailed, c.Outcomes.InfraFailed, c.Outcomes.PolicyBlocked, c.Outcomes.TaskInvalid, c.InputTokens+c.OutputTokens,
			costText(c.Totals), float64(c.DurationMs)/1000, float64(c.QueueMs)/1000)
	}
	tw.Flush()
}

// passed is passes over scored trials, with the unscored ones
// (infra_failed, model_failed: not the agent's) named beside.
func passed(t batch.Totals) string {
	if u := t.Finished - t.Scored; u > 0 {
		return fmt.Sprintf("%d/%d (+%d unscored)", t.Passes, t.Scored, u)
	}
	return fmt.Sprintf("%d/%d", t.Passes, t.Scored)
}

// estimate is the largest k's value, or that there are not enough scored
// trials for it.
func estimate(sign string, p []batch.PassAtK) string {
	if len(p) == 0 {
		return "-"
	}
	last := p[len(p)-1]
	if last.Value == nil {
		return fmt.Sprintf("%s%d: not enough trials", sign, last.K)
	}
	return fmt.Sprintf("%s%d=%.2f", sign, last.K, *last.Value)
}

func costText(t batch.Totals) string {
	if t.CostUSD == nil {
		return "unknown"
	}
	return fmt.Sprintf("$%.4f(%s)", *t.CostUSD, t.CostBasis)
}

// BatchStatusCmd is `cto-harness batch status SPEC`.
type BatchStatusCmd struct {
	Spec string `arg:"" type:"path" help:"The batch spec file." placeholder:"SPEC"`
	JSON bool   `name:"json" help:"Print the summary (the batch.json shape) as one JSON line."`
}

// Run executes the command.
func (c *BatchStatusCmd) Run(g *Globals, env *Env) error {
	_, cfg, runs, plan, _, err := batchPlan(g, env, c.Spec)
	if err != nil {
		return err
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	st := batch.Store{Dir: filepath.Join(runs, "batches", plan.BatchID)}
	sum, err := batch.Summarize(plan, st, time.Now())
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(env.Stdout, sum)
	}
	pending, retrying := 0, 0
	for _, t := range sum.TrialList {
		switch {
		case t.Outcome == batch.Pending:
			pending++
		case !t.Final:
			retrying++
		}
	}
	fmt.Fprintf(env.Stdout, "batch %s (%s)\n", term(plan.BatchID), term(st.Dir))
	fmt.Fprintf(env.Stdout, "%d trials: %d final, %d never run, %d waiting for another attempt\n", sum.Trials, sum.Finished, pending, retrying)
	printSummary(env.Stdout, sum)
	fmt.Fprintf(env.Stdout, "last written summary: %s\n", summaryState(env.Ctx, st.Dir, localTrust(keys)))
	return nil
}

// BatchCompareCmd is `cto-harness batch compare A B`.
type BatchCompareCmd struct {
	A    string `arg:"" help:"A batch directory, its batch.json, or the batch's spec file (its batch in the runs directory), optionally with #AGENT to pick one agent." placeholder:"A"`
	B    string `arg:"" help:"The other side, in the same form; 'DIR#x' and 'DIR#y' compare two agents of one batch." placeholder:"B"`
	JSON bool   `name:"json" help:"Print the comparison as one JSON line."`
}

// Help explains the pairing.
func (BatchCompareCmd) Help() string {
	return `Pairs the two sides task by task (agent and task when neither side names an agent) and prints
each side's passes and pass rate, the difference (B - A), and how many tasks each side did better on.
Rates are over scored trials: infra_failed and model_failed trials (the machine or the model provider
failed, not the agent) are left out, and a task with no scored trial on one side is listed, not
compared. Tasks only one side has are listed, not compared. Both summaries are checked against the batch schema.`
}

// Run executes the command.
func (c *BatchCompareCmd) Run(g *Globals, env *Env) error {
	set, err := compileSchemas()
	if err != nil {
		return err
	}
	a, err := c.side(g, env, set, c.A)
	if err != nil {
		return err
	}
	b, err := c.side(g, env, set, c.B)
	if err != nil {
		return err
	}
	cmp := batch.Compare(a, b)
	if c.JSON {
		return printJSON(env.Stdout, cmp)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tA PASSED\tB PASSED\tA RATE\tB RATE\tB-A")
	for _, p := range cmp.Pairs {
		fmt.Fprintf(tw, "%s\t%d/%d\t%d/%d\t%.2f\t%.2f\t%+.2f\n", term(p.Key), p.APasses, p.AScored, p.BPasses, p.BScored, p.ARate, p.BRate, p.Delta)
	}
	tw.Flush()
	fmt.Fprintf(env.Stdout, "%d tasks compared: B better on %d, A better on %d, tied on %d; mean difference %+.3f (rates over scored trials: infra_failed and model_failed ones are left out)\n", len(cmp.Pairs), cmp.BBetter, cmp.ABetter, cmp.Ties, cmp.MeanDelta)
	if len(cmp.Unscored) > 0 {
		fmt.Fprintf(env.Stdout, "not compared, no scored trial on one side (every finished trial failed for the machine's or the model provider's reasons): %s\n", term(strings.Join(cmp.Unscored, ", ")))
	}
	if len(cmp.OnlyInA) > 0 || len(cmp.OnlyInB) > 0 {
		fmt.Fprintf(env.Stdout, "not paired: only in A: %s; only in B: %s\n", term(strings.Join(cmp.OnlyInA, ", ")), term(strings.Join(cmp.OnlyInB, ", ")))
	}
	return nil
}

// uniqueKeys lists each key once (the signer's own key may be trusted
// explicitly as well), so that a message naming the trusted keys names
// each once.
func uniqueKeys(ks []attest.PublicKey) []attest.PublicKey {
	seen := map[string]bool{}
	var out []attest.PublicKey
	for _, k := range ks {
		if !seen[k.ID] {
			seen[k.ID] = true
			out = append(out, k)
		}
	}
	return out
}

// localTrust is the keys this machine verifies its own summaries with.
func localTrust(keys attest.Keys) []attest.PublicKey {
	out := append([]attest.PublicKey(nil), keys.Trusted...)
	if keys.Signer != nil {
		out = append(out, keys.Signer.Public())
	}
	return out
}

// summaryState says whether batch.json exists and its signature verifies.
func summaryState(ctx context.Context, dir string, trusted []attest.PublicKey) string {
	p := filepath.Join(dir, batch.SummaryJSON)
	if _, err := os.Stat(p); err != nil {
		return "none yet (batch run writes it)"
	}
	if _, err := os.Stat(filepath.Join(dir, batch.SummarySignature)); err != nil {
		return p + ", unsigned"
	}
	id, err := batch.VerifySummary(ctx, dir, trusted)
	if err != nil {
		return fmt.Sprintf("%s, signature NOT verified: %v", p, err)
	}
	return fmt.Sprintf("%s, signed by key %s, signature verified", p, id)
}

// side reads one side of a comparison.
func (c *BatchCompareCmd) side(g *Globals, env *Env, set *schemas.Set, arg string) (batch.Side, error) {
	path, agent, hasAgent := strings.Cut(arg, "#")
	path, err := batchDirArg(g, env, set, path)
	if err != nil {
		return batch.Side{}, err
	}
	if hasAgent {
		path += "#" + agent
	}
	s, err := batch.ParseSide(path, set)
	if err != nil {
		return s, usageError{err}
	}
	s.Label = arg
	return s, nil
}

// batchDirArg resolves a command's batch argument: a spec file stands for
// its batch's directory in the runs directory; anything else is returned as
// given (a batch directory or its batch.json).
func batchDirArg(g *Globals, env *Env, set *schemas.Set, arg string) (string, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return "", usageError{err}
	}
	if st.IsDir() {
		return arg, nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return "", usageError{err}
	}
	if set.Validate(schemas.BatchSpec, data) != nil {
		return arg, nil
	}
	_, _, runs, plan, _, err := batchPlan(g, env, arg)
	if err != nil {
		return "", err
	}
	return filepath.Join(runs, "batches", plan.BatchID), nil
}

// BatchVerifyCmd is `cto-harness batch verify DIR`.
type BatchVerifyCmd struct {
	Dir              string   `arg:"" help:"A batch directory (RUNS_DIR/batches/<batch id>, here or copied elsewhere with its runs), or the batch's spec file." placeholder:"DIR"`
	WorkerKeys       []string `name:"worker-key" sep:"none" type:"path" placeholder:"FILE" help:"A worker's public key (PEM), for the runs workers made, besides the config's signing.worker_keys; repeatable."`
	RequireSignature bool     `name:"require-signature" help:"Fail an unsigned summary or trial run, or one no given key verifies, even where the config disables signing."`
	AllowUnsigned    bool     `name:"allow-unsigned" help:"Accept an unsigned summary, and trial runs no trusted key signed, as unverified."`
	JSON             bool     `name:"json" help:"Print one JSON line: ok, batch_id, signed_by, trials_checked, errors."`
}

// Help explains what is checked.
func (BatchVerifyCmd) Help() string {
	return `Checks batch.json against its schema and batch.dsse.json against the trusted keys (--pubkey, the
config's signing.trusted_keys); validates every finished trial's run in full (found through its report
link, so a copied batch directory works when the runs were copied along), against the same keys and the
worker keys (--worker-key, the config's signing.worker_keys); derives each trial's outcome again from its run; and recounts passes and outcomes per
agent and task. A signature by a trusted key is required on the summary and on every trial run unless
--allow-unsigned (or the config's signing.disabled) is given. Exit status: 0 everything holds, 1
something does not, 2 bad input.`
}

// Run executes the command.
func (c *BatchVerifyCmd) Run(g *Globals, env *Env) error {
	set, cfg, _, err := g.setup(env)
	if err != nil {
		return err
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	workers, err := workerKeys(cfg, c.WorkerKeys)
	if err != nil {
		return err
	}
	dir, err := batchDirArg(g, env, set, c.Dir)
	if err != nil {
		return err
	}
	res := batch.VerifyDir(env.Ctx, dir, set, batch.VerifyOptions{Trusted: uniqueKeys(append(localTrust(keys), workers...)), RequireSignature: requireSignature(c.RequireSignature, c.AllowUnsigned, keys)})
	for _, e := range res.Errors {
		if strings.Contains(e, "signed by no trusted key") {
			res.Errors = append(res.Errors, "a run signed by a key that is not trusted here: a worker's run needs that worker's public key, given with --worker-key FILE or listed in the config's signing.worker_keys")
			break
		}
	}
	if c.JSON {
		if err := printJSON(env.Stdout, res); err != nil {
			return err
		}
	} else {
		for _, e := range res.Errors {
			fmt.Fprintf(env.Stdout, "error: %s\n", term(e))
		}
		signed := "unsigned"
		if res.SignedBy != "" {
			signed = "signed by key " + res.SignedBy + ", signature verified"
		}
		verdict := "verified"
		if !res.OK {
			verdict = "NOT verified"
		}
		fmt.Fprintf(env.Stdout, "batch %s: %s (summary %s; %d trial runs checked)\n", term(res.BatchID), verdict, signed, res.Trials)
	}
	if !res.OK {
		return exitError{ExitFailed}
	}
	return nil
}

// workerKeys loads the batch workers' public keys: the config's
// signing.worker_keys and the --worker-key files.
func workerKeys(cfg config.Config, flags []string) ([]attest.PublicKey, error) {
	keys, err := attest.LoadPublicKeys(append(append([]string{}, cfg.Signing.WorkerKeys...), flags...))
	if err != nil {
		return nil, usagef("worker key (--worker-key or the config's signing.worker_keys): %v", err)
	}
	return keys, nil
}

// adversaryTasks are the plan's tasks that have an adversary, once each.
func adversaryTasks(p batch.Plan) []string {
	var tasks []string
	seen := map[string]bool{}
	for _, t := range p.Trials {
		var spec struct {
			Adversary json.RawMessage `json:"adversary"`
		}
		if json.Unmarshal(t.TaskSpec, &spec) == nil && len(spec.Adversary) > 0 && string(spec.Adversary) != "null" && !seen[t.Task] {
			seen[t.Task] = true
			tasks = append(tasks, t.Task)
		}
	}
	return tasks
}
