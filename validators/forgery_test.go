package validators_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/store"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// readRecord and writeRecord edit a stage record and seal it again, as anyone
// who can write the runs directory can.
func readRecord(t *testing.T, runs string, n int) gates.Record {
	t.Helper()
	data, err := os.ReadFile(gates.RecordPath(harness.RecordsDir(runs), n))
	if err != nil {
		t.Fatal(err)
	}
	var r gates.Record
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func writeRecord(t *testing.T, runs string, n int, r gates.Record) {
	t.Helper()
	if sum, err := evidence.FileSHA256(filepath.Join(r.RunDir, evidence.ReportJSON)); err == nil {
		r.ReportSHA256 = sum
	}
	r.Seal()
	out, _ := json.MarshalIndent(r, "", "  ")
	p := gates.RecordPath(harness.RecordsDir(runs), n)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func recordCheck(runs string, set *schemas.Set, now time.Time) gates.RecordCheck {
	return gates.RecordCheck{Dir: harness.RecordsDir(runs), RunsDir: runs, MaxAge: 24 * time.Hour, Now: now,
		Validate: set.Validator(schemas.StageRecord), VerifyRun: validators.StageRunVerifier(set)}
}

// stage2Run runs stage 2 on the fake lane with a scenario, in runs.
func stage2Run(t *testing.T, runs string, set *schemas.Set, scenario string) *ctoharness.Report {
	t.Helper()
	exe, _ := os.Executable()
	env := map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "2", "PATH": os.Getenv("PATH")}
	rep, err := harness.Run(context.Background(), harness.Options{Stage: 2, Lane: ctoharness.LaneFake, RunsDir: runs,
		Schemas: set, SelfExe: exe, Scenario: scenario, Getenv: func(k string) string { return env[k] },
		VerifyRun: validators.StageRunVerifier(set),
		// What a forger has: the public keys (the gate opens on the genuine
		// stage 1 record), not the private one (the run is unsigned).
		Signing: attest.Keys{Trusted: testKeys.Trusted}})
	if rep == nil {
		t.Fatal(err)
	}
	return rep
}

func wantBlocked(t *testing.T, err error, code ctoharness.BlockerCode, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s opened the gate", what)
	}
	if b := ctoharness.AsBlocker(err, ctoharness.StepGate); b.Code != code {
		t.Fatalf("%s: blocked with %s (%s), want %s", what, b.Code, b.Message, code)
	}
}

// A stage record is a claim about a run; the gate checks the claim, not only
// the record's own digest, which anyone can recompute.
func TestForgedStageRecordsDoNotOpenTheGate(t *testing.T) {
	ctx := context.Background()
	passDir, set, runs := passRun(t)
	now := time.Now()
	genuine := readRecord(t, runs, 2)
	if _, err := recordCheck(runs, set, now).Verify(ctx, 2); err != nil {
		t.Fatalf("the genuine record is refused: %v", err)
	}
	restore := func() { writeRecord(t, runs, 2, genuine) }

	t.Run("names a blocked run", func(t *testing.T) {
		defer restore()
		rep := stage2Run(t, runs, set, "disallowed")
		if rep.Status == ctoharness.StatusPass {
			t.Fatal("the disallowed scenario passed")
		}
		r := genuine
		r.RunID, r.RunDir = rep.RunID, rep.RunArtifactDir
		writeRecord(t, runs, 2, r)
		_, err := recordCheck(runs, set, now).Verify(ctx, 2)
		wantBlocked(t, err, ctoharness.BlockPrevStageUnproven, "a record naming a blocked run")
	})
	t.Run("names a junk directory", func(t *testing.T) {
		defer restore()
		junk := filepath.Join(runs, "20260101T000000Z-s2-deadbeef")
		os.MkdirAll(junk, 0o755)
		os.WriteFile(filepath.Join(junk, evidence.ReportJSON), []byte("{\"junk\": true}\n"), 0o644)
		r := genuine
		r.RunID, r.RunDir = filepath.Base(junk), junk
		writeRecord(t, runs, 2, r)
		_, err := recordCheck(runs, set, now).Verify(ctx, 2)
		wantBlocked(t, err, ctoharness.BlockPrevStageUnproven, "a record naming a junk directory")
	})
	t.Run("names a run of another stage", func(t *testing.T) {
		defer restore()
		// The stage 2 pass run presented as stage 1 evidence.
		r := readRecord(t, runs, 1)
		r.RunID, r.RunDir = genuine.RunID, genuine.RunDir
		writeRecord(t, runs, 1, r)
		_, err := recordCheck(runs, set, now).Verify(ctx, 1)
		wantBlocked(t, err, ctoharness.BlockPrevStageUnproven, "a stage 1 record naming a stage 2 run")
	})
	t.Run("run id does not match the directory", func(t *testing.T) {
		defer restore()
		r := genuine
		r.RunID = "20260101T000000Z-s2-00000000"
		writeRecord(t, runs, 2, r)
		_, err := recordCheck(runs, set, now).Verify(ctx, 2)
		wantBlocked(t, err, ctoharness.BlockPrevStageUnproven, "a record whose run id is not its run's")
	})
	t.Run("named run no longer validates", func(t *testing.T) {
		defer restore()
		other := filepath.Join(t.TempDir(), "keep")
		copyTree(t, passDir, other)
		defer func() { os.RemoveAll(passDir); copyTree(t, other, passDir) }()
		os.Remove(filepath.Join(passDir, evidence.CleanEnd))
		_, err := recordCheck(runs, set, now).Verify(ctx, 2)
		wantBlocked(t, err, ctoharness.BlockPrevStageUnproven, "a record naming a run with missing evidence")
	})
	t.Run("copied into another runs directory", func(t *testing.T) {
		other := t.TempDir()
		writeRecord(t, other, 2, genuine)
		_, err := recordCheck(other, set, now).Verify(ctx, 2)
		wantBlocked(t, err, ctoharness.BlockPrevStageUnproven, "a record copied into another runs directory")
	})
	t.Run("run copied into another runs directory", func(t *testing.T) {
		other := t.TempDir()
		moved := filepath.Join(other, filepath.Base(passDir))
		copyTree(t, passDir, moved)
		r := genuine
		r.RunDir = moved
		r.RunsDir = other
		writeRecord(t, other, 2, r)
		_, err := recordCheck(other, set, now).Verify(ctx, 2)
		wantBlocked(t, err, ctoharness.BlockPrevStageUnproven, "a record naming a relocated run")
	})
	t.Run("no verifier", func(t *testing.T) {
		rc := recordCheck(runs, set, now)
		rc.VerifyRun = nil
		_, err := rc.Verify(ctx, 2)
		wantBlocked(t, err, ctoharness.BlockPrevStageUnproven, "a gate that cannot verify the named run")
	})
}

// An old record resealed with today's date still names an old run.
func TestResealedOldRecordIsStale(t *testing.T) {
	runs := t.TempDir()
	o, set := stageOpts(t, runs)
	past := time.Now().Add(-72 * time.Hour)
	o.Clock = func() time.Time { return past }
	if res := validators.Stage(context.Background(), 2, o); !res.OK {
		t.Fatal(res.Errors)
	}
	r := readRecord(t, runs, 2)
	r.ValidatedAt = time.Now().UTC()
	writeRecord(t, runs, 2, r)
	_, err := recordCheck(runs, set, time.Now()).Verify(context.Background(), 2)
	wantBlocked(t, err, ctoharness.BlockPrevStageStale, "an old record resealed with today's date")
}

// Stage 3 validation applies the same rule: a forged stage 2 record naming a
// blocked run makes validate-case-stage3 fail, not pass.
func TestStage3RefusesRecordNamingBlockedRun(t *testing.T) {
	_, set, runs := passRun(t)
	rep := stage2Run(t, runs, set, "disallowed")
	r := readRecord(t, runs, 2)
	r.RunID, r.RunDir = rep.RunID, rep.RunArtifactDir
	writeRecord(t, runs, 2, r)
	o, _ := stageOpts(t, runs)
	o.HarnessRoot = ".."
	res := validators.Stage(context.Background(), 3, o)
	if res.OK || len(res.Errors) == 0 || !strings.Contains(res.Errors[0], string(ctoharness.BlockPrevStageUnproven)) {
		t.Fatalf("stage 3 accepted a record naming a blocked run: %v", res.Errors)
	}
}

// The forgery of issue 20 with the default configuration: a consistent
// stage 2 pass run made without the signing key, and a record naming it,
// resealed. Every digest and claim checks out; validate-case-stage3 still
// refuses it, because no trusted key signed the record or the run.
func TestStage3RefusesResealedUnsignedRun(t *testing.T) {
	_, set, runs := passRun(t)
	rep := stage2Run(t, runs, set, "pass")
	if rep.Status != ctoharness.StatusPass || rep.Signed {
		t.Fatalf("the forger's run: %s signed=%v %v", rep.Status, rep.Signed, rep.Blockers)
	}
	r := readRecord(t, runs, 2)
	r.RunID, r.RunDir = rep.RunID, rep.RunArtifactDir
	writeRecord(t, runs, 2, r)
	if _, err := recordCheck(runs, set, time.Now()).Verify(context.Background(), 2); err != nil {
		t.Fatalf("the forged record must be consistent, or this test proves nothing: %v", err)
	}
	o, _ := stageOpts(t, runs)
	o.HarnessRoot = ".."
	res := validators.Stage(context.Background(), 3, o)
	if res.OK || len(res.Errors) == 0 || !strings.Contains(res.Errors[0], string(ctoharness.BlockStageRecordUntrusted)) {
		t.Fatalf("stage 3 accepted a resealed unsigned run: %v", res.Errors)
	}
	// No key at all (what "no trusted_keys configured" used to mean) is
	// no trust, not "anything goes".
	o.Signing, o.RequireSignature = attest.Keys{}, false
	res = validators.Stage(context.Background(), 3, o)
	if res.OK || len(res.Errors) == 0 || !strings.Contains(res.Errors[0], string(ctoharness.BlockStageRecordUntrusted)) {
		t.Fatalf("stage 3 without any key accepted a resealed unsigned run: %v", res.Errors)
	}
}

// A run directory copied elsewhere is not the run it claims to be.
func TestRelocatedRunDirectoryIsRefused(t *testing.T) {
	run, set, _ := passRun(t)
	// A run's store shares the base's history from the closures beside
	// it: they move with it.
	withClosures := func(dir string) {
		t.Helper()
		copyTree(t, filepath.Join(filepath.Dir(run), store.ClosuresDir), filepath.Join(filepath.Dir(dir), store.ClosuresDir))
	}
	moved := filepath.Join(t.TempDir(), filepath.Base(run))
	copyTree(t, run, moved)
	withClosures(moved)
	res := validators.Run(context.Background(), moved, set, validators.RunOptions{ExpectPass: true})
	if res.OK {
		t.Fatal("a relocated run directory validated")
	}
	found := false
	for _, f := range res.Errors {
		found = found || f.Check == "run_location"
	}
	if !found {
		t.Fatalf("run_location did not fire: %v", res.Errors)
	}
	// Declared as relocated (a batch coordinator's download) the same copy
	// validates; under another name it still does not.
	if res := validators.Run(context.Background(), moved, set, validators.RunOptions{ExpectPass: true, Relocated: true}); !res.OK {
		t.Fatalf("a relocated run declared as such did not validate: %v", res.Errors)
	}
	// Without its closure the store lacks the base's history: refused.
	alone := filepath.Join(t.TempDir(), filepath.Base(run))
	copyTree(t, run, alone)
	res = validators.Run(context.Background(), alone, set, validators.RunOptions{ExpectPass: true, Relocated: true})
	found = false
	for _, f := range res.Errors {
		found = found || f.Check == "fixture_objects"
	}
	if res.OK || !found {
		t.Fatalf("a run moved without its closure validated, or not on its store: %v", res.Errors)
	}
	renamed := filepath.Join(t.TempDir(), "another-name")
	copyTree(t, run, renamed)
	withClosures(renamed)
	if res := validators.Run(context.Background(), renamed, set, validators.RunOptions{ExpectPass: true, Relocated: true}); res.OK {
		t.Fatal("a relocated run under a name that is not its run id validated")
	}
}
