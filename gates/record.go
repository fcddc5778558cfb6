package gates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Record is a stage validation record: written by a stage's validator after
// it validated a run, and required by the next stage's gate.
type Record struct {
	SchemaVersion  string    `json:"schema_version"`
	Stage          int       `json:"stage"`
	RunID          string    `json:"run_id"`
	RunDir         string    `json:"run_dir"`
	RunsDir        string    `json:"runs_dir"`
	ReportSHA256   string    `json:"report_sha256"`
	ValidatedAt    time.Time `json:"validated_at"`
	HarnessVersion string    `json:"harness_version"`
	Checked        []string  `json:"checked"`
	RecordDigest   string    `json:"record_digest"`
	// VerifiedBy is the id of the trusted key whose signature over this
	// record the gate verified ("" when not verified). Never written: the
	// signature is the proof, this only carries the gate's finding on.
	VerifiedBy string `json:"-"`
}

// RecordPath is where stage n's record lives inside the records directory.
func RecordPath(dir string, n int) string {
	return filepath.Join(dir, fmt.Sprintf("stage-%d.json", n))
}

// Digest is the sha256 of the record's canonical JSON with RecordDigest empty.
func (r Record) Digest() string {
	r.RecordDigest = ""
	b, _ := json.Marshal(r) // a struct of plain fields always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Seal fills RecordDigest.
func (r *Record) Seal() { r.RecordDigest = r.Digest() }

// RecordCheck verifies a previous stage's record. Validate checks the record
// bytes against the stage-record schema.
type RecordCheck struct {
	Dir      string
	MaxAge   time.Duration
	Now      time.Time
	Validate func([]byte) error
	// RunsDir is the runs directory the record's run must live in (directly,
	// under its run id).
	RunsDir string
	// ConfigFile is the harness config in use ("" when none); with RunsDir
	// it makes the validate-stage command a refusal asks for one to paste.
	ConfigFile string
	// VerifyRun validates the named run directory now and returns its report.
	// It is injected because the validators depend on this package; a nil
	// VerifyRun fails closed.
	VerifyRun func(ctx context.Context, runDir string) (ctoharness.Report, error)
}

// Rerun is the command that validates stage n again in this runs directory
// with this config, ready to paste.
func (rc RecordCheck) Rerun(n int) string {
	return StageCommand(rc.RunsDir, rc.ConfigFile, n)
}

// StageCommand is 'cto-harness [--runs-dir DIR] [--config FILE]
// validate-stage N', each path quoted for a POSIX shell when it needs it.
func StageCommand(runsDir, configFile string, n int) string {
	cmd := "cto-harness"
	if runsDir != "" {
		if abs, err := filepath.Abs(runsDir); err == nil {
			runsDir = abs
		}
		cmd += " --runs-dir " + shellQuote(runsDir)
	}
	if configFile != "" {
		cmd += " --config " + shellQuote(configFile)
	}
	return fmt.Sprintf("%s validate-stage %d", cmd, n)
}

// shellQuote leaves a plain path as it is and single-quotes any other.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return `'` + strings.ReplaceAll(s, `'`, `'\''`) + `'`
}

// Verify loads and checks stage n's record: schema-valid, digest intact, same
// schema version, the report it names unchanged, and not older than MaxAge.
func (rc RecordCheck) Verify(ctx context.Context, n int) (Record, error) {
	p := RecordPath(rc.Dir, n)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, ctoharness.Block(ctoharness.BlockPrevStageMissing, ctoharness.StepGate, nil,
			"no stage %d validation record at %s; run '%s' first", n, p, rc.Rerun(n))
	}
	if err != nil {
		return Record{}, ctoharness.Block(ctoharness.BlockPrevStageMissing, ctoharness.StepGate, err,
			"cannot read stage %d validation record %s", n, p)
	}
	if err := rc.Validate(data); err != nil {
		return Record{}, ctoharness.Block(ctoharness.BlockPrevStageInvalid, ctoharness.StepGate, err,
			"stage %d validation record %s does not match its schema; re-run '%s'", n, p, rc.Rerun(n))
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, ctoharness.Block(ctoharness.BlockPrevStageInvalid, ctoharness.StepGate, err,
			"stage %d validation record %s is malformed", n, p)
	}
	if r.SchemaVersion != ctoharness.SchemaVersion {
		return r, ctoharness.Block(ctoharness.BlockPrevStageSchema, ctoharness.StepGate, nil,
			"stage %d validation record %s has schema version %s, this harness writes %s; re-run '%s'",
			n, p, r.SchemaVersion, ctoharness.SchemaVersion, rc.Rerun(n))
	}
	if r.Stage != n {
		return r, ctoharness.Block(ctoharness.BlockPrevStageTampered, ctoharness.StepGate, nil,
			"validation record %s claims stage %d, expected %d", p, r.Stage, n)
	}
	if got := r.Digest(); got != r.RecordDigest {
		return r, ctoharness.Block(ctoharness.BlockPrevStageTampered, ctoharness.StepGate, nil,
			"stage %d validation record %s was changed after it was written (digest %s, recorded %s); re-run '%s'",
			n, p, got, r.RecordDigest, rc.Rerun(n))
	}
	rep, err := os.ReadFile(filepath.Join(r.RunDir, "report.json"))
	if err != nil {
		return r, ctoharness.Block(ctoharness.BlockPrevStageMissing, ctoharness.StepGate, err,
			"stage %d validation record names run %s whose report.json cannot be read", n, r.RunDir)
	}
	sum := sha256.Sum256(rep)
	if hex.EncodeToString(sum[:]) != r.ReportSHA256 {
		return r, ctoharness.Block(ctoharness.BlockPrevStageTampered, ctoharness.StepGate, nil,
			"the stage %d report %s/report.json no longer matches the digest in its validation record", n, r.RunDir)
	}
	if age := rc.Now.Sub(r.ValidatedAt); age > rc.MaxAge || age < -time.Minute {
		return r, ctoharness.Block(ctoharness.BlockPrevStageStale, ctoharness.StepGate, nil,
			"stage %d validation record %s is %s old (max %s); re-run '%s'",
			n, p, age.Round(time.Second), rc.MaxAge, rc.Rerun(n))
	}
	if err := rc.verifyClaim(ctx, n, p, r); err != nil {
		return r, err
	}
	return r, nil
}
