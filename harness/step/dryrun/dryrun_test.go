package dryrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/toolenv"
	"github.com/cto-harness/cto-harness/schemas"
)

// stage1 is a plan request for stage 1 on the embedded artificial fixture,
// with hooks that answer as a config with one toolchain variable, a Go
// cache and an npm cache would, and say which they were asked.
func stage1(t *testing.T, asked map[string]int) Input {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Lookup("")
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "PATH" {
			return "/usr/bin:/bin"
		}
		return ""
	}
	clock := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	return Input{Gate: gates.Request{Stage: 1, Getenv: getenv}, RunID: "20260101T000000Z-s1-test", RunsDir: t.TempDir(),
		Schemas: set, ArtificialTime: clock(), Getenv: getenv, Clock: clock, Profile: prof, CaseArgv: []string{"/bin/case"},
		Adversary: Adversary{TestsDir: "/in-view/adversary", BaselineDir: "/in-view/baseline", DefaultTimeout: 77, EnvKeys: []string{"ADV_TASK"}},
		Hooks: Hooks{
			Tools: func(cmd egress.Command) (toolenv.Set, error) {
				asked["tools "+string(cmd)]++
				return toolenv.Set{Env: []string{"TOOL_" + strings.ToUpper(string(cmd)) + "=1"}}, nil
			},
			Net: func(*task.NetworkAllow) (egress.Policy, error) { asked["net"]++; return egress.Policy{}, nil },
			GoCaches: func(context.Context) ([]string, bool, error) {
				asked["go"]++
				return []string{"GOCACHE=/host/go-build"}, true, nil
			},
			Eco: func(context.Context) (func(string, func(string) bool) []string, error) {
				asked["eco"]++
				return func(home string, _ func(string) bool) []string { return []string{"NPM_CONFIG_CACHE=" + home + "/npm"} }, nil
			},
			CacheWarnings: func(task.Spec, egress.Policy) []string { asked["warnings"]++; return []string{"cache warning"} },
			Unresolved: func(progs []scan.Program, _ toolenv.Set, env []string, _ []config.Toolchain) []string {
				asked["unresolved"]++
				var out []string
				for _, p := range progs {
					out = append(out, "unresolved "+p.Name+" at "+p.File)
				}
				return out
			},
		}}
}

func command(p *Plan, role string) *Command {
	for i := range p.Commands {
		if p.Commands[i].Role == role {
			return &p.Commands[i]
		}
	}
	return nil
}

// The stage 1 plan describes the verification with the toolchains' and
// caches' variables, in the checkout below the runs directory, writes
// nothing there, and removes the artificial fixture it scanned.
func TestDescribeStage1(t *testing.T) {
	asked := map[string]int{}
	in := stage1(t, asked)
	p, err := Describe(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != Status || p.Stage != 1 || len(p.Blockers) != 0 {
		t.Fatalf("plan %s stage %d blockers %v", p.Status, p.Stage, p.Blockers)
	}
	if !p.SourceClean || p.TaskContract == nil || p.CopyTarget != filepath.Join(in.RunsDir, in.RunID, "fixture") {
		t.Errorf("source clean %v, contract %v, copy target %s", p.SourceClean, p.TaskContract, p.CopyTarget)
	}
	if _, err := os.Stat(p.Source); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the artificial fixture %s was left behind: %v", p.Source, err)
	}
	if entries, _ := os.ReadDir(in.RunsDir); len(entries) != 0 {
		t.Errorf("the plan wrote into the runs directory: %v", entries)
	}
	if command(p, "case") != nil {
		t.Error("stage 1 has no Case process, but the plan lists one")
	}
	v := command(p, "verification")
	if v == nil {
		t.Fatalf("no verification command: %+v", p.Commands)
	}
	if !strings.HasPrefix(v.Dir, in.RunsDir+"/") || !v.Sandboxed {
		t.Errorf("verification dir %s sandboxed %v", v.Dir, v.Sandboxed)
	}
	for _, k := range []string{"TOOL_VERIFICATION", "GOCACHE", "NPM_CONFIG_CACHE", "HOME", "PATH"} {
		if !slices.Contains(v.EnvKeys, k) {
			t.Errorf("verification env keys %v lack %s", v.EnvKeys, k)
		}
	}
	if !slices.Contains(p.Warnings, "cache warning") || !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.HasPrefix(w, "unresolved ") }) {
		t.Errorf("warnings %q", p.Warnings)
	}
	if asked["tools "+string(egress.CommandCase)] != 0 || asked["tools "+string(egress.CommandVerify)] != 1 || asked["net"] != 1 {
		t.Errorf("hooks asked %v", asked)
	}
}

// Unsandboxed, the warm caches join no environment and the view's
// warnings are not asked (there is no view); a failing hook is the
// blocker of the step it stands for, beside the rest of the plan.
func TestDescribeUnsandboxedAndHookBlockers(t *testing.T) {
	asked := map[string]int{}
	in := stage1(t, asked)
	in.Unsandboxed = true
	in.Hooks.Net = func(*task.NetworkAllow) (egress.Policy, error) {
		return egress.Policy{}, ctoharness.Block(ctoharness.BlockConfigInvalid, ctoharness.StepContract, nil, "bad grants")
	}
	p, err := Describe(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Blockers) != 1 || p.Blockers[0].Code != ctoharness.BlockConfigInvalid || p.Blockers[0].Step != ctoharness.StepContract {
		t.Fatalf("blockers %+v", p.Blockers)
	}
	v := command(p, "verification")
	if v == nil || v.Sandboxed || slices.Contains(v.EnvKeys, "NPM_CONFIG_CACHE") || !slices.Contains(v.EnvKeys, "TOOL_VERIFICATION") {
		t.Fatalf("unsandboxed verification %+v", v)
	}
	if asked["unresolved"] != 0 || asked["warnings"] != 0 {
		t.Errorf("hooks asked %v", asked)
	}
}

// A gate that refuses ends the plan there: no source is classified and no
// other step is asked.
func TestDescribeGateRefusal(t *testing.T) {
	in := stage1(t, map[string]int{})
	in.Gate.Stage = 3
	in.Hooks = Hooks{}
	p, err := Describe(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Blockers) == 0 || p.Blockers[0].Step != ctoharness.StepGate || p.Source != "" || len(p.Commands) != 0 {
		t.Fatalf("plan %+v", p)
	}
}

// An adversary is planned with its own directory, timeout and variables,
// and without a person or setting to confirm its tests it is refused.
func TestDescribeAdversary(t *testing.T) {
	in := stage1(t, map[string]int{})
	set, _ := schemas.Compile()
	spec := task.Spec{Task: "add a note", AllowedPaths: []string{"CASE_NOTES.md"},
		Verification: task.Verification{Command: "true", TimeoutSeconds: 30}, CaseTimeoutSeconds: 30,
		Adversary: &task.SpecAdversary{Command: []string{"/bin/adversary"}, TestCommand: "sh tests.sh"}}
	in.Spec, in.Schemas = &spec, set
	p, err := Describe(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	a, at := command(p, "adversary"), command(p, "adversarial-tests")
	if a == nil || at == nil {
		t.Fatalf("commands %+v", p.Commands)
	}
	if a.Dir != "/in-view/adversary" || a.TimeoutSeconds != 77 || !slices.Contains(a.EnvKeys, "ADV_TASK") || slices.Contains(at.EnvKeys, "ADV_TASK") {
		t.Errorf("adversary %+v, its tests %+v", a, at)
	}
	if at.Dir != "/in-view/baseline" || at.TimeoutSeconds != 30 || len(at.NetworkAllow) != 0 {
		t.Errorf("adversarial tests %+v", at)
	}
	if len(p.Blockers) != 1 || p.Blockers[0].Code != ctoharness.BlockAdversaryNotConfirmed {
		t.Errorf("blockers %+v", p.Blockers)
	}
	in.Confirmed = true
	if p, err = Describe(context.Background(), in); err != nil || len(p.Blockers) != 0 {
		t.Errorf("confirmed: %v %+v", err, p.Blockers)
	}
}

// hiddenSegment finds the outermost dot directory of a path.
func TestHiddenSegment(t *testing.T) {
	for p, want := range map[string]string{
		"/home/u/.cache/runs/work/x": "/home/u/.cache",
		"/a/.b/.c":                   "/a/.b",
		"/a/b.c/d":                   "",
		"/":                          "",
		"/a/b/":                      "",
	} {
		if got := hiddenSegment(p); got != want {
			t.Errorf("hiddenSegment(%q) = %q, want %q", p, got, want)
		}
	}
}
