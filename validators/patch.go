package validators

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"unicode"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/gitquote"
	"github.com/cto-harness/cto-harness/harness/reportmd"
	"github.com/cto-harness/cto-harness/harness/task"
)

// checkPatchRederived re-derives the change instead of trusting the files
// that describe it: the patch is recomputed from the baseline and result
// commits held in the harness's store (never the fixture, whose .git is
// Case's to write) and must equal patch.diff byte for byte; the
// changed files must equal the report's; every path the patch touches, in
// any header form git apply reads, must be a listed changed file.
func checkPatchRederived(v *runView, c collector) {
	const chk = "patch_rederived"
	f, err := os.Open(v.path(evidence.PatchFile))
	if err != nil {
		return // artifacts_present names a missing patch
	}
	defer f.Close()
	stored := sha256.New()
	paths, size, err := patchPaths(io.TeeReader(f, stored))
	if err != nil {
		c.fail(chk, evidence.PatchFile, "cannot read the patch: %v", err)
		return
	}
	listed := map[string]bool{}
	for _, f := range v.report.ChangedFiles {
		if name, ok := f.Name(); ok {
			listed[name] = true
		}
	}
	for _, p := range paths {
		if !listed[p] {
			c.fail(chk, evidence.PatchFile, "the patch touches %s, which changed_files does not list", display.Terminal(p))
		}
	}
	cm := v.report.Commits
	if cm.ResultCommit == "" || cm.BaselineCommit == "" {
		if v.report.Status == ctoharness.StatusPass {
			c.fail(chk, evidence.ReportJSON, "a passing run needs a baseline and a result commit to re-derive its patch from")
		}
		if size > 0 && cm.ResultCommit == "" && !blankPatch(v.path(evidence.PatchFile)) {
			c.fail(chk, evidence.PatchFile, "the run has no result commit, yet its patch is not empty")
		}
		return
	}
	storeDir := v.path(evidence.StoreDir)
	if _, err := os.Stat(storeDir); err != nil {
		if v.report.Status == ctoharness.StatusPass {
			c.fail(chk, evidence.ReportJSON, "the store %s the patch must be re-derived from is missing: %v", storeDir, err)
		}
		return
	}
	// The re-derived patch is hashed as it streams, never held whole.
	derived := sha256.New()
	re, err := fixture.Rederive(v.ctx, storeDir, cm.BaselineCommit, cm.ResultCommit, task.NewPathPolicy(v.report.AllowedPaths).Check, derived)
	if err != nil {
		c.fail(chk, evidence.ReportJSON, "cannot re-derive the change from the store: %v", err)
		return
	}
	if re.ResultTree != cm.ResultTree {
		c.fail(chk, evidence.ReportJSON, "the result commit's tree is %s, the report says %s", re.ResultTree, cm.ResultTree)
	}
	if !bytes.Equal(stored.Sum(nil), derived.Sum(nil)) && !redactedPatch(v, storeDir, size) {
		c.fail(chk, evidence.PatchFile, "patch.diff differs from the diff between the baseline %s and result %s commits in the store",
			short(cm.BaselineCommit), short(cm.ResultCommit))
	}
	if !reflect.DeepEqual(sortedChanges(re.Changed), sortedChanges(v.report.ChangedFiles)) {
		c.fail(chk, evidence.ReportJSON, "changed_files %s differ from the change held in the store %s",
			display.Terminal(fmt.Sprint(sortedChanges(v.report.ChangedFiles))), display.Terminal(fmt.Sprint(sortedChanges(re.Changed))))
	}
}

// maxRedactedPatch bounds the patch a validator compares in memory, which
// it does only when the stored patch differs from the re-derived one and
// the run had secrets to redact: a capped patch is at most
// fixture.MaxPatchBytes plus one file's diff and the headers.
const maxRedactedPatch = 64 << 20

// redactedPatch reports whether the stored patch is the re-derived one
// with the run's secrets redacted (see redactedFrom). Only then are both
// patches read into memory, and only up to maxRedactedPatch.
func redactedPatch(v *runView, storeDir string, size int64) bool {
	if v.report.Agent == nil || len(v.report.Agent.SecretEnv) == 0 || size > maxRedactedPatch {
		return false
	}
	stored, err := os.ReadFile(v.path(evidence.PatchFile))
	if err != nil {
		return false
	}
	cm := v.report.Commits
	derived := &limitedBuffer{max: maxRedactedPatch}
	if _, err := fixture.Rederive(v.ctx, storeDir, cm.BaselineCommit, cm.ResultCommit, task.NewPathPolicy(v.report.AllowedPaths).Check, derived); err != nil {
		return false
	}
	return redactedFrom(v.report, stored, derived.Bytes())
}

// limitedBuffer is a bytes.Buffer that refuses to grow past max.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, fmt.Errorf("over %d bytes", b.max)
	}
	return b.Buffer.Write(p)
}

// blankPatch reports whether the file holds only white space, read a
// buffer at a time.
func blankPatch(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		b, err := br.ReadByte()
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		if !unicode.IsSpace(rune(b)) {
			return false
		}
	}
}

// checkReportMarkdown regenerates report.md from report.json: the page a
// person reads must say what the checked report says.
func checkReportMarkdown(v *runView, c collector) {
	const chk = "report_markdown"
	md, err := os.ReadFile(v.path(evidence.ReportMD))
	if err != nil {
		return
	}
	rep := *v.report
	rep.ArtifactDigests = nil
	if !bytes.Equal(reportmd.Markdown(&rep), md) {
		c.fail(chk, evidence.ReportMD, "report.md is not the rendering of report.json")
	}
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func sortedChanges(in []ctoharness.ChangedFile) []ctoharness.ChangedFile {
	out := append([]ctoharness.ChangedFile{}, in...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// PatchPaths lists every path a patch names in a header git apply reads:
// "diff --git a/X b/Y", "--- X" and "+++ Y" (with or without the a/ b/
// prefixes), and the rename and copy headers, each plain or C-quoted. A hunk
// with a plain ---/+++ header and no diff --git line is still a change git
// apply makes. A quoted name git would not have written is listed as it
// stands, so that it matches no changed file.
func PatchPaths(patch []byte) []string {
	paths, _, _ := patchPaths(bytes.NewReader(patch)) // a bytes.Reader does not fail
	return paths
}

// maxHeaderLine is the longest patch line read whole: a header line is a
// path or two, C-quoted (PATH_MAX is 4096, quoted at most 4× that). A
// longer line is read in pieces, and only its first piece is looked at as a
// header; a header cut short names a path no changed file has, and fails.
const maxHeaderLine = 64 << 10

// patchPaths is PatchPaths over a stream, a line at a time, so that a
// patch of any size costs one buffer; it also returns the patch's size.
func patchPaths(r io.Reader) ([]string, int64, error) {
	seen := map[string]bool{}
	add := func(p string) {
		if p == "" || p == "/dev/null" {
			return
		}
		for _, pre := range []string{"a/", "b/"} {
			if q, ok := strings.CutPrefix(p, pre); ok {
				p = q
				break
			}
		}
		seen[p] = true
	}
	name := func(s string) {
		n, err := gitquote.Name(s)
		if err != nil {
			n = s
		}
		add(n)
	}
	br := bufio.NewReaderSize(r, maxHeaderLine)
	var size int64
	midLine := false // the previous piece did not end its line
	for {
		piece, err := br.ReadSlice('\n')
		size += int64(len(piece))
		if len(piece) > 0 && !midLine {
			line := strings.TrimSuffix(string(piece), "\n")
			switch {
			case strings.HasPrefix(line, "diff --git "):
				a, b, err := gitquote.DiffHeader(line)
				if err != nil {
					add(strings.TrimPrefix(line, "diff --git "))
					break
				}
				add(a)
				add(b)
			case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "):
				name(line[4:])
			case strings.HasPrefix(line, "rename from "), strings.HasPrefix(line, "copy from "):
				_, p, _ := strings.Cut(line, " from ")
				name(p)
			case strings.HasPrefix(line, "rename to "), strings.HasPrefix(line, "copy to "):
				_, p, _ := strings.Cut(line, " to ")
				name(p)
			}
		}
		midLine = errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !midLine {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, size, err
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, size, nil
}
