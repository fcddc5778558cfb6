package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/batch/natsexec"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// newCoordinator connects the batch to NATS; its log goes to stderr.
func newCoordinator(env *Env, set *schemas.Set, st batch.Store, plan batch.Plan, workers []attest.PublicKey, signer *attest.Signer, url string, auth natsexec.Auth, ackWait time.Duration) (*natsexec.Coordinator, error) {
	co, err := natsexec.NewCoordinator(env.Ctx, natsexec.CoordinatorOptions{URL: url, Auth: auth, Store: st, BatchID: plan.BatchID, Schemas: set,
		Workers: workers, Signer: signer, AckWait: ackWait, Log: termWriter{env.Stderr}})
	if err != nil {
		return nil, usageError{err}
	}
	return co, nil
}

// remoteVerifier re-validates, on resume, a run a worker made: relocated,
// and signed by one of the worker keys.
func remoteVerifier(set *schemas.Set, workers []attest.PublicKey) batch.Verifier {
	return func(ctx context.Context, t batch.Trial, a batch.Attempt) []string {
		if a.Worker == "local" {
			return []string{"the run was made locally, not by a worker; run the batch without --nats to resume it"}
		}
		return boundTo(t, a, batch.DescribeWith(ctx, a.RunDir, set, validators.RunOptions{Trusted: workers, RequireSignature: true, Relocated: true}))
	}
}

// boundTo is what is wrong with a recorded attempt read again (d): its
// evidence errors, and a run no longer bound to the trial attempt and
// request nonce the record names.
func boundTo(t batch.Trial, a, d batch.Attempt) []string {
	errs := d.EvidenceErrors
	if why := batch.CheckBinding(t, a.N, a.Nonce, d.Binding); why != "" {
		errs = append(errs, why)
	}
	return errs
}

// maxSlots is the most trials at once a worker takes (the config schema's
// bound on worker.slots too).
const maxSlots = 1024

// WorkerCmd is `cto-harness worker`.
type WorkerCmd struct {
	NATS            string        `name:"nats" required:"" help:"The NATS JetStream server to take trials from." placeholder:"URL"`
	CoordinatorKeys []string      `name:"coordinator-key" sep:"none" type:"path" placeholder:"FILE" help:"A coordinator's public key (PEM), besides the config's signing.coordinator_keys: only requests it signed are run; repeatable."`
	AckWait         time.Duration `name:"ack-wait" default:"2m" help:"Used only when the server does not say (the coordinator sets the workers' consumer's ack wait): how long a silent worker keeps a trial."`
	Slots           int           `name:"slots" placeholder:"N" help:"Trials this worker runs at once (default: the config's worker.slots, else 8, bounded by memory at 768 MiB a trial). Trials that wait on a hosted model are bounded by its quota, not by the cores: see docs/batch.md."`
	NATSAuth        natsAuthFlags `embed:""`
}

// Help explains a worker.
func (WorkerCmd) Help() string {
	return `Takes batch trials published by 'cto-harness batch run SPEC --nats URL', up to --slots at once (it
fetches only while a slot is free), runs each as a stage-3 run in this machine's runs directory, signs
it with this machine's key, and uploads the run directory (without the fixture copy) to the JetStream
object store. While a trial runs the worker sends in-progress acks; if it dies, the trial goes to
another worker after the ack wait.

A request runs only when a coordinator key this worker lists signed it and it has not expired; anything
else is dropped, logged and never run. The worker's own config decides what a request cannot: every
allowlist a request names must lie inside the config's network lists, and a coding agent's base URL and
key variable come from the config's worker.agents, never from the request; a request asking for more is
refused, with its reason in the result.

Needs: a signing key (CTO_HARNESS_SIGNING_KEY_FILE or the config's signing.key_file) whose public key the
coordinator lists (its config's signing.worker_keys, or --worker-key); the coordinator's public key
(signing.coordinator_keys in this machine's config, or --coordinator-key); the stage gates CTO_HARNESS_ALLOW_CASE=1 and CTO_HARNESS_CASE_STAGE=3;
the batch's sources at the same paths as on the coordinator, owned in this machine's config; on a server
with authentication, this worker's NATS nkey (--nats-nkey; 'cto-harness batch nats-users' makes them). Stages 1 and
2 are validated in the runs directory before the first trial is taken. SIGINT or SIGTERM hands every
running trial back and stops. See docs/batch.md.`
}

// Run executes the command.
func (c *WorkerCmd) Run(g *Globals, env *Env) error {
	if c.Slots < 0 || c.Slots > maxSlots {
		return usagef("--slots %d: give the trials this worker runs at once, 1 to %d (without it, the config's worker.slots or the default)", c.Slots, maxSlots)
	}
	set, cfg, runs, err := g.setup(env)
	if err != nil {
		return err
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	if keys.Signer == nil {
		return usagef("a worker signs every run, and signing is disabled in the config: remove signing.disabled (the machine key is then used), or configure a key (%s or signing.key_file; make one with 'cto-harness keygen')", attest.EnvSigningKeyFile)
	}
	coordinators, err := attest.LoadPublicKeys(append(append([]string{}, cfg.Signing.CoordinatorKeys...), c.CoordinatorKeys...))
	if err != nil {
		return usagef("coordinator key (--coordinator-key or the config's signing.coordinator_keys): %v", err)
	}
	if len(coordinators) == 0 {
		return usagef("a worker runs only trial requests its coordinator signed: give the coordinator's public key with --coordinator-key FILE, or list it in the config's signing.coordinator_keys")
	}
	if err := checkStageGates(env); err != nil {
		return err
	}
	if err := validators.EnsureStage2(env.Ctx, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: env.Self, HostEnv: env.Getenv,
		Config: cfg, Signing: keys}); err != nil {
		return fmt.Errorf("a worker runs stage-3 trials, which need stages 1 and 2 validated in %s: %w", runs, err)
	}
	asked := c.Slots
	if asked == 0 && cfg.Worker != nil {
		asked = cfg.Worker.Slots
	}
	slots, why := natsexec.SlotsFor(asked)
	if why != "" {
		fmt.Fprintf(env.Stderr, "worker: %s\n", why)
	}
	fmt.Fprintf(env.Stdout, "worker: key %s, runs directory %s, %d trials at once\n", keys.Signer.Public().ID, runs, slots)
	w := natsexec.Worker{URL: c.NATS, Auth: c.NATSAuth.auth(), AckWait: c.AckWait, Log: termWriter{env.Stderr}, Coordinators: coordinators, Slots: slots,
		Local: batch.Local{Base: harness.Options{RunsDir: runs, Config: cfg, Getenv: env.Getenv, SelfExe: env.Self, Schemas: set,
			VerifyRun: validators.RememberStageRuns(validators.StageRunVerifier(set)), Signing: keys, SandboxProbe: sandbox.Reuse(env.Self), ViewTrials: sandbox.NewTrials()}}}
	if err := w.Run(env.Ctx); err != nil {
		return usageError{err}
	}
	return nil
}

// termWriter escapes what a log line quotes (worker key ids, reasons naming
// files from a worker's run) so that no line can repaint the terminal.
type termWriter struct{ w io.Writer }

func (t termWriter) Write(p []byte) (int, error) {
	lines := strings.Split(strings.TrimSuffix(string(p), "\n"), "\n")
	for i, l := range lines {
		lines[i] = display.Terminal(l)
	}
	if _, err := io.WriteString(t.w, strings.Join(lines, "\n")+"\n"); err != nil {
		return 0, err
	}
	return len(p), nil
}
