package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/progress"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/health"
	"github.com/cto-harness/cto-harness/validators"
)

// ValidateCmd is `cto-harness validate RUN_DIR`.
type ValidateCmd struct {
	RunDir           string `arg:"" name:"RUN_DIR" help:"A run directory (RUNS_DIR/<run_id>)." type:"path"`
	ExpectPass       bool   `name:"expect-pass" help:"Also require that the run passed."`
	AllowUnsigned    bool   `name:"allow-unsigned" help:"Accept an unsigned run, or one no trusted key verifies, reporting it as such (the default requires a trusted signature)."`
	RequireSignature bool   `name:"require-signature" help:"Require a trusted signature even when the config disables signing (without it, that is already the default)."`
	JSON             bool   `name:"json" help:"Print one JSON line: ok, status, checked, errors, signed, key_id, signature_ok."`
	Relocated        bool   `name:"relocated" help:"Accept a run directory moved from where it was made (a worker's run a batch coordinator downloaded); it must still be named after its run id. See docs/batch.md."`
}

// Help lists the checks.
func (ValidateCmd) Help() string {
	return fmt.Sprintf(`Checks: %v.
A run's attestation.dsse.json is checked first: every DSSE signature against the trusted keys (this
machine's signing key, the config's signing.trusted_keys and every --pubkey FILE), then every attested
file's sha256, then that the signed predicate describes this run. A run that is unsigned, or that no
trusted key verifies, is invalid unless --allow-unsigned is given (or the config sets
signing.disabled); it is then reported as "signed": false or "signature_ok": false.
A well-formed blocked run is valid; add --expect-pass to require a pass.
Exit status: 0 valid, 1 invalid, 2 bad input (no such run directory, an unreadable key).`, validators.CheckNames())
}

// Run executes the command.
func (c *ValidateCmd) Run(g *Globals, env *Env) error {
	set, cfg, _, err := g.setup(env)
	if err != nil {
		return err
	}
	if st, err := os.Stat(c.RunDir); err != nil || !st.IsDir() {
		return usagef("%s is not a run directory (it does not exist or is not a directory); pass RUNS_DIR/<run_id>, see 'cto-harness runs' or the runs directory", c.RunDir)
	}
	keys, err := g.keys(env, cfg, false)
	if err != nil {
		return err
	}
	res := validators.Run(env.Ctx, c.RunDir, set, validators.RunOptions{ExpectPass: c.ExpectPass, Trusted: keys.Trusted, Relocated: c.Relocated,
		RequireSignature: requireSignature(c.RequireSignature, c.AllowUnsigned, keys)})
	if c.JSON {
		_ = printJSON(env.Stdout, res)
	} else {
		if res.OK {
			fmt.Fprintf(env.Stdout, "valid: %s (status %s, %d checks)\n", term(c.RunDir), term(res.Status), len(res.Checked))
		}
		fmt.Fprintln(env.Stdout, term(verifiedLine(res.Signed, res.KeyID, res.SignatureOK)))
		for _, f := range res.Errors {
			fmt.Fprintf(env.Stdout, "invalid: %s\n", term(f))
		}
	}
	if !res.OK {
		if !c.JSON {
			fmt.Fprintf(env.Stderr, "cto-harness: %s is not valid evidence: %s\n", term(c.RunDir), term(res.Errors[0]))
		}
		return exitError{ExitFailed}
	}
	return nil
}

// ValidateStageCmd is `cto-harness validate-stage N`.
type ValidateStageCmd struct {
	Stage int `arg:"" name:"N" help:"Stage to validate (1-3)."`
	StageFlags
}

// StageFlags are the flags of a stage validation, shared by `validate-stage`
// and the validate-case-stage3 binary.
type StageFlags struct {
	HarnessRoot string `name:"harness-root" type:"path" placeholder:"DIR" help:"Directory holding docs/prd and docs/issues, which stage 3 requires (default: the copies built into this binary)."`
	JUnit       string `name:"junit" type:"path" placeholder:"FILE" help:"Also write a JUnit XML report, one testcase per check."`
	JSON        bool   `name:"json" help:"Print one JSON line: ok, checked, errors, pass_artifact_path, failure_artifact_paths, source_non_mutation_proof_path, health, signed, key_id, signature_ok."`

	AllowUnsigned    bool `name:"allow-unsigned" help:"Accept stage runs and records that no trusted key verifies (the default requires a trusted signature)."`
	RequireSignature bool `name:"require-signature" help:"Require trusted signatures even when the config disables signing (without it, that is already the default)."`
}

// requireSignature is the signature policy of a validation: required,
// unless --allow-unsigned or the config's signing.disabled says otherwise;
// --require-signature wins over both.
func requireSignature(require, allowUnsigned bool, keys attest.Keys) bool {
	return require || (!allowUnsigned && keys.Disabled == "")
}

// Help explains the stage validation.
func (ValidateStageCmd) Help() string { return stageHelp }

const stageHelp = `Runs the stage's pass route on the fake lane with embedded sample repositories, proves that missing
or wrong gates block before any Case process starts, validates all evidence, runs the health check, and
writes RUNS_DIR/validation/stage-N.json, which the next stage's gate requires. Earlier stages whose
records are missing are validated first. Stage 3 also replays the failure matrix under RUNS_DIR/matrix
and then removes the replays it supersedes (see 'runs prune'). On a terminal, stderr shows which part
runs, and which matrix row; --json stdout stays one line.
Every run and the record are signed (RUNS_DIR/validation/stage-N.dsse.json) with the machine key, created
on first use in $XDG_CONFIG_HOME/cto-harness (else ~/.config/cto-harness), or the key named by
signing.key_file or ` + attest.EnvSigningKeyFile + `. They must verify against a trusted key (the signing
key, signing.trusted_keys, --pubkey), and an unsigned or untrusted previous-stage record is refused,
unless --allow-unsigned (or the config's signing.disabled) is given.
Exit status: 0 ok, 1 not ok, 2 bad input.`

// Run executes the command.
func (c *ValidateStageCmd) Run(g *Globals, env *Env) error {
	return c.StageFlags.validate(g, env, c.Stage)
}

func (c *StageFlags) validate(g *Globals, env *Env, stage int) error {
	set, cfg, runs, err := g.setup(env)
	if err != nil {
		return err
	}
	if stage < 1 || stage > 6 {
		return usagef("stage %d is not on the ladder; stages are 1 to 6", stage)
	}
	keys, err := g.keys(env, cfg, true)
	if err != nil {
		return err
	}
	// On a terminal, stderr shows which part of the validation runs (the
	// matrix row by row); stdout keeps its one line either way.
	line := stageProgress(env)
	res := validators.Stage(env.Ctx, stage, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: env.Self,
		HostEnv: env.Getenv, Config: cfg, HarnessRoot: c.HarnessRoot, Signing: keys, RequireSignature: requireSignature(c.RequireSignature, c.AllowUnsigned, keys),
		Progress: line,
		Health: func(ctx context.Context) (any, bool) {
			h := health.Run(ctx, health.Options{RunsDir: runs, RecordsDir: harness.RecordsDir(runs), MaxAge: cfg.MaxAge(), Now: time.Now(), Schemas: set, SelfExe: env.Self, VerifyRun: validators.StageRunVerifier(set),
				Signing: keys})
			return h, h.OK
		}})
	line.Close()
	if c.JUnit != "" {
		if err := writeJUnit(c.JUnit, res); err != nil {
			return err
		}
	}
	pruned, pruneErr := pruneSuperseded(runs, res)
	if pruneErr != nil {
		fmt.Fprintf(env.Stderr, "cto-harness: %v\n", pruneErr)
	}
	if c.JSON {
		_ = printJSON(env.Stdout, res)
	} else {
		fmt.Fprintf(env.Stdout, "stage %d: ok=%v, %d checks\n", stage, res.OK, len(res.Checked))
		if res.PassArtifactPath != "" {
			fmt.Fprintf(env.Stdout, "pass evidence: %s\n", term(res.PassArtifactPath))
		}
		for name, p := range res.FailureArtifactPaths {
			fmt.Fprintf(env.Stdout, "failure evidence (%s): %s\n", term(name), term(p))
		}
		if res.RecordPath != "" {
			fmt.Fprintf(env.Stdout, "record: %s\n", term(res.RecordPath))
		}
		if note := supersededLine(pruned); note != "" {
			fmt.Fprintln(env.Stdout, note)
		}
		fmt.Fprintln(env.Stdout, term(verifiedLine(res.Signed, res.KeyID, res.SignatureOK)))
		for _, e := range res.Errors {
			fmt.Fprintf(env.Stdout, "error: %s\n", term(e))
		}
	}
	if !res.OK {
		return exitError{ExitFailed}
	}
	return nil
}

// stageProgress is the progress line of a stage validation: drawn on
// stderr when it is a terminal, nil (nothing drawn) otherwise.
func stageProgress(env *Env) *progress.Line {
	return progress.OnTerminal(env.Stderr, progress.IsTerminal(env.Stderr), time.Now, 250*time.Millisecond)
}

// pruneSuperseded removes the failure-matrix replays that the one res
// made supersedes (nothing when res replayed no matrix). A folder a record
// names, one kept on request and one in use stay (runlist.PruneMatrix).
func pruneSuperseded(runs string, res validators.StageResult) (runlist.MatrixPruned, error) {
	if !res.MatrixReplayed {
		return runlist.MatrixPruned{}, nil
	}
	p, err := runlist.PruneMatrix(runs, false)
	if err != nil {
		return p, fmt.Errorf("the earlier failure-matrix replays were not all removed: %w; the evidence is valid, remove them with 'cto-harness runs prune'", err)
	}
	return p, nil
}

// supersededLine says what pruneSuperseded removed, "" for nothing.
func supersededLine(p runlist.MatrixPruned) string {
	if len(p.Removed) == 0 {
		return ""
	}
	return fmt.Sprintf("earlier failure-matrix replays: removed %d folders (%s)", len(p.Removed), humanBytes(p.FreedBytes))
}

// HealthCmd is `cto-harness health`.
type HealthCmd struct {
	JSON bool `name:"json" help:"Print one compact JSON line."`
}

// Help says what health checks, signing included.
func (HealthCmd) Help() string {
	return `Checks the schemas, the runs directory (writable, free space), git, the sandbox, the stage records,
and signing: the signing key (the machine key, created on first use, or the configured one) signs
evidence that the trust set verifies; the trust set is listed with each key id and where it came from.
Signing off fails the check unless the config disables it on purpose (signing.disabled with
signing.disabled_reason). Exit status: 0 healthy, 1 not, 2 bad input.`
}

// Run executes the command.
func (c *HealthCmd) Run(g *Globals, env *Env) error {
	set, _ := compileSchemas() // a compile failure is reported as a failed check
	cfg, err := g.config(env, set)
	if err != nil {
		return err
	}
	runs, _ := filepath.Abs(g.runsDir(env))
	keys, kerr := g.keys(env, cfg, true)
	h := health.Run(env.Ctx, health.Options{RunsDir: runs, RecordsDir: harness.RecordsDir(runs), MaxAge: cfg.MaxAge(), Now: time.Now(), Schemas: set, SelfExe: env.Self, VerifyRun: validators.StageRunVerifier(set),
		Signing: keys, SigningErr: kerr})
	if c.JSON {
		_ = printJSON(env.Stdout, h)
	} else {
		for _, ch := range h.Checks {
			mark := "ok  "
			if !ch.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(env.Stdout, "%s %-22s %s\n", mark, ch.Name, ch.Detail)
		}
	}
	if !h.OK {
		return exitError{ExitFailed}
	}
	return nil
}

// VersionCmd is `cto-harness version`.
type VersionCmd struct{}

// Run executes the command.
func (VersionCmd) Run(env *Env) error {
	fmt.Fprintf(env.Stdout, "cto-harness %s (evidence schema %s)\n", ctoharness.Version, ctoharness.SchemaVersion)
	return nil
}
