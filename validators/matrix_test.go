package validators_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/validators"
)

func replayOpts(t *testing.T) validators.ReplayOptions {
	t.Helper()
	runs := t.TempDir()
	so, set := stageOpts(t, runs)
	if err := validators.EnsureStage2(context.Background(), so); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	return validators.ReplayOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: so.Signing}
}

// Breaking the allowed-path check on purpose turns the disallowed-file row red.
func TestBrokenAllowedCheckTurnsRowRed(t *testing.T) {
	o := replayOpts(t)
	o.Harness = func(h *harness.Options) { h.AllowedCheck = func(string) (bool, string) { return true, "" } }
	row, err := fixtures.Lookup("disallowed-file")
	if err != nil {
		t.Fatal(err)
	}
	res := validators.Replay(context.Background(), row, o)
	if res.OK {
		t.Fatal("the matrix did not notice a disabled allowed-path check")
	}
	if !strings.Contains(strings.Join(res.Errors, " "), "DISALLOWED_CHANGE") {
		t.Fatalf("errors do not name the missing blocker: %v", res.Errors)
	}
}

// A row whose failure does not happen (the mutating scenario replaced by the
// pass scenario) turns red: replay checks the expected blockers, not just "not pass".
func TestRowWithoutItsFailureTurnsRed(t *testing.T) {
	o := replayOpts(t)
	o.Harness = func(h *harness.Options) { h.Scenario = "pass" }
	row, err := fixtures.Lookup("source-mutated")
	if err != nil {
		t.Fatal(err)
	}
	if res := validators.Replay(context.Background(), row, o); res.OK {
		t.Fatal("a row whose expected failure did not happen still counted as failing closed")
	}
}

// Detection and enforcement each work on their own: with the sandbox switched
// off, the write to the source by absolute path is caught by the source proof.
func TestUnsandboxedSourceWriteIsDetected(t *testing.T) {
	o := replayOpts(t)
	o.Harness = func(h *harness.Options) { h.Unsandboxed = true }
	row, err := fixtures.Lookup("sandbox-write-source-abs")
	if err != nil {
		t.Fatal(err)
	}
	res := validators.Replay(context.Background(), row, o)
	if res.OK || !strings.Contains(strings.Join(res.ActualBlockers, " "), "SOURCE_MUTATED") {
		t.Fatalf("unsandboxed source write: blockers %v, errors %v", res.ActualBlockers, res.Errors)
	}
	if !res.EvidenceValid {
		t.Fatalf("the evidence of the caught run does not validate: %v", res.Errors)
	}
}

// The view rows' own checks fire when nothing stops the attack: with the
// sandbox switched off, each metadata change shows in the source's
// metadata, each read secret in the evidence, and the listing of /root is
// not denied.
func TestViewRowsTurnRedUnsandboxed(t *testing.T) {
	o := replayOpts(t)
	o.Harness = func(h *harness.Options) { h.Unsandboxed = true }
	cases := map[string]string{
		"sandbox-chmod-source":        "the source's README.md changed",
		"sandbox-touch-source":        "the source's README.md changed",
		"sandbox-setxattr-source":     "the source's README.md changed",
		"sandbox-chown-source":        "the source's README.md changed",
		"sandbox-read-home-secret":    "a planted secret reached the evidence",
		"sandbox-read-target-root":    "a planted secret reached the evidence",
		"sandbox-read-source":         "a planted secret reached the evidence",
		"sandbox-read-other-run":      "a planted secret reached the evidence",
		"sandbox-read-harness-config": "a planted secret reached the evidence",
		"sandbox-read-signing-key":    "a planted secret reached the evidence",
		"sandbox-list-root-home":      "NOT denied",
		// The separate git directory is part of the source: a write there
		// is a change to the source, a read of it a leak.
		"source-separate-git-dir-write": "the source gained",
		"source-separate-git-dir-read":  "NOT denied",
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			if (name == "sandbox-chown-source" || name == "sandbox-list-root-home") && os.Geteuid() != 0 {
				t.Skip("needs root: only root can chown, and /root is readable only by root")
			}
			row, err := fixtures.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			res := validators.Replay(context.Background(), row, o)
			if res.OK || !strings.Contains(strings.Join(res.Errors, " | "), want) {
				t.Fatalf("unsandboxed %s: ok=%v, errors %v; want one saying %q", name, res.OK, res.Errors, want)
			}
		})
	}
}

// The evidence a replay names outlasts the replay's clean-up and still
// validates, even for a row whose runs directory sits inside a directory
// the clean-up removes (beside the row's source).
func TestReplayedEvidenceOutlastsTheCleanUp(t *testing.T) {
	o := replayOpts(t)
	for _, name := range []string{"runs-dir-beside-source", "disallowed-file"} {
		t.Run(name, func(t *testing.T) {
			row, err := fixtures.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			res := validators.Replay(context.Background(), row, o)
			if !res.OK {
				t.Fatalf("row %s: %v", name, res.Errors)
			}
			if _, err := os.Stat(filepath.Join(res.RunDir, evidence.ReportJSON)); err != nil {
				t.Fatalf("the evidence the replay names is gone: %v", err)
			}
			v := validators.Run(context.Background(), res.RunDir, o.Schemas, validators.RunOptions{Trusted: o.Signing.Trusted, RequireSignature: true})
			if !v.OK {
				t.Fatalf("the evidence the replay names no longer validates: %v", v.Errors)
			}
		})
	}
}
