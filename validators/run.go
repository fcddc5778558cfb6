package validators

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// RunOptions tune Run.
type RunOptions struct {
	ExpectPass bool // additionally require status pass
}

// runCheck is one named check over a loaded run directory.
type runCheck struct {
	name string
	fn   func(v *runView, c collector)
}

// runChecks is every check, in the order they are reported.
func runChecks() []runCheck {
	return []runCheck{
		{"report_checksum", checkReportChecksum},
		{"report_schema", checkReportSchema},
		{"artifacts_present", checkArtifactsPresent},
		{"artifact_digests", checkDigests},
		{"artifact_schemas", checkArtifactSchemas},
		{"event_chain", checkEventChain},
		{"event_order", checkEventOrder},
		{"freshness", checkFreshness},
		{"source_non_mutation", checkNonMutation},
		{"fixture_clean_start", checkCleanStart},
		{"fixture_clean_end", checkCleanEnd},
		{"changed_files_allowed", checkChangedFiles},
		{"task_contract", checkContract},
		{"trace_roots", checkTrace},
		{"tests", checkTests},
		{"status_consistent", checkStatus},
	}
}

// CheckNames lists the checks Run performs.
func CheckNames() []string {
	var n []string
	for _, c := range runChecks() {
		n = append(n, c.name)
	}
	return n
}

// runView is a run directory loaded once for all checks.
type runView struct {
	dir        string
	set        *schemas.Set
	opts       RunOptions
	reportRaw  []byte
	report     *ctoharness.Report
	files      map[string]bool
	events     []ctoharness.Event
	eventLines [][]byte
	eventsErr  string
	trace      []ctoharness.TraceEntry
	traceErr   string
}

// Run validates one run directory. A well-formed blocked run is valid; with
// ExpectPass the run must also have passed.
func Run(ctx context.Context, dir string, set *schemas.Set, opts RunOptions) Result {
	res := Result{RunDir: dir, Checked: []string{}, Errors: []Finding{}}
	c := collector{&res}
	v := &runView{dir: dir, set: set, opts: opts, files: map[string]bool{}}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		c.check("artifacts_present")
		c.fail("artifacts_present", "", "run directory %s does not exist or is not a directory", dir)
		return res
	}
	names, err := evidence.ListArtifacts(dir)
	if err != nil {
		c.fail("artifacts_present", "", "%v", err)
	}
	for _, n := range names {
		v.files[n] = true
	}
	v.load()
	for _, rc := range runChecks() {
		c.check(rc.name)
		if v.report == nil && rc.name != "report_checksum" && rc.name != "report_schema" && rc.name != "artifacts_present" {
			continue
		}
		rc.fn(v, c)
	}
	res.OK = len(res.Errors) == 0
	if v.report != nil {
		res.Status = string(v.report.Status)
	}
	return res
}

func (v *runView) path(name string) string { return filepath.Join(v.dir, filepath.FromSlash(name)) }

func (v *runView) load() {
	if raw, err := os.ReadFile(v.path(evidence.ReportJSON)); err == nil {
		v.reportRaw = raw
		if v.set.Validate(schemas.Report, raw) == nil {
			var r ctoharness.Report
			if json.Unmarshal(raw, &r) == nil {
				v.report = &r
			}
		}
	}
	v.eventLines, v.eventsErr = readLines(v.path(evidence.EventsFile))
	for i, line := range v.eventLines {
		var e ctoharness.Event
		if err := v.set.Validate(schemas.Event, line); err != nil {
			v.eventsErr = fmt.Sprintf("line %d: %v", i+1, err)
			break
		}
		if err := json.Unmarshal(line, &e); err != nil {
			v.eventsErr = fmt.Sprintf("line %d: malformed JSON: %v", i+1, err)
			break
		}
		v.events = append(v.events, e)
	}
	lines, terr := readLines(v.path(evidence.TraceFile))
	v.traceErr = terr
	for i, line := range lines {
		var e ctoharness.TraceEntry
		if err := v.set.Validate(schemas.Trace, line); err != nil {
			v.traceErr = fmt.Sprintf("line %d: %v", i+1, err)
			break
		}
		if err := json.Unmarshal(line, &e); err != nil {
			v.traceErr = fmt.Sprintf("line %d: malformed JSON: %v", i+1, err)
			break
		}
		v.trace = append(v.trace, e)
	}
}

func readLines(p string) ([][]byte, string) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err.Error()
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, "the last line is not terminated (the file was cut short)"
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out, ""
}

func checkReportChecksum(v *runView, c collector) {
	want, err := os.ReadFile(v.path(evidence.ReportSum))
	if err != nil {
		c.fail("report_checksum", evidence.ReportSum, "missing: %v", err)
		return
	}
	if v.reportRaw == nil {
		c.fail("report_checksum", evidence.ReportJSON, "missing or unreadable")
		return
	}
	sum := sha256.Sum256(v.reportRaw)
	fields := strings.Fields(string(want))
	if len(fields) != 2 || fields[1] != evidence.ReportJSON {
		c.fail("report_checksum", evidence.ReportSum, "malformed: want \"<sha256>  report.json\"")
		return
	}
	if fields[0] != hex.EncodeToString(sum[:]) {
		// Either file may be the one changed; name both.
		c.fail("report_checksum", evidence.ReportJSON, "content does not match %s (one of them was changed after the run)", evidence.ReportSum)
		c.fail("report_checksum", evidence.ReportSum, "checksum %s does not match %s", fields[0], evidence.ReportJSON)
	}
}

func checkReportSchema(v *runView, c collector) {
	if v.reportRaw == nil {
		return
	}
	if err := v.set.Validate(schemas.Report, v.reportRaw); err != nil {
		c.fail("report_schema", evidence.ReportJSON, "%v", err)
	} else if v.report == nil {
		c.fail("report_schema", evidence.ReportJSON, "cannot be decoded")
	}
}

// artifactFor maps the event that proves a step ran to the artifact it wrote.
var artifactFor = []struct {
	event    ctoharness.EventType
	artifact string
}{
	{ctoharness.EvSourceProofBefore, evidence.SourceBefore},
	{ctoharness.EvSourceProofAfter, evidence.SourceAfter},
	{ctoharness.EvSourceNonMutation, evidence.NonMutation},
	{ctoharness.EvFixtureCleanStart, evidence.CleanStart},
	{ctoharness.EvFixtureCleanEnd, evidence.CleanEnd},
	{ctoharness.EvTaskContractWritten, evidence.TaskFile},
	{ctoharness.EvCaseProcessStarted, evidence.CaseStdout},
	{ctoharness.EvCaseProcessStarted, evidence.CaseStderr},
	{ctoharness.EvCaseProcessStarted, evidence.CaseEvents},
}

func (v *runView) has(t ctoharness.EventType) bool {
	for _, e := range v.events {
		if e.Type == t {
			return true
		}
	}
	return false
}

func checkArtifactsPresent(v *runView, c collector) {
	always := []string{evidence.ReportJSON, evidence.ReportSum, evidence.ReportMD, evidence.EventsFile, evidence.TraceFile,
		evidence.PatchFile, evidence.TestLog}
	for _, a := range always {
		if !v.files[a] {
			c.fail("artifacts_present", a, "required artifact is missing")
		}
	}
	for _, m := range artifactFor {
		if v.has(m.event) && !v.files[m.artifact] {
			c.fail("artifacts_present", m.artifact, "missing although event %s says its step ran", m.event)
		}
	}
}

func checkDigests(v *runView, c collector) {
	listed := v.report.ArtifactDigests
	for name, want := range listed {
		got, err := evidence.FileSHA256(v.path(name))
		if err != nil {
			c.fail("artifact_digests", name, "listed in artifact_digests but unreadable: %v", err)
			continue
		}
		if got != want {
			c.fail("artifact_digests", name, "sha256 %s does not match the recorded %s (the artifact was changed)", got, want)
		}
	}
	for name := range v.files {
		if name == evidence.ReportJSON || name == evidence.ReportSum {
			continue
		}
		if _, ok := listed[name]; !ok {
			c.fail("artifact_digests", name, "file is not listed in artifact_digests (added after the run?)")
		}
	}
}

func checkArtifactSchemas(v *runView, c collector) {
	kinds := map[string]schemas.Kind{
		evidence.TaskFile: schemas.TaskContract, evidence.SourceBefore: schemas.SourceProof, evidence.SourceAfter: schemas.SourceProof,
		evidence.NonMutation: schemas.NonMutation, evidence.CleanStart: schemas.FixtureProof, evidence.CleanEnd: schemas.FixtureProof,
	}
	for name, kind := range kinds {
		if !v.files[name] {
			continue
		}
		data, err := os.ReadFile(v.path(name))
		if err != nil {
			c.fail("artifact_schemas", name, "%v", err)
			continue
		}
		if err := v.set.Validate(kind, data); err != nil {
			c.fail("artifact_schemas", name, "%v", err)
		}
	}
	if v.traceErr != "" {
		c.fail("artifact_schemas", evidence.TraceFile, "%s", v.traceErr)
	}
	if lines, err := readLines(v.path(evidence.CaseEvents)); err == "" {
		for i, l := range lines {
			var m map[string]any
			if json.Unmarshal(l, &m) != nil {
				c.fail("artifact_schemas", evidence.CaseEvents, "line %d is not a JSON object", i+1)
				break
			}
		}
	}
}

func checkEventChain(v *runView, c collector) {
	if v.eventsErr != "" {
		c.fail("event_chain", evidence.EventsFile, "%s", v.eventsErr)
		return
	}
	prev := evidence.GenesisHash(v.report.RunID, v.report.Freshness.Nonce)
	for i, e := range v.events {
		if e.Seq != i+1 {
			c.fail("event_chain", evidence.EventsFile, "line %d has seq %d", i+1, e.Seq)
			return
		}
		if e.Prev != prev {
			c.fail("event_chain", evidence.EventsFile, "line %d breaks the hash chain (prev %s, expected %s)", i+1, e.Prev, prev)
			return
		}
		prev = evidence.LineHash(v.eventLines[i])
	}
	if prev != v.report.Freshness.FinalEventHash {
		c.fail("event_chain", evidence.EventsFile, "chain head %s does not match report freshness.final_event_hash %s", prev, v.report.Freshness.FinalEventHash)
	}
	if len(v.events) != v.report.Freshness.Events {
		c.fail("event_chain", evidence.EventsFile, "%d events, report says %d", len(v.events), v.report.Freshness.Events)
	}
}

// harnessOrder is the order harness events must keep relative to each other.
var harnessOrder = []ctoharness.EventType{
	ctoharness.EvRunStarted, ctoharness.EvGateChecked, ctoharness.EvSourceClassified, ctoharness.EvSourceProofBefore,
	ctoharness.EvFixtureCopied, ctoharness.EvBaselineCommitted, ctoharness.EvFixtureCleanStart, ctoharness.EvTaskContractWritten,
	ctoharness.EvFakeChangeApplied, ctoharness.EvCaseProcessStarted, ctoharness.EvCaseProcessExited, ctoharness.EvChangesCollected,
	ctoharness.EvVerificationDone, ctoharness.EvFixtureCleanEnd, ctoharness.EvSourceProofAfter, ctoharness.EvSourceNonMutation,
	ctoharness.EvRunFinished,
}

// ExpectedEvents is the full harness event sequence of a passing run at stage n.
func ExpectedEvents(stage int) []ctoharness.EventType {
	var out []ctoharness.EventType
	for _, t := range harnessOrder {
		switch {
		case stage == 1 && (t == ctoharness.EvCaseProcessStarted || t == ctoharness.EvCaseProcessExited):
		case stage != 1 && t == ctoharness.EvFakeChangeApplied:
		default:
			out = append(out, t)
		}
	}
	return out
}

func checkEventOrder(v *runView, c collector) {
	if len(v.events) == 0 {
		c.fail("event_order", evidence.EventsFile, "no events")
		return
	}
	const chk = "event_order"
	if v.events[0].Type != ctoharness.EvRunStarted {
		c.fail(chk, evidence.EventsFile, "first event is %s, want run_started", v.events[0].Type)
	}
	last := v.events[len(v.events)-1]
	if last.Type != ctoharness.EvRunFinished {
		c.fail(chk, evidence.EventsFile, "last event is %s, want run_finished", last.Type)
	} else {
		var d struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(last.Data, &d)
		if d.Status != string(v.report.Status) {
			c.fail(chk, evidence.EventsFile, "run_finished says status %q, report says %q", d.Status, v.report.Status)
		}
	}
	rank := map[ctoharness.EventType]int{}
	for i, t := range harnessOrder {
		rank[t] = i
	}
	var harness []ctoharness.EventType
	inCase := false
	caseEvents := map[ctoharness.EventType]bool{}
	lastRank := -1
	seen := map[ctoharness.EventType]int{}
	for _, e := range v.events {
		switch {
		case strings.HasPrefix(string(e.Type), "case."):
			if !inCase {
				c.fail(chk, evidence.EventsFile, "Case event %s (seq %d) outside the Case process's lifetime", e.Type, e.Seq)
			}
			caseEvents[e.Type] = true
			continue
		case e.Type == ctoharness.EvRunBlocked:
			continue
		}
		seen[e.Type]++
		if seen[e.Type] > 1 {
			c.fail(chk, evidence.EventsFile, "event %s appears more than once", e.Type)
		}
		if rank[e.Type] < lastRank {
			c.fail(chk, evidence.EventsFile, "event %s (seq %d) is out of order", e.Type, e.Seq)
		}
		lastRank = rank[e.Type]
		harness = append(harness, e.Type)
		inCase = e.Type == ctoharness.EvCaseProcessStarted
	}
	started := seen[ctoharness.EvCaseProcessStarted] > 0
	if started != v.report.CaseProcessStarted {
		c.fail(chk, evidence.EventsFile, "case_process_started event present=%v but report says %v", started, v.report.CaseProcessStarted)
	}
	if started && v.report.Stage == 1 {
		c.fail(chk, evidence.EventsFile, "stage 1 must not start a Case process")
	}
	for _, b := range v.report.Blockers {
		if b.Step == ctoharness.StepGate && started {
			c.fail(chk, evidence.EventsFile, "the gate blocked (%s) but a Case process was started", b.Code)
		}
	}
	if v.report.Status == ctoharness.StatusPass {
		want := ExpectedEvents(v.report.Stage)
		if !reflect.DeepEqual(harness, want) {
			c.fail(chk, evidence.EventsFile, "a passing stage %d run must have events %v, got %v", v.report.Stage, want, harness)
		}
		if started {
			for _, t := range ctoharness.RequiredCaseEvents() {
				if !caseEvents[t] {
					c.fail(chk, evidence.EventsFile, "required Case event %s is missing", t)
				}
			}
		}
	}
}

func checkFreshness(v *runView, c collector) {
	const chk = "freshness"
	r := v.report
	f := r.Freshness
	if f.RunID != r.RunID {
		c.fail(chk, evidence.ReportJSON, "freshness.run_id %s != run_id %s", f.RunID, r.RunID)
	}
	if filepath.Base(v.dir) != r.RunID {
		c.fail(chk, evidence.ReportJSON, "run directory %s is not named after run_id %s", filepath.Base(v.dir), r.RunID)
	}
	if f.HarnessVersion != ctoharness.Version {
		c.fail(chk, evidence.ReportJSON, "made by harness %s, this is %s", f.HarnessVersion, ctoharness.Version)
	}
	if f.FinishedAt.Before(f.StartedAt) {
		c.fail(chk, evidence.ReportJSON, "finished_at is before started_at")
	}
	inWindow := func(t time.Time) bool { return !t.Before(f.StartedAt) && !t.After(f.FinishedAt) }
	var prev time.Time
	for _, e := range v.events {
		if e.RunID != r.RunID {
			c.fail(chk, evidence.EventsFile, "event %d has run_id %s", e.Seq, e.RunID)
			break
		}
		if !inWindow(e.Time) || e.Time.Before(prev) {
			c.fail(chk, evidence.EventsFile, "event %d time %s is outside the run window or goes backwards", e.Seq, e.Time.Format(time.RFC3339Nano))
			break
		}
		prev = e.Time
		if e.Type == ctoharness.EvRunStarted {
			var d struct {
				Nonce string `json:"nonce"`
			}
			_ = json.Unmarshal(e.Data, &d)
			if d.Nonce != f.Nonce {
				c.fail(chk, evidence.EventsFile, "run_started nonce %q does not match the report's %q", d.Nonce, f.Nonce)
			}
		}
	}
	for _, t := range v.trace {
		if t.RunID != r.RunID {
			c.fail(chk, evidence.TraceFile, "entry %d has run_id %s", t.Seq, t.RunID)
			break
		}
	}
	for _, name := range []string{evidence.TaskFile, evidence.SourceBefore, evidence.SourceAfter, evidence.NonMutation, evidence.CleanStart, evidence.CleanEnd} {
		if !v.files[name] {
			continue
		}
		var d struct {
			RunID   string     `json:"run_id"`
			TakenAt *time.Time `json:"taken_at"`
		}
		data, _ := os.ReadFile(v.path(name))
		if json.Unmarshal(data, &d) != nil {
			continue // reported by artifact_schemas
		}
		if d.RunID != r.RunID {
			c.fail(chk, name, "run_id %q is not this run's %q (stale or copied evidence)", d.RunID, r.RunID)
		}
		if d.TakenAt != nil && !inWindow(*d.TakenAt) {
			c.fail(chk, name, "taken_at %s is outside the run window", d.TakenAt.Format(time.RFC3339Nano))
		}
	}
}

func (v *runView) readJSON(name string, out any) bool {
	data, err := os.ReadFile(v.path(name))
	return err == nil && json.Unmarshal(data, out) == nil
}

func (v *runView) hasBlocker(code ctoharness.BlockerCode) bool {
	for _, b := range v.report.Blockers {
		if b.Code == code {
			return true
		}
	}
	return false
}

func checkNonMutation(v *runView, c collector) {
	const chk = "source_non_mutation"
	r := v.report
	if !r.SourceNonMutation.Checked {
		if r.Status == ctoharness.StatusPass {
			c.fail(chk, evidence.ReportJSON, "a passing run must carry a source non-mutation proof")
		}
		if v.files[evidence.SourceBefore] && !v.files[evidence.SourceAfter] && !v.hasBlocker(ctoharness.BlockSourceMutated) {
			c.fail(chk, evidence.SourceAfter, "the source was proven before the run but never after, and no SOURCE_MUTATED blocker says why")
		}
		return
	}
	var before, after ctoharness.SourceProof
	var nm ctoharness.NonMutationProof
	if !v.readJSON(evidence.SourceBefore, &before) || !v.readJSON(evidence.SourceAfter, &after) || !v.readJSON(evidence.NonMutation, &nm) {
		c.fail(chk, evidence.NonMutation, "the before, after or non-mutation proof is missing or malformed")
		return
	}
	if before.Kind != "before" || after.Kind != "after" {
		c.fail(chk, evidence.SourceAfter, "proof kinds are %q/%q, want before/after", before.Kind, after.Kind)
	}
	if before.Root != after.Root || before.Root != r.SourcePath {
		c.fail(chk, evidence.SourceAfter, "the proofs describe different roots (%s, %s, report %s)", before.Root, after.Root, r.SourcePath)
	}
	recomputed := source.Compare(r.RunID, before, after)
	if !reflect.DeepEqual(normalizeNM(recomputed), normalizeNM(nm)) {
		c.fail(chk, evidence.NonMutation, "does not match a fresh comparison of the before and after proofs")
	}
	if recomputed.Mutated != r.SourceRepositoryMutated {
		c.fail(chk, evidence.ReportJSON, "source_repository_mutated=%v but the proofs say %v", r.SourceRepositoryMutated, recomputed.Mutated)
	}
	if recomputed.Mutated && !v.hasBlocker(ctoharness.BlockSourceMutated) {
		c.fail(chk, evidence.ReportJSON, "the source changed but there is no SOURCE_MUTATED blocker")
	}
	if !before.StatusClean && !v.hasBlocker(ctoharness.BlockSourceDirty) {
		c.fail(chk, evidence.SourceBefore, "the source was not clean before the run but there is no SOURCE_DIRTY blocker")
	}
	if before.Head.Tree != r.Commits.SourceTree {
		c.fail(chk, evidence.SourceBefore, "HEAD tree %s differs from the report's source_tree %s", before.Head.Tree, r.Commits.SourceTree)
	}
}

// normalizeNM makes nil and empty difference lists compare equal.
func normalizeNM(nm ctoharness.NonMutationProof) ctoharness.NonMutationProof {
	if len(nm.Differences) == 0 {
		nm.Differences = nil
	}
	return nm
}

func checkCleanStart(v *runView, c collector) {
	checkFixtureProof(v, c, "fixture_clean_start", evidence.CleanStart, "clean_start", ctoharness.BlockFixtureDirtyStart, v.report.Commits.SourceTree)
}

func checkCleanEnd(v *runView, c collector) {
	want := v.report.Commits.ResultTree
	if want == "" {
		want = v.report.Commits.BaselineTree
	}
	checkFixtureProof(v, c, "fixture_clean_end", evidence.CleanEnd, "clean_end", ctoharness.BlockFixtureDirtyEnd, want)
}

func checkFixtureProof(v *runView, c collector, chk, name, kind string, code ctoharness.BlockerCode, wantTree string) {
	if !v.files[name] {
		if v.report.Status == ctoharness.StatusPass {
			c.fail(chk, name, "a passing run must carry this proof")
		}
		return
	}
	var p ctoharness.FixtureProof
	if !v.readJSON(name, &p) {
		c.fail(chk, name, "malformed")
		return
	}
	if p.Kind != kind {
		c.fail(chk, name, "kind %q, want %q", p.Kind, kind)
	}
	if p.Clean != (len(p.Problems) == 0) {
		c.fail(chk, name, "clean=%v contradicts its %d problem(s)", p.Clean, len(p.Problems))
	}
	if !p.Clean && !v.hasBlocker(code) {
		c.fail(chk, name, "the fixture was not clean but there is no %s blocker", code)
	}
	if p.Clean && p.Tree != wantTree {
		c.fail(chk, name, "tree %s is not the expected %s", p.Tree, wantTree)
	}
	if p.FixturePath != v.report.FixturePath {
		c.fail(chk, name, "describes fixture %s, the report's is %s", p.FixturePath, v.report.FixturePath)
	}
}

func checkChangedFiles(v *runView, c collector) {
	const chk = "changed_files_allowed"
	pol := task.NewPathPolicy(v.report.AllowedPaths)
	disallowed := false
	listed := map[string]bool{}
	for _, f := range v.report.ChangedFiles {
		listed[f.Path] = true
		ok, _ := pol.Check(f.Path)
		if ok != f.Allowed {
			c.fail(chk, evidence.ReportJSON, "%s is marked allowed=%v but the allowed paths say %v", f.Path, f.Allowed, ok)
		}
		if !ok {
			disallowed = true
		}
	}
	if disallowed && !v.hasBlocker(ctoharness.BlockDisallowedChange) {
		c.fail(chk, evidence.ReportJSON, "a change outside the allowed paths carries no DISALLOWED_CHANGE blocker")
	}
	patch, err := os.ReadFile(v.path(evidence.PatchFile))
	if err != nil {
		return
	}
	inPatch := map[string]bool{}
	for _, line := range strings.Split(string(patch), "\n") {
		if rest, ok := strings.CutPrefix(line, "diff --git a/"); ok {
			if i := strings.Index(rest, " b/"); i >= 0 {
				inPatch[rest[i+3:]] = true
			}
		}
	}
	for p := range listed {
		if !inPatch[p] && v.report.Commits.ResultCommit != "" && v.report.Commits.ResultCommit != v.report.Commits.BaselineCommit {
			c.fail(chk, evidence.PatchFile, "changed file %s is missing from the patch", p)
		}
	}
	for p := range inPatch {
		if !listed[p] {
			c.fail(chk, evidence.PatchFile, "the patch changes %s, which changed_files does not list", p)
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
	if v.report.SourcePath != "" && strings.Contains(string(data), v.report.SourcePath) {
		c.fail(chk, evidence.TaskFile, "the contract reveals the source path %s", v.report.SourcePath)
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
		if v.report.SourcePath != "" && strings.Contains(a, v.report.SourcePath) && v.report.CaseLane == ctoharness.LaneReal {
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
	for _, e := range v.trace {
		for _, root := range forbidden {
			if under(e.Path, root) {
				c.fail(chk, evidence.TraceFile, "entry %d (%s %s) touches the forbidden root %s", e.Seq, e.Op, e.Path, root)
			}
		}
		if e.Op.IsWrite() && !under(e.Path, r.RunArtifactDir) && !under(e.Path, r.RuntimeWorkspaceRoot) {
			c.fail(chk, evidence.TraceFile, "entry %d: harness %s outside its two roots: %s", e.Seq, e.Op, e.Path)
		}
		// The one write allowed inside a source: the harness materializing
		// its own artificial source in the workspace, before proving it.
		made := e.Step == ctoharness.StepClassify && under(r.SourcePath, r.RuntimeWorkspaceRoot)
		if r.SourcePath != "" && e.Op.IsWrite() && under(e.Path, r.SourcePath) && !made {
			c.fail(chk, evidence.TraceFile, "entry %d: harness wrote inside the source: %s", e.Seq, e.Path)
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
		if t.ExitCode == nil || *t.ExitCode != 0 {
			c.fail(chk, evidence.ReportJSON, "TEST_PASS without exit code 0")
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
	if ran {
		if data, err := os.ReadFile(v.path(evidence.TestLog)); err != nil || !strings.HasPrefix(string(data), "$ "+t.Command+"\n") {
			c.fail(chk, evidence.TestLog, "the verification ran but its log is missing or does not start with its command")
		}
	}
	if v.report.Status == ctoharness.StatusPass && t.Classification != ctoharness.TestPass {
		c.fail(chk, evidence.ReportJSON, "a passing run needs a passing verification, got %s", t.Classification)
	}
}

func checkStatus(v *runView, c collector) {
	const chk = "status_consistent"
	r := v.report
	if want := ctoharness.StatusFor(r.Blockers); want != r.Status {
		c.fail(chk, evidence.ReportJSON, "status %s but its blockers imply %s", r.Status, want)
	}
	blocked := map[string]bool{}
	for _, e := range v.events {
		if e.Type == ctoharness.EvRunBlocked {
			var b ctoharness.Blocker
			_ = json.Unmarshal(e.Data, &b)
			blocked[string(b.Code)] = true
		}
	}
	for code := range blocked {
		if !v.hasBlocker(ctoharness.BlockerCode(code)) {
			c.fail(chk, evidence.EventsFile, "run_blocked %s is not among the report's blockers", code)
		}
	}
	if r.Qualifies && (!r.Sandbox.Enforced || r.Sandbox.Unsandboxed || r.FaultInjection != "") {
		c.fail(chk, evidence.ReportJSON, "claims to qualify as stage evidence without an enforced sandbox, or with a fault injected")
	}
	if r.Status == ctoharness.StatusPass {
		if r.CaseProcessStarted && (r.Case.ExitCode == nil || *r.Case.ExitCode != 0) {
			c.fail(chk, evidence.ReportJSON, "a passing run whose Case process did not exit 0")
		}
		if r.Stage >= 2 && !r.CaseProcessStarted {
			c.fail(chk, evidence.ReportJSON, "a passing stage %d run must have started Case", r.Stage)
		}
	}
	if v.opts.ExpectPass && r.Status != ctoharness.StatusPass {
		codes := make([]string, 0, len(r.Blockers))
		for _, b := range r.Blockers {
			codes = append(codes, string(b.Code))
		}
		sort.Strings(codes)
		c.fail(chk, evidence.ReportJSON, "status is %s (%s), --expect-pass requires pass", r.Status, strings.Join(codes, ", "))
	}
}
