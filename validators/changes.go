package validators

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/gitquote"
	"github.com/cto-harness/cto-harness/harness/snapshot"
	"github.com/cto-harness/cto-harness/harness/store"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Checks on what changed and what ran: changed files, contract, trace, tests.

func checkChangedFiles(v *runView, c collector) {
	const chk = "changed_files_allowed"
	pol := task.NewPathPolicy(v.report.AllowedPaths)
	disallowed := false
	listed := map[string]bool{} // exact names
	for _, f := range v.report.ChangedFiles {
		name, ok := f.Name()
		if !ok {
			c.fail(chk, evidence.ReportJSON, "changed file %s has a path_b64 that is not base64", display.Terminal(f.Path))
			continue
		}
		if path, b64 := ctoharness.PathForms(name); path != f.Path || b64 != f.PathB64 {
			c.fail(chk, evidence.ReportJSON, "changed file %s: path %q and path_b64 %q are not the stored forms of one name", display.Terminal(f.Path), f.Path, f.PathB64)
		}
		listed[name] = true
		ok, _ = pol.Check(name)
		if ok != f.Allowed {
			c.fail(chk, evidence.ReportJSON, "%s is marked allowed=%v but the allowed paths say %v", display.Terminal(f.Path), f.Allowed, ok)
		}
		if !ok {
			disallowed = true
		}
	}
	if disallowed && !v.hasBlocker(ctoharness.BlockDisallowedChange) {
		c.fail(chk, evidence.ReportJSON, "a change outside the allowed paths carries no DISALLOWED_CHANGE blocker")
	}
	if unsafe := harness.UnsafeNames(v.report.ChangedFiles); len(unsafe) > 0 && !v.hasBlocker(ctoharness.BlockUnsafeFileName) {
		c.fail(chk, evidence.ReportJSON, "changed file names with control, format or bidi characters (%s) carry no UNSAFE_FILE_NAME blocker", strings.Join(unsafe, ", "))
	}
	patch, err := os.ReadFile(v.path(evidence.PatchFile))
	if err != nil {
		return
	}
	inPatch := map[string]bool{}
	for _, line := range strings.Split(string(patch), "\n") {
		if !strings.HasPrefix(line, "diff --git ") {
			continue
		}
		_, b, err := gitquote.DiffHeader(line)
		if p, ok := strings.CutPrefix(b, "b/"); err == nil && ok {
			inPatch[p] = true
		} else {
			c.fail(chk, evidence.PatchFile, "cannot read the header %s", display.Terminal(line))
		}
	}
	for p := range listed {
		if !inPatch[p] && v.report.Commits.ResultCommit != "" && v.report.Commits.ResultCommit != v.report.Commits.BaselineCommit {
			c.fail(chk, evidence.PatchFile, "changed file %s is missing from the patch", display.Terminal(p))
		}
	}
	for p := range inPatch {
		if !listed[p] {
			c.fail(chk, evidence.PatchFile, "the patch changes %s, which changed_files does not list", display.Terminal(p))
		}
	}
}

func checkContract(v *runView, c collector) {
	const chk = "task_contract"
	if !v.files[evidence.TaskFile] {
		return
	}
	data, _ := os.ReadFile(v.path(evidence.TaskFile))
	var ct task.Contract
	if json.Unmarshal(data, &ct) != nil {
		return
	}
	for _, p := range []string{v.report.SourcePath, v.report.SourceGitDir} {
		if p != "" && p != "/" && task.RevealsPath(data, p) {
			c.fail(chk, evidence.TaskFile, "the contract reveals the source path %s", p)
		}
	}
	if !reflect.DeepEqual(ct.AllowedPaths, v.report.AllowedPaths) {
		c.fail(chk, evidence.TaskFile, "allowed paths %v differ from the report's %v", ct.AllowedPaths, v.report.AllowedPaths)
	}
	if ct.FixturePath != v.report.FixturePath {
		c.fail(chk, evidence.TaskFile, "fixture path %s differs from the report's %s", ct.FixturePath, v.report.FixturePath)
	}
	if ct.RunID != v.report.RunID {
		c.fail(chk, evidence.TaskFile, "run_id %s differs from the report's", ct.RunID)
	}
	for _, a := range v.report.Case.Argv {
		if v.report.SourcePath != "" && task.RevealsPath([]byte(a), v.report.SourcePath) && v.report.CaseLane == ctoharness.LaneReal {
			c.fail(chk, evidence.ReportJSON, "Case's argv reveals the source path")
		}
	}
}

func under(p, root string) bool {
	if root == "" {
		return false
	}
	root = filepath.Clean(root)
	p = filepath.Clean(p)
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

func checkTrace(v *runView, c collector) {
	const chk = "trace_roots"
	r := v.report
	if v.traceErr != "" {
		c.fail(chk, evidence.TraceFile, "%s", v.traceErr)
		return
	}
	if len(v.trace) == 0 {
		c.fail(chk, evidence.TraceFile, "the trace is empty")
		return
	}
	forbidden := append(append([]string{}, r.Policy.TargetRoots...), r.Policy.ExternalRoots...)
	// The harness's other roots beside the runs: the shared closures
	// (store.ClosuresDir), where a run's store names its history, and the
	// snapshots the harness makes and shares between runs.
	closures, snapshots := "", ""
	if r.RunArtifactDir != "" {
		runsDir := filepath.Dir(filepath.Clean(r.RunArtifactDir))
		closures, snapshots = filepath.Join(runsDir, store.ClosuresDir), snapshot.Root(runsDir)
	}
	for _, e := range v.trace {
		for _, root := range forbidden {
			if under(e.Path, root) {
				c.fail(chk, evidence.TraceFile, "entry %d (%s %s) touches the forbidden root %s", e.Seq, e.Op, e.Path, root)
			}
		}
		if e.Op.IsWrite() && !under(e.Path, r.RunArtifactDir) && !under(e.Path, r.RuntimeWorkspaceRoot) && !under(e.Path, closures) && !under(e.Path, snapshots) {
			c.fail(chk, evidence.TraceFile, "entry %d: harness %s outside its roots: %s", e.Seq, e.Op, e.Path)
		}
		// The one write allowed inside a source: the harness materializing
		// its own artificial source in the workspace, before proving it.
		made := e.Step == ctoharness.StepClassify && under(r.SourcePath, r.RuntimeWorkspaceRoot)
		if r.SourcePath != "" && e.Op.IsWrite() && under(e.Path, r.SourcePath) && !made {
			c.fail(chk, evidence.TraceFile, "entry %d: harness wrote inside the source: %s", e.Seq, e.Path)
		}
		if e.Op.IsWrite() && under(e.Path, r.SourceGitDir) {
			c.fail(chk, evidence.TraceFile, "entry %d: harness wrote inside the source's git directory: %s", e.Seq, e.Path)
		}
	}
	for _, name := range evidence.FinalArtifacts() {
		found := false
		for _, e := range v.trace {
			if e.Op == ctoharness.TraceWrite && e.Path == filepath.Join(r.RunArtifactDir, name) {
				found = true
				break
			}
		}
		if !found {
			c.fail(chk, evidence.TraceFile, "the write of %s is not traced", name)
		}
	}
}

func checkTests(v *runView, c collector) {
	const chk = "tests"
	t := v.report.Tests
	switch t.Classification {
	case ctoharness.TestPass:
		graded := t.Results != nil && t.Results.Grading != nil && t.Results.Grading.Passed
		if t.ExitCode == nil || (*t.ExitCode != 0 && !graded) {
			c.fail(chk, evidence.ReportJSON, "TEST_PASS without exit code 0 (or a grading whose listed tests all hold)")
		}
	case ctoharness.TestFailure:
		if !v.hasBlocker(ctoharness.BlockTestsFailed) {
			c.fail(chk, evidence.ReportJSON, "TEST_FAILURE without a TESTS_FAILED blocker")
		}
	case ctoharness.TestTimeout:
		if !v.hasBlocker(ctoharness.BlockTestTimeout) {
			c.fail(chk, evidence.ReportJSON, "TEST_TIMEOUT without a TEST_TIMEOUT blocker")
		}
	}
	ran := v.has(ctoharness.EvVerificationDone) && t.Classification != ctoharness.TestNotRun
	if ran || t.ExitCode != nil {
		// What ran must have run on the result: a checkout of exactly the
		// result tree, never the fixture Case left.
		if t.VerifiedTree == "" || t.VerifiedTree != v.report.Commits.ResultTree {
			c.fail(chk, evidence.ReportJSON, "the verification ran on tree %q, not on the result tree %q", t.VerifiedTree, v.report.Commits.ResultTree)
		}
		if !v.has(ctoharness.EvCheckoutMade) {
			c.fail(chk, evidence.EventsFile, "the verification ran but no checkout_made event records its checkout")
		}
	}
	if ran {
		if data, err := os.ReadFile(v.path(evidence.TestLog)); err != nil || !strings.HasPrefix(string(data), "$ "+t.Command+"\n") {
			c.fail(chk, evidence.TestLog, "the verification ran but its log is missing or does not start with its command")
		}
	}
	if v.report.Status == ctoharness.StatusPass && t.Classification != ctoharness.TestPass {
		c.fail(chk, evidence.ReportJSON, "a passing run needs a passing verification, got %s", t.Classification)
	}
	if s := v.report.Setup; s != nil {
		if !v.files[evidence.SetupLog] {
			c.fail(chk, evidence.SetupLog, "the report records a setup command but setup.log is missing")
		}
		if s.Classification != ctoharness.TestPass && !v.hasBlocker(ctoharness.BlockSetupFailed) && !v.hasBlocker(ctoharness.BlockSandboxUnavailable) && !v.hasBlocker(ctoharness.BlockInterrupted) {
			c.fail(chk, evidence.ReportJSON, "the setup command ended %s without a SETUP_FAILED blocker", s.Classification)
		}
		if ran && s.Classification != ctoharness.TestPass {
			c.fail(chk, evidence.ReportJSON, "the verification ran although the setup command ended %s", s.Classification)
		}
	}
}
