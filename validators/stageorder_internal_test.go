package validators

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/schemas"
)

// Stage 3's validation orders its pass run after the stage 2 record by what
// the run's evidence names, not by two processes' wall clocks: a clock that
// stepped back 5 s between 'validate-stage 2' (record at T) and the stage 3
// run (started at T-5s) leaves an honest validation valid. A record written
// after the run (stage 2 validated again) is still refused: the run's gate
// trusted another one.
func TestStage3OrderSurvivesAClockStepBack(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := attest.Ephemeral()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	runs := t.TempDir()
	T := time.Now()
	clockFrom := func(at time.Time) func() time.Time {
		start := time.Now()
		return func() time.Time { return at.Add(time.Since(start)) }
	}
	opts := func(clock func() time.Time) StageOptions {
		return StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys, RequireSignature: true, Clock: clock}
	}
	ctx := context.Background()
	if err := EnsureStage2(ctx, opts(clockFrom(T))); err != nil {
		t.Fatal(err)
	}
	st, err := gates.Lookup(3)
	if err != nil {
		t.Fatal(err)
	}
	s := &stageRun{o: opts(clockFrom(T.Add(-5 * time.Second))), res: &StageResult{FailureArtifactPaths: map[string]string{}}}
	rep := s.passRoute(ctx, st)
	if rep == nil {
		t.Fatalf("the stage 3 pass run: %v", s.res.Errors)
	}
	if !rep.Freshness.StartedAt.Before(T) {
		t.Fatalf("the stage 3 run started at %v, want before the record's %v", rep.Freshness.StartedAt, T)
	}
	s.compareWithStage2(rep)
	if len(s.res.Errors) > 0 {
		t.Fatalf("an honest stage 3 run after a clock step back fails: %v", s.res.Errors)
	}

	// Stage 2 validated again after the run: its new record is not the one
	// the run's gate trusted.
	if err := os.Remove(gates.RecordPath(harness.RecordsDir(runs), 2)); err != nil {
		t.Fatal(err)
	}
	if err := EnsureStage2(ctx, opts(clockFrom(T.Add(-10*time.Second)))); err != nil {
		t.Fatal(err)
	}
	s.res.Errors = nil
	s.compareWithStage2(rep)
	if !strings.Contains(strings.Join(s.res.Errors, " "), "stage2_expectations") {
		t.Fatalf("a stage 3 run made before its stage 2 record passed: %v", s.res.Errors)
	}
	t.Logf("refused: %v", s.res.Errors)
}
