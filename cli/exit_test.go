package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cto-harness/cto-harness/cli"
)

// One rule for exit codes, applied to every command: 2 for bad input (nothing
// was run or checked), 1 for a run that was blocked or failed or evidence that
// is invalid, 0 for success.
func TestExitCodeRule(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	notRun := filepath.Join(dir, "plain")
	os.MkdirAll(notRun, 0o755)
	cfgHome := filepath.Join(dir, "config") // where the machine signing key is created
	env := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return cfgHome
		}
		return ""
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"run", "--stage", "9"}, cli.ExitUsage},
		{[]string{"run", "--stage", "1", "--profile", "bogus"}, cli.ExitUsage},
		{[]string{"run", "--stage", "1", "--task", filepath.Join(dir, "absent.json")}, cli.ExitUsage},
		{[]string{"validate", filepath.Join(dir, "absent")}, cli.ExitUsage},
		{[]string{"validate", filepath.Join(dir, "absent"), "--json"}, cli.ExitUsage},
		{[]string{"validate-stage", "7"}, cli.ExitUsage},
		{[]string{"fixtures", "replay", "no-such-row"}, cli.ExitUsage},
		{[]string{"no-such-command"}, cli.ExitUsage},
		{[]string{"show", filepath.Join(dir, "absent")}, cli.ExitUsage},
		{[]string{"show", notRun}, cli.ExitUsage},
		{[]string{"runs", "--status", "bogus"}, cli.ExitUsage},
		{[]string{"runs", "prune"}, cli.ExitUsage},
		{[]string{"runs", "--runs-dir", filepath.Join(dir, "absent")}, cli.ExitUsage},
		{[]string{"validate", notRun}, cli.ExitFailed},
		{[]string{"run", "--stage", "4"}, cli.ExitFailed},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"--runs-dir", runs}, tc.args...)
		if got := cli.Main(context.Background(), args, &out, &errOut, env); got != tc.want {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, got, tc.want, errOut.String())
		}
	}
}
