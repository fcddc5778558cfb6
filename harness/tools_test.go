package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
)

// A toolchain in a home directory is invisible to the verification until
// the config declares it: undeclared, its program does not resolve and the
// run is TEST_NOT_RUN naming it; declared, the program runs with its
// variables, the configured variables arrive, and the credentials file
// next to it stays hidden.
func TestToolchainsAndEnv(t *testing.T) {
	requireSandbox(t)
	set := compile(t)
	o, _ := sharedStage3(t, set)
	home := filepath.Join(t.TempDir(), "home")
	tool := filepath.Join(home, ".faketool")
	if err := os.MkdirAll(filepath.Join(tool, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ntest \"$FAKETOOL_HOME\" = " + tool + " && echo faketool ran\n"
	if err := os.WriteFile(filepath.Join(tool, "bin", "faketool"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tool, "credentials.toml"), []byte("token = \"secret\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := o.Getenv
	o.Getenv = func(k string) string {
		switch k {
		case "HOME":
			return home
		case "HOST_ONLY_VAR":
			return "from the host"
		}
		return getenv(k)
	}
	spec := *o.Spec
	spec.Verification.Command = `faketool && test "$MY_VAR" = hello && test "$HOST_ONLY_VAR" = "from the host" && test ! -s "$FAKETOOL_HOME/credentials.toml" && sh scripts/check.sh`
	o.Spec = &spec

	t.Run("undeclared", func(t *testing.T) {
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if !hasCode(rep, ctoharness.BlockTestNotRun) || hasCode(rep, ctoharness.BlockTestsFailed) {
			t.Fatalf("blockers %v, want TEST_NOT_RUN only", rep.Blockers)
		}
		if !strings.Contains(rep.Tests.Reason, "program not found in the sandbox") || !strings.Contains(rep.Tests.Reason, "faketool") || rep.Tests.Reruns != 0 {
			t.Fatalf("tests reason %q, reruns %d", rep.Tests.Reason, rep.Tests.Reruns)
		}
		mustValidate(t, set, rep, false)
	})

	hello := "hello"
	o.Config.Toolchains = []config.Toolchain{{Name: "faketool", Paths: []string{tool}, Path: []string{filepath.Join(tool, "bin")},
		Env: map[string]string{"FAKETOOL_HOME": tool}}}
	o.Config.Env = []config.EnvVar{{Name: "MY_VAR", Value: &hello, For: []string{"verification"}},
		{Name: "HOST_ONLY_VAR", For: []string{"verification", "setup"}}}
	t.Run("declared", func(t *testing.T) {
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != ctoharness.StatusPass {
			t.Fatalf("status %s, blockers %v, tests %q", rep.Status, rep.Blockers, rep.Tests.Reason)
		}
		mustValidate(t, set, rep, true)
	})

	t.Run("host variable unset", func(t *testing.T) {
		o := o
		o.Config.Env = []config.EnvVar{{Name: "NOT_ON_THIS_HOST", For: []string{"case"}}}
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if !hasCode(rep, ctoharness.BlockConfigInvalid) || rep.CaseProcessStarted {
			t.Fatalf("blockers %v, case started %v", rep.Blockers, rep.CaseProcessStarted)
		}
		mustValidate(t, set, rep, false)
	})

	t.Run("reserved name", func(t *testing.T) {
		o := o
		v := "/tmp/elsewhere"
		o.Config.Env = []config.EnvVar{{Name: "HOME", Value: &v, For: []string{"verification"}}}
		rep, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if !hasCode(rep, ctoharness.BlockConfigInvalid) || !strings.Contains(rep.Blockers[0].Message, "set by the harness itself") {
			t.Fatalf("blockers %v", rep.Blockers)
		}
	})
}
