package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cto-harness/cto-harness/cli"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/validators"
)

// TestMain registers the harness binaries, so scripts run the real command
// line in real child processes; the fake Case is this same binary re-executed.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"cto-harness": func() {
			ctx, stop := cli.SignalContext() // as cmd/cto-harness does
			code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
			stop()
			os.Exit(code)
		},
		"validate-case-stage3": func() {
			os.Exit(cli.MainStage3(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams("testdata/script"))
}

// envE2E turns on the end-to-end tests `make test` leaves out: each replays
// the whole failure matrix or walks the demo, minutes apiece, and the one
// full replay make test keeps is validators' TestStage3.
const envE2E = "CTO_HARNESS_E2E_TESTS"

// TestE2EScripts runs the scripts in testdata/e2e: the stage 3 validator's
// command line on a full replay, and the demo from an empty directory.
func TestE2EScripts(t *testing.T) {
	if os.Getenv(envE2E) == "" {
		t.Skipf("each script in testdata/e2e replays the whole failure matrix (minutes): run them with `make test-e2e` or %s=1 go test ./cli/ -run TestE2EScripts", envE2E)
	}
	testscript.Run(t, scriptParams("testdata/e2e"))
}

// scriptParams runs the scripts in dir with the harness binaries, a runs
// directory, config and signing key of the script's own, and the commands
// below.
func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir: dir,
		Setup: func(e *testscript.Env) error {
			e.Setenv("CTO_HARNESS_RUNS_DIR", filepath.Join(e.WorkDir, "runs"))
			// Signing is on by default: the machine key is created on first
			// use under the user's config directory, here the script's own,
			// never the real user's.
			e.Setenv("XDG_CONFIG_HOME", filepath.Join(e.WorkDir, ".config"))
			// The harness binary's own directory, for scripts that narrow PATH.
			for _, d := range filepath.SplitList(e.Getenv("PATH")) {
				if _, err := os.Stat(filepath.Join(d, "cto-harness")); err == nil {
					e.Setenv("HARNESS_BIN_DIR", d)
					break
				}
			}
			// The generator of a small SWE-bench instance (a Python repository
			// with a bug, its fix and its test), shared with package dataset's test.
			if abs, err := filepath.Abs(filepath.Join("..", "harness", "dataset", "testdata", "make_instance.py")); err == nil {
				e.Setenv("MAKE_INSTANCE", abs)
			}
			// Everything a script makes under $WORK/owned is owned; $WORK/targets is a Target Repository root.
			cfg := fmt.Sprintf(`{"owned_sources": [%q], "target_repository_roots": [%q]}`,
				filepath.Join(e.WorkDir, "owned"), filepath.Join(e.WorkDir, "targets"))
			e.Setenv("CTO_HARNESS_CONFIG", filepath.Join(e.WorkDir, "harness.json"))
			// Stage 3 validation reads the governance documents from the harness root ($WORK).
			for _, d := range validators.GovernanceDocs() {
				data, err := os.ReadFile(filepath.Join("..", d))
				if err != nil {
					return err
				}
				if err := os.MkdirAll(filepath.Dir(filepath.Join(e.WorkDir, d)), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(e.WorkDir, d), data, 0o644); err != nil {
					return err
				}
			}
			return os.WriteFile(filepath.Join(e.WorkDir, "harness.json"), []byte(cfg), 0o644)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// natsserver [INCLUDE]: start an embedded NATS server with
			// JetStream for the rest of the script; $NATS_URL names it.
			// With INCLUDE (an authorization block), it admits only the
			// users that file lists.
			"natsserver": func(ts *testscript.TestScript, neg bool, args []string) {
				opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: ts.MkAbs("nats-store")}
				if len(args) == 1 {
					// nats-server reads an include relative to the including file.
					conf := filepath.Join(filepath.Dir(ts.MkAbs(args[0])), "nats-server.conf")
					ts.Check(os.WriteFile(conf, []byte(fmt.Sprintf("host: 127.0.0.1\nport: -1\njetstream { store_dir: %q }\ninclude %q\n", ts.MkAbs("nats-store"), filepath.Base(args[0]))), 0o600))
					var err error
					opts, err = server.ProcessConfigFile(conf)
					ts.Check(err)
				}
				opts.NoLog, opts.NoSigs = true, true
				ns, err := server.NewServer(opts)
				ts.Check(err)
				ns.Start()
				if !ns.ReadyForConnections(10 * time.Second) {
					ts.Fatalf("the embedded NATS server did not start")
				}
				ts.Defer(ns.Shutdown)
				ts.Setenv("NATS_URL", ns.ClientURL())
			},
			// materialize NAME DIR: build an embedded repository with go-git.
			"materialize": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 {
					ts.Fatalf("usage: materialize NAME DIR")
				}
				archive, err := fixtures.Archive(args[0])
				ts.Check(err)
				_, err = fixtures.Materialize(context.Background(), archive, ts.MkAbs(args[1]), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				ts.Check(err)
			},
		},
		// [pytest]: the python3 a sandboxed verification finds
		// (/usr/bin/python3) imports pytest. The lines a script guards
		// with it are skipped, and say so, on a machine without it
		// (Debian's python3-pytest, which .ci/run installs).
		Condition: func(cond string) (bool, error) {
			if cond != "pytest" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return exec.Command("/usr/bin/python3", "-c", "import pytest").Run() == nil, nil
		},
	}
}
