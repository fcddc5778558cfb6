package runsink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runsink"
)

type mask struct{}

func (mask) Data(v any) any { return v }
func (mask) String(s string) string {
	return strings.ReplaceAll(s, "sk-secret", "[REDACTED]")
}

func newSink(t *testing.T, stopped func() error) *runsink.Sink {
	t.Helper()
	rep := &ctoharness.Report{Blockers: []ctoharness.Blocker{}}
	return runsink.New("run-1", "n", nil, evidence.NewTrace("run-1"), rep, time.Now, stopped)
}

func TestBlockOnceAndRedacted(t *testing.T) {
	s := newSink(t, nil)
	s.SetRedactor(mask{})
	b := ctoharness.Blocker{Code: ctoharness.BlockTestsFailed, Step: ctoharness.StepVerify, Message: "key sk-secret in output"}
	s.Block(b)
	s.Block(b)
	if len(s.Report.Blockers) != 1 || s.OK() {
		t.Fatalf("blockers %v: want one", s.Report.Blockers)
	}
	if m := s.Report.Blockers[0].Message; strings.Contains(m, "sk-secret") || !strings.Contains(m, "[REDACTED]") {
		t.Fatalf("message %q: the key is not redacted", m)
	}
}

func TestCancelledStepIsInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := newSink(t, runsink.StopCause(ctx))
	s.SetStep(ctoharness.StepCase)
	if s.Interrupted() {
		t.Fatal("interrupted before the cancellation")
	}
	cancel(errors.New("SIGTERM"))
	s.BlockErr(fmt.Errorf("case: %w", context.Canceled), ctoharness.StepCase)
	s.BlockErr(fmt.Errorf("again: %w", context.Canceled), ctoharness.StepCase)
	if len(s.Report.Blockers) != 1 {
		t.Fatalf("blockers %v: want one INTERRUPTED", s.Report.Blockers)
	}
	b := s.Report.Blockers[0]
	if b.Code != ctoharness.BlockInterrupted || b.Step != ctoharness.StepCase || !strings.Contains(b.Message, "SIGTERM") || !strings.Contains(b.Message, "nothing had been copied") {
		t.Fatalf("blocker %+v", b)
	}
	s2 := newSink(t, runsink.StopCause(ctx))
	s2.SourceProven()
	s2.Interrupted()
	if !strings.Contains(s2.Report.Blockers[0].Message, "proofs were still taken") {
		t.Fatalf("after the source proof: %q", s2.Report.Blockers[0].Message)
	}
}

func TestFullDiskIsAWriteFailure(t *testing.T) {
	s := newSink(t, nil)
	s.BlockErr(fmt.Errorf("copy: %w", syscall.ENOSPC), ctoharness.StepCopy)
	s.BlockWrite(errors.New("report: short write"), ctoharness.StepReport)
	writes := 0
	for _, b := range s.Report.Blockers {
		if b.Code == ctoharness.BlockArtifactWriteFailed {
			writes++
		}
	}
	if !s.DiskFull() || writes != 1 || s.Report.Blockers[0].Code != ctoharness.BlockArtifactWriteFailed {
		t.Fatalf("disk full %v, blockers %v: want ARTIFACT_WRITE_FAILED first, once", s.DiskFull(), s.Report.Blockers)
	}
	if !runsink.NoSpace(errors.New("write x: "+syscall.EDQUOT.Error())) || runsink.NoSpace(errors.New("permission denied")) {
		t.Fatal("NoSpace misreads a message")
	}
	other := newSink(t, nil)
	other.BlockErr(ctoharness.Block(ctoharness.BlockInternal, ctoharness.StepCopy, errors.New("x"), "broke"), ctoharness.StepCopy)
	if other.DiskFull() || !other.Has(ctoharness.BlockInternal) {
		t.Fatalf("blockers %v", other.Report.Blockers)
	}
}
