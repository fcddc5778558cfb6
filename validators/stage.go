package validators

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/display"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/progress"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

// StageOptions configure a stage validation.
type StageOptions struct {
	RunsDir  string
	Schemas  *schemas.Set
	SelfExe  string
	Clock    func() time.Time
	HostEnv  func(string) string // the stage's runs see it, but for the gate variables
	Config   config.Config       // the user's config: its target and external roots are honoured too
	NewRunID func(stage int, now time.Time) string
	// Health runs the broader health check once the focused checks pass.
	Health func(ctx context.Context) (any, bool)
	// HarnessRoot holds docs/prd and docs/issues, which stage 3 requires; empty checks the copies built into the binary.
	HarnessRoot string
	// Signing signs the stage's runs and its record, and verifies them;
	// RequireSignature fails a stage whose evidence is not signed and verified.
	Signing          attest.Keys
	RequireSignature bool
	// Progress shows which part of the stage is running, and which row of
	// the failure matrix; nil shows nothing.
	Progress *progress.Line
}

// StageResult is the one JSON line a stage validator prints.
type StageResult struct {
	OK                         bool              `json:"ok"`
	Stage                      int               `json:"stage"`
	Checked                    []string          `json:"checked"`
	Errors                     []string          `json:"errors"`
	PassArtifactPath           string            `json:"pass_artifact_path"`
	FailureArtifactPaths       map[string]string `json:"failure_artifact_paths"`
	SourceNonMutationProofPath string            `json:"source_non_mutation_proof_path"`
	RecordPath                 string            `json:"record_path,omitempty"`
	Health                     any               `json:"health,omitempty"`
	// Signed: the pass run and the record are signed; KeyID: by which key;
	// SignatureOK: both verified against a trusted key.
	Signed      bool   `json:"signed"`
	KeyID       string `json:"key_id"`
	SignatureOK bool   `json:"signature_ok"`
	// MatrixReplayed: the failure matrix was replayed in full and recorded
	// as the latest replay, which supersedes the earlier ones (see
	// runlist.PruneMatrix).
	MatrixReplayed bool `json:"-"`
}

type stageRun struct {
	o   StageOptions
	res *StageResult
}

func (s *stageRun) check(name string) { s.res.Checked = append(s.res.Checked, name) }
func (s *stageRun) fail(format string, args ...any) {
	s.res.Errors = append(s.res.Errors, fmt.Sprintf(format, args...))
}
func (s *stageRun) failf(name string, err error) bool { s.fail("%s: %v", name, err); return false }

// Stage validates stage n of the ladder on the fake lane and, if every check
// passes, writes its validation record. Earlier stages whose records are
// missing are validated first; a stale or tampered earlier record is an error.
func Stage(ctx context.Context, n int, o StageOptions) StageResult {
	res := StageResult{Stage: n, Checked: []string{}, Errors: []string{}, FailureArtifactPaths: map[string]string{}}
	s := &stageRun{o: o, res: &res}
	if o.Clock == nil {
		s.o.Clock = time.Now
	}
	st, err := gates.Lookup(n)
	switch {
	case err != nil:
		s.fail("%v", err)
		return res
	case !st.Approved:
		s.fail("%s is not approved and cannot be validated", st)
		return res
	}
	// Without its governance documents stage 3 cannot validate, whatever
	// its runs show: say so at once rather than after the whole matrix.
	if n == 3 && !s.governance() {
		return res
	}
	if n >= 2 && !s.requirePrevious(ctx, n-1) {
		return res
	}
	if st.Backend == ctoharness.BackendCase {
		o.Progress.Step(fmt.Sprintf("stage %d: gate refusals", n))
		s.gateRefusals(ctx, n)
	}
	o.Progress.Step(fmt.Sprintf("stage %d: pass route", n))
	rep := s.passRoute(ctx, st)
	if rep != nil && n == 3 {
		s.compareWithStage2(rep)
		s.failureMatrix(ctx)
	}
	if len(res.Errors) == 0 && o.Health != nil {
		o.Progress.Step(fmt.Sprintf("stage %d: health check", n))
		s.check("health")
		h, ok := o.Health(ctx)
		res.Health = h
		if !ok {
			s.fail("health: the broader health check failed; run 'cto-harness health --json' for details")
		}
	}
	if len(res.Errors) == 0 && rep != nil {
		s.writeRecord(ctx, n, rep)
	}
	res.OK = len(res.Errors) == 0
	return res
}

func (s *stageRun) recordCheck() gates.RecordCheck {
	return gates.RecordCheck{Dir: harness.RecordsDir(s.o.RunsDir), RunsDir: s.o.RunsDir, ConfigFile: s.o.Config.Path, MaxAge: s.o.Config.MaxAge(), Now: s.o.Clock(),
		Validate: s.o.Schemas.Validator(schemas.StageRecord), VerifyRun: StageRunVerifier(s.o.Schemas)}
}

// requirePrevious makes sure stage n has a valid record, validating it first
// when the record is missing.
func (s *stageRun) requirePrevious(ctx context.Context, n int) bool {
	name := fmt.Sprintf("stage_%d_validated", n)
	s.check(name)
	rec, err := s.recordCheck().Verify(ctx, n)
	if err == nil {
		err = gates.CheckRecordTrust(ctx, s.recordCheck().Dir, &rec, s.o.Signing)
	}
	if err == nil {
		return true
	}
	if b := ctoharness.AsBlocker(err, ctoharness.StepGate); b.Code != ctoharness.BlockPrevStageMissing {
		s.fail("%s: %s: %s", name, b.Code, b.Message)
		return false
	}
	prev := Stage(ctx, n, StageOptions{RunsDir: s.o.RunsDir, Schemas: s.o.Schemas, SelfExe: s.o.SelfExe, Clock: s.o.Clock,
		HostEnv: s.o.HostEnv, Config: s.o.Config, NewRunID: s.o.NewRunID, HarnessRoot: s.o.HarnessRoot, Signing: s.o.Signing,
		RequireSignature: s.o.RequireSignature, Progress: s.o.Progress})
	if !prev.OK {
		for _, e := range prev.Errors {
			s.fail("%s: %s", name, e)
		}
		return false
	}
	return true
}

// gateEnv is the environment a matrix row hands a run: the two gate
// variables as given, PATH from the host, nothing else.
func gateEnv(host func(string) string, allow, stage string) func(string) string {
	return func(k string) string {
		switch k {
		case gates.EnvAllowCase:
			return allow
		case gates.EnvCaseStage:
			return stage
		case "PATH":
			if host != nil {
				return host("PATH")
			}
		}
		return ""
	}
}

// env is what a stage's run sees: the gate variables as the case sets
// them, and otherwise the host's environment, because the runs use the
// user's config and it draws on that environment (caches.go asks the
// host's go where its caches are, which go answers from HOME or GOCACHE;
// an env entry without a value is copied from it). The matrix rows run
// with configs of their own and keep gateEnv.
func (s *stageRun) env(allow, stage string) func(string) string {
	gate := gateEnv(s.o.HostEnv, allow, stage)
	return func(k string) string {
		if k == gates.EnvAllowCase || k == gates.EnvCaseStage || s.o.HostEnv == nil {
			return gate(k)
		}
		return s.o.HostEnv(k)
	}
}

// sourceFor materializes the stage's source and the config that owns it. A
// decoy Target Repository is materialized too and listed as a target root, so
// the trace check proves the harness never looked at it.
func (s *stageRun) sourceFor(ctx context.Context, st gates.Stage) (string, config.Config, *task.Spec, error) {
	cfg := s.o.Config
	base := filepath.Join(s.o.RunsDir, "sources")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", cfg, nil, err
	}
	dir, err := os.MkdirTemp(base, fmt.Sprintf("stage%d-", st.N))
	if err != nil {
		return "", cfg, nil, err
	}
	decoy := filepath.Join(dir, "target-repository")
	if err := materialize(ctx, fixtures.SampleOwned, decoy, s.o.Clock()); err != nil {
		return "", cfg, nil, err
	}
	cfg.TargetRoots = append(append([]string{}, cfg.TargetRoots...), decoy)
	if st.Fixture != gates.FixtureOwnedRepo {
		return "", cfg, nil, nil
	}
	src := filepath.Join(dir, "owned-source")
	if err := materialize(ctx, fixtures.SampleOwned, src, s.o.Clock()); err != nil {
		return "", cfg, nil, err
	}
	cfg.OwnedSources = append(append([]string{}, cfg.OwnedSources...), src)
	data, err := fixtures.TaskSpec(fixtures.SampleOwned)
	if err != nil {
		return "", cfg, nil, err
	}
	spec, err := task.Parse(data, "embedded sample task", s.o.Schemas.Validator(schemas.TaskSpec))
	return src, cfg, &spec, err
}

func materialize(ctx context.Context, name, dst string, when time.Time) error {
	archive, err := fixtures.Archive(name)
	if err != nil {
		return err
	}
	_, err = fixtures.Materialize(ctx, archive, dst, when.UTC().Truncate(time.Second))
	return err
}

func (s *stageRun) runOptions(n int, src string, cfg config.Config, spec *task.Spec, getenv func(string) string) harness.Options {
	return harness.Options{Stage: n, Source: src, Spec: spec, Lane: ctoharness.LaneFake, RunsDir: s.o.RunsDir, Config: cfg,
		Getenv: getenv, SelfExe: s.o.SelfExe, Schemas: s.o.Schemas, Clock: s.o.Clock, NewRunID: s.o.NewRunID,
		VerifyRun: StageRunVerifier(s.o.Schemas), Signing: s.o.Signing}
}

// gateRefusals proves that a missing or wrong gate blocks before any Case
// process starts, and that the blocked run is still well-formed evidence.
func (s *stageRun) gateRefusals(ctx context.Context, n int) {
	other := strconv.Itoa(n - 1)
	cases := []struct {
		name  string
		env   func(string) string
		codes []ctoharness.BlockerCode
	}{
		{"gate_allow_case_missing", s.env("", strconv.Itoa(n)), []ctoharness.BlockerCode{ctoharness.BlockAllowCaseMissing}},
		{"gate_case_stage_missing", s.env("1", ""), []ctoharness.BlockerCode{ctoharness.BlockCaseStageMissing}},
		{"gate_case_stage_mismatch", s.env("1", other), []ctoharness.BlockerCode{ctoharness.BlockCaseStageMismatch}},
	}
	st, _ := gates.Lookup(n)
	for _, tc := range cases {
		s.check(tc.name)
		src, cfg, spec, err := s.sourceFor(ctx, st)
		if err != nil {
			s.failf(tc.name, err)
			continue
		}
		rep, err := harness.Run(ctx, s.runOptions(n, src, cfg, spec, tc.env))
		if err != nil {
			s.failf(tc.name, err)
			continue
		}
		s.res.FailureArtifactPaths[tc.name] = rep.RunArtifactDir
		if rep.CaseProcessStarted || rep.Status == ctoharness.StatusPass {
			s.fail("%s: the run was not blocked before case_process_started (status %s)", tc.name, rep.Status)
		}
		if got := codesOf(rep.Blockers); !reflect.DeepEqual(got, sortedCodes(tc.codes)) {
			s.fail("%s: blockers %v, want exactly %v", tc.name, got, sortedCodes(tc.codes))
		}
		if v := Run(ctx, rep.RunArtifactDir, s.o.Schemas, s.runValidation(false)); !v.OK {
			s.fail("%s: the blocked run's evidence does not validate: %v", tc.name, v.Errors)
		}
	}
}

func codesOf(bs []ctoharness.Blocker) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, string(b.Code))
	}
	sort.Strings(out)
	return out
}

func sortedCodes(cs []ctoharness.BlockerCode) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, string(c))
	}
	sort.Strings(out)
	return out
}

func (s *stageRun) passRoute(ctx context.Context, st gates.Stage) *ctoharness.Report {
	name := "pass_route"
	s.check(name)
	src, cfg, spec, err := s.sourceFor(ctx, st)
	if err != nil {
		s.failf(name, err)
		return nil
	}
	rep, err := harness.Run(ctx, s.runOptions(st.N, src, cfg, spec, s.env("1", strconv.Itoa(st.N))))
	if err != nil {
		s.failf(name, err)
		return nil
	}
	s.res.PassArtifactPath = rep.RunArtifactDir
	if rep.SourceNonMutation.Checked {
		s.res.SourceNonMutationProofPath = filepath.Join(rep.RunArtifactDir, rep.SourceNonMutation.ProofPath)
	}
	if rep.Status != ctoharness.StatusPass {
		s.fail("%s: status %s with blockers %v; see %s", name, rep.Status, rep.Blockers, rep.RunArtifactDir)
		return nil
	}
	s.check("pass_route_evidence")
	v := Run(ctx, rep.RunArtifactDir, s.o.Schemas, s.runValidation(true))
	s.res.Signed, s.res.KeyID, s.res.SignatureOK = v.Signed, v.KeyID, v.SignatureOK
	for _, f := range v.Errors {
		s.fail("pass_route_evidence: %s", f)
	}
	if !rep.Qualifies {
		s.fail("%s: the pass run does not qualify as stage evidence (fault injection or a non-default scenario)", name)
	}
	s.check("source_not_mutated")
	if rep.SourceRepositoryMutated || !rep.SourceNonMutation.Checked {
		s.fail("source_not_mutated: the pass route did not prove the source unchanged")
	}
	if st.Backend == ctoharness.BackendCase && rep.CaseLane != ctoharness.LaneFake {
		s.fail("%s: lane %s, stage validation uses the fake lane", name, rep.CaseLane)
	}
	if !v.OK {
		return nil
	}
	return rep
}

// compareWithStage2 holds the stage 3 pass run to the shape stage 2 proved.
func (s *stageRun) compareWithStage2(rep3 *ctoharness.Report) {
	const name = "stage2_expectations"
	s.check(name)
	rec, err := s.recordCheck().Verify(context.Background(), 2)
	if err != nil {
		s.failf(name, err)
		return
	}
	raw, err := os.ReadFile(filepath.Join(rec.RunDir, evidence.ReportJSON))
	if err != nil {
		s.failf(name, err)
		return
	}
	var rep2 ctoharness.Report
	if err := json.Unmarshal(raw, &rep2); err != nil {
		s.failf(name, err)
		return
	}
	raw3, _ := json.Marshal(rep3)
	if a, b := keysOf(raw), keysOf(raw3); !reflect.DeepEqual(a, b) {
		s.fail("%s: report shape differs: stage 2 %v, stage 3 %v", name, a, b)
	}
	if !reflect.DeepEqual(ExpectedEvents(2), ExpectedEvents(3)) {
		s.fail("%s: stage 3's event order differs from stage 2's", name)
	}
	if rep2.Backend != rep3.Backend || rep2.CaseLane != rep3.CaseLane || rep2.SchemaVersion != rep3.SchemaVersion {
		s.fail("%s: backend/lane/schema %s/%s/%s differ from stage 2's %s/%s/%s", name, rep3.Backend, rep3.CaseLane,
			rep3.SchemaVersion, rep2.Backend, rep2.CaseLane, rep2.SchemaVersion)
	}
	if rep2.Tests.Classification != rep3.Tests.Classification || len(rep3.Blockers) != len(rep2.Blockers) {
		s.fail("%s: tests %s / blockers %d differ from stage 2's %s / %d", name, rep3.Tests.Classification, len(rep3.Blockers),
			rep2.Tests.Classification, len(rep2.Blockers))
	}
	if a, b := routeArtifacts(&rep2), routeArtifacts(rep3); !reflect.DeepEqual(a, b) {
		s.fail("%s: artifact set differs: stage 2 %v, stage 3 %v", name, a, b)
	}
	for _, c := range rep3.ChangedFiles {
		if !c.Allowed {
			s.fail("%s: stage 3 changed %s outside its allowed paths", name, display.Terminal(c.Path))
		}
	}
	// The run came after the record if its gate read that very record:
	// the gate event (signed with the run) names the record by its digest,
	// and the record names its own run. Two processes' wall clocks are not
	// compared: a clock stepped back between them says nothing.
	trusted, err := gateRecord(rep3.RunArtifactDir)
	switch {
	case err != nil:
		s.fail("%s: %v", name, err)
	case trusted.RunID != rec.RunID || trusted.RecordDigest != rec.RecordDigest:
		s.fail("%s: the stage 3 run's gate trusted stage %d record %s (run %s), not the current stage 2 record %s (run %s): stage 2 was validated again after the run, or the run is older than the record; run 'cto-harness validate-stage 3' again",
			name, trusted.Stage, trusted.RecordDigest, trusted.RunID, rec.RecordDigest, rec.RunID)
	case trusted.Stage != 2:
		s.fail("%s: the stage 3 run's gate names a stage %d record, want stage 2", name, trusted.Stage)
	}
}

// gatedRecord is the previous stage's record as a run's gate_checked event
// names it.
type gatedRecord struct {
	Stage        int    `json:"stage"`
	RunID        string `json:"run_id"`
	RecordDigest string `json:"record_digest"`
}

// gateRecord reads the record a run's gate trusted from its events.
func gateRecord(runDir string) (gatedRecord, error) {
	lines, errText := readLines(filepath.Join(runDir, evidence.EventsFile))
	if errText != "" {
		return gatedRecord{}, fmt.Errorf("%s: %s", evidence.EventsFile, errText)
	}
	for _, l := range lines {
		var e struct {
			Type ctoharness.EventType `json:"type"`
			Data struct {
				Previous *gatedRecord `json:"previous_stage_record"`
			} `json:"data"`
		}
		if json.Unmarshal(l, &e) != nil || e.Type != ctoharness.EvGateChecked {
			continue
		}
		if e.Data.Previous == nil || e.Data.Previous.RecordDigest == "" {
			return gatedRecord{}, fmt.Errorf("the run's %s event in %s names no previous stage record", ctoharness.EvGateChecked, runDir)
		}
		return *e.Data.Previous, nil
	}
	return gatedRecord{}, fmt.Errorf("the run %s has no %s event", runDir, ctoharness.EvGateChecked)
}

func keysOf(raw []byte) []string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return mapKeys(m)
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *stageRun) writeRecord(ctx context.Context, n int, rep *ctoharness.Report) {
	s.check("record_written")
	sum, err := evidence.FileSHA256(filepath.Join(rep.RunArtifactDir, evidence.ReportJSON))
	if err != nil {
		s.failf("record_written", err)
		return
	}
	runs, err := filepath.Abs(s.o.RunsDir)
	if err != nil {
		s.failf("record_written", err)
		return
	}
	rec := gates.Record{SchemaVersion: ctoharness.SchemaVersion, Stage: n, RunID: rep.RunID, RunDir: rep.RunArtifactDir, RunsDir: runs,
		ReportSHA256: sum, ValidatedAt: s.o.Clock().UTC(), HarnessVersion: ctoharness.Version, Checked: append([]string{}, s.res.Checked...)}
	rec.Seal()
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		s.failf("record_written", err)
		return
	}
	if err := s.o.Schemas.Validate(schemas.StageRecord, data); err != nil {
		s.failf("record_written", err)
		return
	}
	p := gates.RecordPath(harness.RecordsDir(s.o.RunsDir), n)
	if err := evidence.MkdirDurable(filepath.Dir(p)); err != nil {
		s.failf("record_written", err)
		return
	}
	// Durable before the signature that covers it and the gate that trusts it.
	if err := evidence.WriteDurable(p, append(data, '\n'), 0o644); err != nil {
		s.failf("record_written", err)
		return
	}
	s.res.RecordPath = p
	s.signRecord(ctx, rec, p)
}

// failureMatrix replays every row of the failure matrix; each must fail
// closed exactly as the matrix says. Rows run side by side, as many as
// the machine has cores (matrixJobs), each in a folder and runs directory
// of its own; a row that needs process-wide state (a secret only the
// harness's environment holds) runs alone. Results are reported in the
// matrix's order.
func (s *stageRun) failureMatrix(ctx context.Context) {
	rows, err := fixtures.Matrix()
	if err != nil {
		s.check("failure_matrix")
		s.failf("failure_matrix", err)
		return
	}
	started := s.o.Clock()
	results := s.replayRows(ctx, rows)
	var folders []string
	for i, row := range rows {
		name := "fixture:" + row.Name
		s.check(name)
		r := results[i]
		if r.RunDir != "" {
			s.res.FailureArtifactPaths[row.Name] = r.RunDir
		}
		if r.Folder != "" {
			folders = append(folders, filepath.Base(r.Folder))
		}
		for _, e := range r.Errors {
			s.fail("%s: %s", name, e)
		}
	}
	if ctx.Err() != nil {
		return // an interrupted replay supersedes nothing
	}
	if err := runlist.WriteLatestReplay(s.o.RunsDir, runlist.LatestReplay{ReplayedAt: started.UTC(), Folders: folders}); err != nil {
		s.failf("failure_matrix", err)
		return
	}
	s.res.MatrixReplayed = true
}

// matrixJobs is how many rows replay at once: two per core, at most 16.
// Each row is a whole run, sandbox and verification included, and it is
// on a processor only part of its time: it waits on fsync, on the sleeps
// of a timeout or a stalled model, on its child processes' start. One row
// at a time takes about 1.6 times the processor time it uses.
func matrixJobs() int {
	return max(2, min(2*runtime.NumCPU(), 16))
}

// replayRows replays the matrix for the stage, showing each row as it ends.
func (s *stageRun) replayRows(ctx context.Context, rows []fixtures.Row) []RowResult {
	return ReplayAll(ctx, rows, ReplayOptions{RunsDir: s.o.RunsDir, Schemas: s.o.Schemas, SelfExe: s.o.SelfExe,
		HostEnv: s.o.HostEnv, Clock: s.o.Clock, Signing: s.o.Signing}, func(done int, row fixtures.Row) {
		s.o.Progress.Item("stage 3: failure matrix", done, len(rows), row.Name)
	})
}

// ReplayAll replays rows, matrixJobs at a time, and returns their results
// in rows' order. A row that sets process-wide state runs alone, before the
// others start; slow rows start first (fixtures.ReplayOrder). The rows
// share what the trials of a batch share (rowShare). ended, when set, is
// called (one call at a time) as each row ends, with how many have.
func ReplayAll(ctx context.Context, rows []fixtures.Row, o ReplayOptions, ended func(done int, row fixtures.Row)) []RowResult {
	results := make([]RowResult, len(rows))
	o = o.share()
	var mu sync.Mutex
	done := 0
	replay := func(i int) {
		r := Replay(ctx, rows[i], o)
		mu.Lock()
		defer mu.Unlock()
		results[i] = r
		done++
		if ended != nil {
			ended(done, rows[i])
		}
	}
	order := fixtures.ReplayOrder(rows)
	for len(order) > 0 && rows[order[0]].ProcessWide() {
		replay(order[0])
		order = order[1:]
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range matrixJobs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				replay(i)
			}
		}()
	}
	for _, i := range order {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// routeArtifacts are the artifacts of a run that its route makes: every
// one, less the kept build cache's warm-up log of a run whose report
// records the kept cache (the config's caches.go, which stage 3 reads and
// the artificial stage 2 source may not use).
func routeArtifacts(rep *ctoharness.Report) []string {
	names := mapKeys(rep.ArtifactDigests)
	if rep.Sandbox.KeptBuildCache != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return n == evidence.WarmUpLog })
	}
	return names
}
