package validators

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseevent"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// Checks on the report itself and on the artifact set: checksum, schemas, presence, digests, status.

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

func (v *runView) has(t ctoharness.EventType) bool { return v.log.types[t] }

func checkArtifactsPresent(v *runView, c collector) {
	always := []string{evidence.ReportJSON, evidence.ReportSum, evidence.ReportMD, evidence.ReportHTML, evidence.EventsFile, evidence.TraceFile,
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
		got, err := v.sha256(name)
		if err != nil {
			c.fail("artifact_digests", name, "listed in artifact_digests but unreadable: %v", err)
			continue
		}
		if got != want {
			c.fail("artifact_digests", name, "sha256 %s does not match the recorded %s (the artifact was changed)", got, want)
		}
	}
	for name := range v.files {
		if name == evidence.ReportJSON || name == evidence.ReportSum || name == evidence.Attestation {
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
		evidence.TestsJSON: schemas.Tests,
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
	// Case's raw events can be long: streamed, stopping at the first bad
	// line. The harness copies only the lines it accepted, so each must
	// pass the same strict reading again (their fields are held to the
	// schema in the event log, by case_event_grammar).
	if v.files[evidence.CaseEvents] {
		bad := errors.New("not a Case event")
		err := scanFile(v.ctx, v.path(evidence.CaseEvents), func(i int, l []byte) error {
			if _, err := caseevent.Type(l); err != nil {
				c.fail("artifact_schemas", evidence.CaseEvents, "line %d is not a Case event: %v", i+1, err)
				return bad
			}
			return nil
		})
		v.interrupted = v.interrupted || errors.Is(err, errInterrupted)
	}
}

func checkStatus(v *runView, c collector) {
	const chk = "status_consistent"
	r := v.report
	if want := ctoharness.StatusFor(r.Blockers); want != r.Status {
		c.fail(chk, evidence.ReportJSON, "status %s but its blockers imply %s", r.Status, want)
	}
	if want := ctoharness.OutcomeFor(r.Blockers); want != r.Outcome {
		c.fail(chk, evidence.ReportJSON, "outcome %q but its blockers imply %q", r.Outcome, want)
	}
	checkUsage(r, func(format string, args ...any) { c.fail(chk, evidence.ReportJSON, format, args...) })
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

// checkRunLocation refuses a run directory that is not where its report says
// it was made: a copy elsewhere is not the run it claims to be (its fixture,
// scratch and trace name the original).
func checkRunLocation(v *runView, c collector) {
	const chk = "run_location"
	here, err := filepath.EvalSymlinks(v.dir)
	if err != nil {
		c.fail(chk, "", "cannot resolve the run directory %s: %v", v.dir, err)
		return
	}
	here, _ = filepath.Abs(here)
	made, err := filepath.EvalSymlinks(v.report.RunArtifactDir)
	if !v.opts.Relocated && (err != nil || made != here) {
		c.fail(chk, evidence.ReportJSON, "the run was made in %s, but this directory is %s; a relocated or copied run directory is not accepted",
			v.report.RunArtifactDir, here)
	}
	if filepath.Base(here) != v.report.RunID {
		c.fail(chk, evidence.ReportJSON, "the directory %s is not named after the run id %s", here, v.report.RunID)
	}
}

// checkUsage holds an agent's usage to itself: the listed requests add up
// to the totals when all are listed, the counts are in range, and a cost is
// there exactly when its source says one is known.
func checkUsage(r *ctoharness.Report, fail func(format string, args ...any)) {
	if r.Agent == nil || r.Agent.Usage == nil {
		return
	}
	u := r.Agent.Usage
	if len(u.PerRequest) > u.Requests || u.Failed > u.Requests || u.Unreported > u.Requests {
		fail("agent.usage counts %d requests but lists %d, %d failed, %d unreported", u.Requests, len(u.PerRequest), u.Failed, u.Unreported)
	}
	if (u.CostUSD == nil) != (u.CostSource == ctoharness.CostNotReported) {
		fail("agent.usage cost %v does not fit its source %q", u.CostUSD, u.CostSource)
	}
	if len(u.PerRequest) != u.Requests {
		return
	}
	var sum ctoharness.ModelRequest
	failed := 0
	for _, q := range u.PerRequest {
		sum.InputUncached += q.InputUncached
		sum.CacheRead += q.CacheRead
		sum.CacheWrite += q.CacheWrite
		sum.Output += q.Output
		if q.Error != "" {
			failed++
		}
	}
	if sum.InputUncached != u.InputUncached || sum.CacheRead != u.CacheRead || sum.CacheWrite != u.CacheWrite || sum.Output != u.Output || failed != u.Failed {
		fail("agent.usage totals (%d/%d/%d in, %d out, %d failed) are not the sum of its requests (%d/%d/%d in, %d out, %d failed)",
			u.InputUncached, u.CacheRead, u.CacheWrite, u.Output, u.Failed, sum.InputUncached, sum.CacheRead, sum.CacheWrite, sum.Output, failed)
	}
}
