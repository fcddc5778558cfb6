package harness_test

import (
	"context"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// A setup that fails says why in its blocker, not only "exit status 1":
// jshttp/cookie's `npm ci` stopped on a tarball the registry answered 404
// for, and the one-line blocker named neither the package nor the 404.
func TestSetupFailureNamesItsError(t *testing.T) {
	requireSandbox(t)
	src := recipeRepo(t, map[string]string{
		"setup.sh": `echo "npm warn deprecated glob@10.5.0: old" >&2
echo "npm error code E404" >&2
echo "npm error 404 Not Found - GET https://registry.invalid/top-sites/-/top-sites-1.1.225.tgz" >&2
echo "npm error 404" >&2
exit 1
`,
		"docs/README.md": "notes\n",
	})
	set := compile(t)
	o, _ := sharedStage3(t, set)
	o.Source = src
	o.Config = config.Config{OwnedSources: []string{src}}
	s, err := task.Parse([]byte(`{"task": "Add a note under docs.", "allowed_paths": ["docs/**"],
  "setup": {"command": "sh setup.sh", "timeout_seconds": 60},
  "verification": {"command": "true", "timeout_seconds": 60}, "case_timeout_seconds": 60}`), "setup", set.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatal(err)
	}
	o.Spec = &s
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var msg string
	for _, b := range rep.Blockers {
		if b.Code == ctoharness.BlockSetupFailed {
			msg = b.Message
		}
	}
	if msg == "" {
		t.Fatalf("no SETUP_FAILED blocker: %v", rep.Blockers)
	}
	for _, want := range []string{"npm error code E404", "404 Not Found - GET https://registry.invalid/top-sites/-/top-sites-1.1.225.tgz"} {
		if !strings.Contains(msg, want) {
			t.Errorf("SETUP_FAILED says %q, want it to name %q", msg, want)
		}
	}
	if strings.Contains(msg, "deprecated") || strings.Contains(msg, "\n") {
		t.Errorf("SETUP_FAILED should be one line of errors, not warnings: %q", msg)
	}
	mustValidate(t, set, rep, false)
}
