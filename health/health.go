// Package health answers "can this machine produce valid evidence right now?"
// as one compact JSON object, for monitoring and for the stage validators.
package health

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/schemas"
)

// Check is one health check.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Report is the health answer.
type Report struct {
	OK      bool          `json:"ok"`
	Version string        `json:"harness_version"`
	Checks  []Check       `json:"checks"`
	Sandbox sandbox.Facts `json:"sandbox"`
	Signing SigningFacts  `json:"signing"`
}

// Options say where to look.
type Options struct {
	RunsDir    string
	RecordsDir string
	MaxAge     time.Duration
	Now        time.Time
	Schemas    *schemas.Set // nil: compile them here (and report failure)
	// RequireRecords makes a missing stage record a failed check.
	RequireRecords bool
	// SelfExe is the harness binary, started once as the sandbox launcher to
	// prove the sandbox can be established ("" skips that trial).
	SelfExe string
	// VerifyRun validates the run a stage record names (see gates.RecordCheck).
	VerifyRun func(ctx context.Context, runDir string) (ctoharness.Report, error)
	// Signing is what the command loaded (signer, trust set and where each
	// key came from); SigningErr is why it could not load it.
	Signing    attest.Keys
	SigningErr error
}

// Run performs every check.
func Run(ctx context.Context, o Options) Report {
	rep := Report{OK: true, Version: ctoharness.Version}
	add := func(name string, err error, detail string) {
		c := Check{Name: name, OK: err == nil, Detail: detail}
		if err != nil {
			c.Detail = err.Error()
			rep.OK = false
		}
		rep.Checks = append(rep.Checks, c)
	}
	set := o.Schemas
	if set == nil {
		var err error
		set, err = schemas.Compile()
		add("schemas_compile", err, fmt.Sprintf("%d schemas", len(schemas.Kinds())))
	} else {
		add("schemas_compile", nil, fmt.Sprintf("%d schemas", len(schemas.Kinds())))
	}
	add("runs_dir_writable", writable(o.RunsDir), o.RunsDir)
	free, err := freeBytes(o.RunsDir)
	add("runs_dir_free_space", err, fmt.Sprintf("%d MiB free", free>>20))
	if err == nil && free < 100<<20 {
		rep.Checks[len(rep.Checks)-1].OK = false
		rep.Checks[len(rep.Checks)-1].Detail = fmt.Sprintf("only %d MiB free in %s; at least 100 MiB are needed", free>>20, o.RunsDir)
		rep.OK = false
	}
	gitPath, err := exec.LookPath("git")
	add("git_available", err, gitPath)
	if o.SelfExe != "" {
		rep.Sandbox = sandbox.ProbeWith(o.SelfExe)
	} else {
		rep.Sandbox = sandbox.Probe()
	}
	var sbErr error
	if !rep.Sandbox.Available() {
		sbErr = fmt.Errorf("the sandbox cannot be established: %s", rep.Sandbox.Reason)
	}
	add("sandbox", sbErr, fmt.Sprintf("landlock ABI %d; network, PID and mount namespaces; no_new_privs", rep.Sandbox.LandlockABI))
	sf, sdetail, serr := signing(ctx, o)
	rep.Signing = sf
	add("signing_key", serr, sdetail)
	if set != nil {
		rc := gates.RecordCheck{Dir: o.RecordsDir, RunsDir: o.RunsDir, MaxAge: o.MaxAge, Now: o.Now,
			Validate: set.Validator(schemas.StageRecord), VerifyRun: o.VerifyRun}
		for _, st := range gates.Ladder() {
			if !st.Approved {
				continue
			}
			name := fmt.Sprintf("stage_%d_record", st.N)
			rec, err := rc.Verify(ctx, st.N)
			if err == nil {
				err = gates.CheckRecordTrust(ctx, o.RecordsDir, &rec, o.Signing)
			}
			switch {
			case err == nil:
				add(name, nil, fmt.Sprintf("valid, run %s, validated %s", rec.RunID, rec.ValidatedAt.Format(time.RFC3339)))
			case !o.RequireRecords && ctoharness.AsBlocker(err, ctoharness.StepGate).Code == ctoharness.BlockPrevStageMissing:
				rep.Checks = append(rep.Checks, Check{Name: name, OK: true, Detail: "absent (not required)"})
			default:
				add(name, err, "")
			}
		}
	}
	return rep
}

func writable(dir string) error {
	if dir == "" {
		return errors.New("no runs directory configured")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".health-*")
	if err != nil {
		return fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(filepath.Clean(name))
}

func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
