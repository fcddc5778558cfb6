package validators

import (
	"encoding/json"
	"os"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/step/hidden"
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
