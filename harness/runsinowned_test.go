package harness_test

import (
	"context"
	"path/filepath"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// The runs directory may lie inside an owned root (owned_sources names
// ~/src, and the harness runs from ~/src/cto-harness with ./runs). The
// hosts file the harness binds at /etc/hosts for a command with an
// allowlist is in the run's own workspace there, and the evidence must
// still validate: a setup that failed made valid evidence invalid
// ("… egress/hosts-setup from inside … is bound at /etc/hosts").
func TestRunsDirInsideOwnedRootValidates(t *testing.T) {
	requireSandbox(t)
	src := recipeRepo(t, map[string]string{"docs/README.md": "notes\n"})
	set := compile(t)
	o, _ := stage3(t, set)
	o.Source = src
	owned := filepath.Dir(filepath.Dir(filepath.Dir(src))) // holds the source and, in the test's temp dir, the runs dir
	if rel, err := filepath.Rel(owned, o.RunsDir); err != nil || rel == ".." || filepath.IsAbs(rel) || rel[:2] == ".." {
		t.Fatalf("the runs dir %s is not inside %s", o.RunsDir, owned)
	}
	o.Config = config.Config{OwnedSources: []string{owned}, Network: &config.NetworkAllow{SetupAllow: []string{"127.0.0.1:9"}}}
	s, err := task.Parse([]byte(`{"task": "Add a note under docs.", "allowed_paths": ["docs/**"],
  "setup": {"command": "echo install error: nothing to install >&2; exit 1", "timeout_seconds": 60},
  "verification": {"command": "true", "timeout_seconds": 60}, "case_timeout_seconds": 60}`), "setup", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	o.Spec = &s
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Blockers) != 1 || rep.Blockers[0].Code != ctoharness.BlockSetupFailed {
		t.Fatalf("blockers %v, want SETUP_FAILED alone", rep.Blockers)
	}
	mustValidate(t, set, rep, false)
}
