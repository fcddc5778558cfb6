package validators

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/checked"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/hidden"
	"github.com/cto-harness/cto-harness/schemas"
)

// checkHiddenTests holds the archive of the hidden tests to the digest the
// report recorded before Case started, and the list of what they replaced
// to Case's changes: every path Case added or changed that a hidden file
// has must be listed as overridden.
func checkHiddenTests(v *runView, c collector) {
	const chk = "hidden_tests"
	h := v.report.HiddenTests
	if h == nil {
		if v.files[evidence.HiddenTar] {
			c.fail(chk, evidence.HiddenTar, "the run directory holds hidden tests the report does not record")
		}
		return
	}
	if h.Archive == "" {
		if v.report.Tests.VerifiedCommit != "" && len(v.report.Blockers) == 0 {
			c.fail(chk, "", "the verification ran on a checkout, yet the hidden tests were never laid over it")
		}
		return
	}
	if h.Archive != evidence.HiddenTar {
		c.fail(chk, "", "hidden_tests.archive is %q, want %s", h.Archive, evidence.HiddenTar)
		return
	}
	f, err := os.Open(v.path(evidence.HiddenTar))
	if err != nil {
		c.fail(chk, evidence.HiddenTar, "cannot read: %v", err)
		return
	}
	defer f.Close()
	set, err := hidden.ReadArchive(f)
	if err != nil {
		c.fail(chk, evidence.HiddenTar, "%v", err)
		return
	}
	if set.Digest != h.Digest || len(set.Files) != h.Files || set.Bytes != h.Bytes {
		c.fail(chk, evidence.HiddenTar, "the archive holds %d files, %d bytes, digest %s; the report recorded %d files, %d bytes, digest %s before Case started",
			len(set.Files), set.Bytes, set.Digest, h.Files, h.Bytes, h.Digest)
	}
	in := map[string]bool{}
	for _, f := range set.Files {
		in[f.Path] = true
	}
	listed := map[string]bool{}
	for _, p := range h.Overridden {
		listed[p] = true
		if !in[p] {
			c.fail(chk, evidence.HiddenTar, "hidden_tests.overridden names %s, which is not a hidden file", p)
		}
	}
	for _, cf := range v.report.ChangedFiles {
		if cf.Change != "deleted" && in[cf.Path] && !listed[cf.Path] {
			c.fail(chk, evidence.HiddenTar, "Case changed %s, which a hidden file replaced, yet hidden_tests.overridden does not list it", cf.Path)
		}
	}
	if d, ok := v.classifiedDigest(); !ok || d != h.Digest {
		c.fail(chk, evidence.EventsFile, "the source_classified event fixes hidden tests digest %q before Case starts; the report records %s", d, h.Digest)
	}
}

// classified is what the last source_classified event fixed of the
// criteria before Case started.
type classified struct {
	SpecDigest string   `json:"task_spec_digest"`
	Digest     string   `json:"hidden_tests_digest"`
	FailToPass []string `json:"fail_to_pass"`
	PassToPass []string `json:"pass_to_pass"`
}

func (v *runView) classified() classified {
	var out classified
	for _, e := range v.events {
		if e.Type != ctoharness.EvSourceClassified {
			continue
		}
		var data classified
		if json.Unmarshal(e.Data, &data) == nil {
			out = data
		}
	}
	return out
}

// classifiedDigest is the hidden tests digest the last source_classified
// event fixed.
func (v *runView) classifiedDigest() (string, bool) {
	d := v.classified().Digest
	return d, d != ""
}

// checkCriteria holds the report's task criteria to what the
// source_classified event fixed before Case started, and to the report's
// own hidden tests, test report and grading: criteria changed once the
// result was known do not pass.
func checkCriteria(v *runView, c collector) {
	const chk = "task_criteria"
	cr := v.report.Criteria
	if cr == nil {
		if v.report.HiddenTests != nil || v.report.Tests.Results != nil || v.report.TaskCheck != nil {
			c.fail(chk, evidence.ReportJSON, "the run has hidden tests, a test report or a task check, and no task criteria")
		}
		return
	}
	checkTaskCheck(v, c, cr)
	fixed := v.classified()
	if cr.SpecDigest != fixed.SpecDigest {
		c.fail(chk, evidence.EventsFile, "task spec digest %s, the source_classified event fixed %q before Case started", cr.SpecDigest, fixed.SpecDigest)
	}
	if cr.HiddenTestsDigest != fixed.Digest || (v.report.HiddenTests != nil) != (cr.HiddenTestsDigest != "") ||
		(v.report.HiddenTests != nil && v.report.HiddenTests.Digest != cr.HiddenTestsDigest) {
		c.fail(chk, evidence.ReportJSON, "hidden tests digest %q in the criteria, %q fixed before Case started", cr.HiddenTestsDigest, fixed.Digest)
	}
	if !slices.Equal(cr.FailToPass, fixed.FailToPass) || !slices.Equal(cr.PassToPass, fixed.PassToPass) {
		c.fail(chk, evidence.ReportJSON, "graded lists %v / %v in the criteria, %v / %v fixed before Case started", cr.FailToPass, cr.PassToPass, fixed.FailToPass, fixed.PassToPass)
	}
	if t := v.report.Tests.Results; t != nil && cr.TestResults != t.Format+":"+t.Path {
		c.fail(chk, evidence.ReportJSON, "the criteria name test report %q, the run read %s:%s", cr.TestResults, t.Format, t.Path)
	}
	if cr.SampleTask != v.report.SampleTask {
		c.fail(chk, evidence.ReportJSON, "sample_task %v in the criteria, %v in the report", cr.SampleTask, v.report.SampleTask)
	}
	if tb := v.report.Trial; tb != nil && tb.TaskDigest != cr.SpecDigest {
		c.fail(chk, evidence.ReportJSON, "the run judged task %s, its trial binding names task %s", cr.SpecDigest, tb.TaskDigest)
	}
}

// checkTaskCheck holds a run that required a task check to the copy of the
// record it keeps (task-check.json): the bytes the report digested, a valid
// record of the run's task, hidden tests and base, unless the run was
// refused for it (TASK_INVALID).
func checkTaskCheck(v *runView, c collector, cr *ctoharness.TaskCriteria) {
	const chk = "task_criteria"
	ref := v.report.TaskCheck
	if ref == nil {
		if v.files[checked.Artifact] {
			c.fail(chk, checked.Artifact, "the run holds a task check record its report does not name")
		}
		return
	}
	raw, err := os.ReadFile(v.path(checked.Artifact))
	if err != nil {
		c.fail(chk, checked.Artifact, "the report names a task check, and its record is missing: %v", err)
		return
	}
	sum := sha256.Sum256(raw)
	if hex.EncodeToString(sum[:]) != ref.Digest {
		c.fail(chk, checked.Artifact, "the task check record digests to %x, the report names %s", sum, ref.Digest)
	}
	if err := v.set.Validator(schemas.TaskCheck)(raw); err != nil {
		c.fail(chk, checked.Artifact, "the task check record does not match its schema: %v", err)
		return
	}
	rec, err := checked.Parse(raw, ref.KeyID)
	if err != nil {
		c.fail(chk, checked.Artifact, "%v", err)
		return
	}
	if rec.Check.Valid != ref.Valid || rec.Check.Repeats != ref.Repeats {
		c.fail(chk, evidence.ReportJSON, "the report says the task check was valid=%v with %d repeats, the record says valid=%v with %d", ref.Valid, ref.Repeats, rec.Check.Valid, rec.Check.Repeats)
	}
	if err := checked.Hold(rec.Check, *cr, runBase(v.report.Commits)); err != nil && !hasBlocker(v.report, ctoharness.BlockTaskInvalid) {
		c.fail(chk, checked.Artifact, "the run required a task check that does not cover it, and was not refused: %v", err)
	}
}

func hasBlocker(r *ctoharness.Report, code ctoharness.BlockerCode) bool {
	return slices.ContainsFunc(r.Blockers, func(b ctoharness.Blocker) bool { return b.Code == code })
}
