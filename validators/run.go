package validators

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// RunOptions tune Run.
type RunOptions struct {
	ExpectPass bool // additionally require status pass
	// Trusted are the public keys an attestation is verified against;
	// RequireSignature makes an unsigned or unverifiable run invalid.
	Trusted          []attest.PublicKey
	RequireSignature bool
	// Relocated accepts a run directory that was moved from where it was
	// made: a worker's run unpacked by a batch coordinator on another
	// machine. The location check then only requires the directory to be
	// named after the run id; everything else, the signature included, holds.
	Relocated bool
}

// runCheck is one named check over a loaded run directory.
type runCheck struct {
	name string
	fn   func(v *runView, c collector)
}

// runChecks is every check, in the order they are reported.
func runChecks() []runCheck {
	return []runCheck{
		{"attestation", checkAttestation},
		{"report_checksum", checkReportChecksum},
		{"report_schema", checkReportSchema},
		{"run_location", checkRunLocation},
		{"artifacts_present", checkArtifactsPresent},
		{"artifact_digests", checkDigests},
		{"artifact_schemas", checkArtifactSchemas},
		{"event_chain", checkEventChain},
		{"event_order", checkEventOrder},
		{"case_event_grammar", checkCaseEvents},
		{"freshness", checkFreshness},
		{"source_non_mutation", checkNonMutation},
		{"fixture_clean_start", checkCleanStart},
		{"fixture_clean_end", checkCleanEnd},
		{"changed_files_allowed", checkChangedFiles},
		{"patch_rederived", checkPatchRederived},
		{"fixture_objects", checkFixtureObjects},
		{"report_markdown", checkReportMarkdown},
		{"task_contract", checkContract},
		{"trace_roots", checkTrace},
		{"sandbox_view", checkSandboxView},
		{"tests", checkTests},
		{"hidden_tests", checkHiddenTests},
		{"test_results", checkTestResults},
		{"task_criteria", checkCriteria},
		{"adversarial", checkAdversarial},
		{"network_egress", checkNetwork},
		{"status_consistent", checkStatus},
		{"report_page", checkReportPage},
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
	dir       string
	set       *schemas.Set
	opts      RunOptions
	reportRaw []byte
	report    *ctoharness.Report
	files     map[string]bool
	log       eventLog // the event log is streamed, never held (stream.go)
	eventsErr string
	ctx       context.Context
	// interrupted is set when a pass stopped because ctx was cancelled.
	interrupted bool
	trace       []ctoharness.TraceEntry
	traceErr    string
	sums        map[string]string // file digests, computed once for all checks
}

// Run validates one run directory. A well-formed blocked run is valid; with
// ExpectPass the run must also have passed.
func Run(ctx context.Context, dir string, set *schemas.Set, opts RunOptions) Result {
	res := Result{RunDir: dir, Checked: []string{}, Errors: []Finding{}}
	c := collector{&res}
	v := &runView{dir: dir, set: set, opts: opts, files: map[string]bool{}, ctx: ctx}
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
		if v.interrupted || ctx.Err() != nil {
			c.fail(rc.name, "", "%v before this check finished; the run directory was not fully checked", errInterrupted)
			break
		}
		if v.report == nil && rc.name != "attestation" && rc.name != "report_checksum" && rc.name != "report_schema" && rc.name != "artifacts_present" {
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

// sha256 returns a file's digest, hashing it once however many checks ask.
func (v *runView) sha256(name string) (string, error) {
	if s, ok := v.sums[name]; ok {
		return s, nil
	}
	s, err := evidence.FileSHA256(v.path(name))
	if err == nil {
		if v.sums == nil {
			v.sums = map[string]string{}
		}
		v.sums[name] = s
	}
	return s, err
}

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
	v.loadEvents()
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
