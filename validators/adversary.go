package validators

import (
	"encoding/json"
	"os"
	"slices"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/hidden"
	"github.com/cto-harness/cto-harness/schemas"
)

// checkAdversarial holds the adversarial record to itself and to the run:
// the archive holds exactly the files recorded, with their digest; each
// test's class follows from its outcome on the baseline and its verdict
// from its outcome on the result, as the step's rules say; the counts add
// up; a failed discriminating test is ADVERSARIAL_TESTS_FAILED and a step
// that could not finish is ADVERSARY_FAILED, and a pass has neither.
func checkAdversarial(v *runView, c collector) {
	const chk = "adversarial"
	a := v.report.Adversarial
	if a == nil {
		for _, name := range []string{evidence.AdversaryTar, evidence.AdversaryLog} {
			if v.files[name] {
				c.fail(chk, name, "the run holds %s and its report has no adversarial record", name)
			}
		}
		return
	}
	if (a.Problem != "") != hasBlocker(v.report, ctoharness.BlockAdversaryFailed) {
		c.fail(chk, evidence.ReportJSON, "the adversarial step's problem %q and its ADVERSARY_FAILED blocker disagree", a.Problem)
	}
	// An agent adversary's usage is the meter's account of the requests
	// kept beside it.
	if ag := a.Agent; ag != nil {
		switch lines, errText := readLines(v.path(ag.Requests)); {
		case ag.Requests == "" || !v.files[ag.Requests]:
			c.fail(chk, evidence.ReportJSON, "the adversary agent's model requests %q are not in the run", ag.Requests)
		case errText != "":
			c.fail(chk, ag.Requests, "%s", errText)
		case ag.Usage == nil || ag.Usage.Requests != len(lines):
			c.fail(chk, ag.Requests, "the adversary agent's usage counts %v requests, the file holds %d", ag.Usage, len(lines))
		}
	}
	// Generated tests run only once someone let them: --auto-confirm or a
	// person; a person who declined leaves the run without a verdict.
	if len(a.Tests) > 0 && a.Confirmed != ctoharness.ConfirmedAuto && a.Confirmed != ctoharness.ConfirmedTerminal {
		c.fail(chk, evidence.ReportJSON, "the adversary's tests ran and the record says nobody confirmed them (confirmed %q)", a.Confirmed)
	}
	if (a.Confirmed == ctoharness.ConfirmedDeclined) != hasBlocker(v.report, ctoharness.BlockAdversaryNotConfirmed) {
		c.fail(chk, evidence.ReportJSON, "the adversary's tests were recorded confirmed %q, and the ADVERSARY_NOT_CONFIRMED blocker disagrees", a.Confirmed)
	}
	if a.Archive != "" {
		f, err := os.Open(v.path(a.Archive))
		if err != nil {
			c.fail(chk, a.Archive, "the adversary's tests are recorded and their archive cannot be read: %v", err)
		} else {
			set, err := hidden.ReadArchive(f)
			f.Close()
			var paths []string
			for _, x := range set.Files {
				paths = append(paths, x.Path)
			}
			if err != nil || set.Digest != a.Digest || !slices.Equal(paths, a.Files) {
				c.fail(chk, a.Archive, "the archive holds %v (digest %s), the report records %v (digest %s) %v", paths, set.Digest, a.Files, a.Digest, err)
			}
		}
	} else if a.Problem == "" {
		c.fail(chk, evidence.ReportJSON, "the adversarial step finished and recorded no archive of the adversary's tests")
	}
	disc, failed := 0, 0
	for _, t := range a.Tests {
		want := ctoharness.AdversaryNotDiscriminating
		switch t.Baseline {
		case "error":
			want = ctoharness.AdversaryFailedImport
		case "fail":
			want = ctoharness.AdversaryDiscriminating
		}
		if t.Class != want {
			c.fail(chk, evidence.ReportJSON, "adversarial test %q was %s on the baseline, so it is %s, not %s", t.ID, t.Baseline, want, t.Class)
		}
		ok := true
		if t.Class == ctoharness.AdversaryDiscriminating {
			disc++
			ok = t.Result == "pass" || t.Result == "xfail"
			if !ok && a.ResultLog != "" {
				failed++
			}
		}
		if a.ResultLog != "" && t.OK != ok {
			c.fail(chk, evidence.ReportJSON, "adversarial test %q was %s on the result, and is recorded ok=%v", t.ID, t.Result, t.OK)
		}
	}
	if disc != a.Discriminating || failed != a.Failed {
		c.fail(chk, evidence.ReportJSON, "the record counts %d discriminating and %d failed tests; its tests say %d and %d", a.Discriminating, a.Failed, disc, failed)
	}
	if (a.Failed > 0) != hasBlocker(v.report, ctoharness.BlockAdversarialFailed) {
		c.fail(chk, evidence.ReportJSON, "%d adversarial tests failed on the result, and the blockers say %v", a.Failed, codesOf(v.report.Blockers))
	}
	if v.report.Status == ctoharness.StatusPass && (a.Problem != "" || a.Failed > 0 || (a.Discriminating > 0 && a.ResultLog == "")) {
		c.fail(chk, evidence.ReportJSON, "a passing run's adversarial step did not finish with every discriminating test passing on the result")
	}
	if a.ClaimsArtifact != "" {
		raw, err := os.ReadFile(v.path(a.ClaimsArtifact))
		var cl ctoharness.Claims
		switch {
		case err != nil:
			c.fail(chk, a.ClaimsArtifact, "the record names Case's claims, which cannot be read: %v", err)
		case v.set.Validator(schemas.Claims)(raw) != nil:
			c.fail(chk, a.ClaimsArtifact, "Case's claims as kept do not match their schema")
		case json.Unmarshal(raw, &cl) != nil || len(cl.Claims) != a.Claims:
			c.fail(chk, a.ClaimsArtifact, "the record counts %d claims, %s holds %d", a.Claims, a.ClaimsArtifact, len(cl.Claims))
		}
	} else if a.Claims != 0 || (a.ClaimsProblem == "" && a.Problem == "") {
		c.fail(chk, evidence.ReportJSON, "the record keeps no claims, and says neither why nor that the step stopped")
	}
	for _, name := range []string{a.Log, a.BaselineLog, a.ResultLog} {
		if name != "" && !v.files[name] {
			c.fail(chk, name, "the adversarial record names %s, which the run does not hold", name)
		}
	}
}
