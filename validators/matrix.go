package validators

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/snapshot"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/step/adversary"
	"github.com/cto-harness/cto-harness/harness/store"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/schemas"
)

// ReplayOptions configure failure-row replays.
type ReplayOptions struct {
	RunsDir string // holds the validated stage records; each row gets its own directory under matrix/
	Schemas *schemas.Set
	SelfExe string
	HostEnv func(string) string
	Clock   func() time.Time
	// Harness, when set, adjusts the harness options of every row; tests use
	// it to break a check on purpose.
	Harness func(*harness.Options)
	// Keep leaves the row's sources and workspace behind; by default only the
	// row's runs directory is kept. It also marks the row's folder kept
	// (runlist.KeptMarker), so that pruning leaves it.
	Keep bool
	// Signing signs the rows' runs and verifies them; the stage 2 record's
	// signature is copied with the record.
	Signing attest.Keys

	// shared is what the rows of one ReplayAll share; nil for one row.
	shared *rowShare
}

// rowShare is what the rows of one replay share, as the trials of a batch
// do (docs/batch.md): one sandbox probe, the view trials of each view
// shape (with the row's folder taken out of the shape, as the run id is),
// and the check of the stage-2 run behind every row's gate, done again
// whenever that run's directory changed. Each row's run still proves
// everything else on its own.
type rowShare struct {
	probe  func() sandbox.Facts
	trials *sandbox.Trials
	verify RunVerifier
}

// share returns o with a rowShare for a replay of many rows.
func (o ReplayOptions) share() ReplayOptions {
	o.shared = &rowShare{probe: sandbox.Reuse(o.SelfExe), trials: sandbox.NewTrials(),
		verify: RememberStageRuns(StageRunVerifier(o.Schemas))}
	return o
}

// verifier is the gate's check of the stage-2 run for a row's runs.
func (o ReplayOptions) verifier() RunVerifier {
	if o.shared != nil {
		return o.shared.verify
	}
	return StageRunVerifier(o.Schemas)
}

// RowResult is the outcome of one replay: expected against actual.
type RowResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	RunDir string `json:"run_dir"`
	// Folder is the row's own directory, RUNS_DIR/matrix/<row>-<number>.
	Folder             string   `json:"-"`
	ExpectedBlockers   []string `json:"expected_blockers"`
	ActualBlockers     []string `json:"actual_blockers"`
	ExpectedLastEvent  string   `json:"expected_last_event"`
	ActualLastEvent    string   `json:"actual_last_event"`
	CaseProcessStarted bool     `json:"case_process_started"`
	Status             string   `json:"status"`
	SourceUnchanged    bool     `json:"source_unchanged"`
	EvidenceValid      bool     `json:"evidence_valid"`
	Errors             []string `json:"errors"`
	// Took is how long the replay took, set-up and checks included.
	Took time.Duration `json:"-"`
}

func (r *RowResult) fail(format string, args ...any) {
	r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
}

// EnsureStage2 validates stage 2 in runsDir unless its record is already valid.
func EnsureStage2(ctx context.Context, o StageOptions) error {
	s := &stageRun{o: o, res: &StageResult{FailureArtifactPaths: map[string]string{}}}
	if s.o.Clock == nil {
		s.o.Clock = time.Now
	}
	if !s.requirePrevious(ctx, 2) {
		return fmt.Errorf("stage 2 is not validated: %s", strings.Join(s.res.Errors, "; "))
	}
	return nil
}

// Replay runs one failure row in a directory of its own and checks that it
// failed closed exactly as the matrix says: the expected blockers and no
// others, the expected last step, no Case process where none may start, the
// source unchanged (unless the row changes it on purpose), and evidence that
// validates as a well-formed blocked run.
func Replay(ctx context.Context, row fixtures.Row, o ReplayOptions) (res RowResult) {
	res = RowResult{Name: row.Name, ExpectedBlockers: sortedStrings(row.ExpectedBlockers), ExpectedLastEvent: row.ExpectedLastEvent,
		ActualBlockers: []string{}, Errors: []string{}}
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	if o.Clock == nil {
		o.Clock = time.Now
	}
	base := filepath.Join(o.RunsDir, "matrix")
	if err := os.MkdirAll(base, 0o755); err != nil {
		res.fail("%v", err)
		return res
	}
	work, err := os.MkdirTemp(base, row.Name+"-")
	if err != nil {
		res.fail("%v", err)
		return res
	}
	res.Folder = work
	// Held while the row runs, so that pruning leaves it and its mounts.
	release, err := runlist.Hold(work)
	if err != nil {
		res.fail("set-up: %v", err)
		return res
	}
	defer release()
	if o.Keep {
		if err := os.WriteFile(filepath.Join(work, runlist.KeptMarker), []byte("kept by 'fixtures replay --keep': pruning leaves this folder; remove it by hand\n"), 0o644); err != nil {
			res.fail("set-up: %v", err)
			return res
		}
	}
	att, err := newAttack(row)
	if err != nil {
		res.fail("set-up: %v", err)
		return res
	}
	defer att.close()
	model, err := startModel(row.Setup)
	if err != nil {
		res.fail("set-up: %v", err)
		return res
	}
	defer model.close()
	opts, src, err := prepareRow(ctx, row, o, work, att)
	model.apply(row.Setup, &opts)
	if err == nil && row.Setup.Source != "target" && !row.SourceChanges {
		err = att.plantView(work, src, &opts)
	}
	if err == nil {
		err = att.plantHost(work, &opts)
	}
	if err != nil {
		res.fail("set-up: %v", err)
		return res
	}
	var before *ctoharness.SourceProof
	var beforeTree string
	// A source under a Target Repository root is not proven here either: the
	// run's trace is what shows nothing under it was touched.
	if row.Setup.Source != "target" {
		// The row's own proof of the source, independent of the harness's.
		// A repository state the proof refuses (a row that sets one up) is
		// checked byte for byte instead, .git included.
		repo := rowRepo(src)
		p, err := source.Prove(ctx, repo, source.ProofOptions{RunID: "matrix", Kind: source.KindBefore, Now: o.Clock()}, nil)
		switch {
		case err == nil:
			before = &p
		case row.Setup.SourceGitConfig != "":
			if beforeTree, err = treeDigest(src); err != nil {
				res.fail("set-up: digest the source: %v", err)
				return res
			}
		default:
			res.fail("set-up: prove the source: %v", err)
			return res
		}
	}
	rep, runErr := harness.Run(ctx, opts)
	if rep == nil {
		res.fail("the run did not start: %v", runErr)
		return res
	}
	res.RunDir = rep.RunArtifactDir
	res.Status = string(rep.Status)
	res.CaseProcessStarted = rep.CaseProcessStarted
	res.ActualBlockers = codesOf(rep.Blockers)
	res.ActualBlockers = uniq(res.ActualBlockers)
	res.ActualLastEvent = lastStepEvent(rep.RunArtifactDir)
	switch {
	case row.ExpectedStatus == "pass" && rep.Status != ctoharness.StatusPass:
		res.fail("status %s; this row's attack must be refused while the run completes", rep.Status)
	case row.ExpectedStatus != "pass" && rep.Status == ctoharness.StatusPass:
		res.fail("the row passed; it must fail closed")
	}
	if row.ExpectDenied {
		att.checkDenied(rep.RunArtifactDir, &res)
	}
	att.net.check(rep.RunArtifactDir, row, &res)
	checkCommands(row, rep, &res)
	checkArtifacts(rep.RunArtifactDir, row.ExpectArtifacts, &res)
	att.checkAfter(rep, &res)
	att.checkView(rep.RunArtifactDir, src, &res)
	att.checkHost(rep.RunArtifactDir, &res)
	checkSpaceGivenBack(row, rep, &res)
	if row.Setup.ClockStepMs != 0 && len(rep.Freshness.ClockJumps) == 0 {
		res.fail("the wall clock stepped by %d ms and the report records no clock jump", row.Setup.ClockStepMs)
	}
	if !reflect.DeepEqual(res.ActualBlockers, res.ExpectedBlockers) {
		var said []string
		for _, b := range rep.Blockers {
			if !slices.Contains(res.ExpectedBlockers, string(b.Code)) {
				said = append(said, fmt.Sprintf("%s at %s: %s", b.Code, b.Step, b.Message))
			}
		}
		res.fail("blockers %v, expected exactly %v (unexpected: %s)", res.ActualBlockers, res.ExpectedBlockers, strings.Join(said, "; "))
		if tail := logTail(filepath.Join(rep.RunArtifactDir, evidence.TestLog), 20); tail != "" {
			res.fail("the end of %s: %s", evidence.TestLog, tail)
		}
	}
	if res.ActualLastEvent != row.ExpectedLastEvent {
		res.fail("last step event %q, expected %q", res.ActualLastEvent, row.ExpectedLastEvent)
	}
	if rep.CaseProcessStarted && !row.CaseProcessStarted {
		res.fail("a Case process started, which this row forbids")
	}
	if before != nil {
		repo := rowRepo(src)
		after, err := source.Prove(ctx, repo, source.ProofOptions{RunID: "matrix", Kind: source.KindAfter, Now: o.Clock()}, nil)
		res.SourceUnchanged = err == nil && !source.Compare("matrix", *before, after).Mutated
		if !res.SourceUnchanged && !row.SourceChanges {
			res.fail("the source changed during the row")
		}
	}
	if beforeTree != "" {
		after, err := treeDigest(src)
		res.SourceUnchanged = err == nil && after == beforeTree
		if !res.SourceUnchanged && !row.SourceChanges {
			res.fail("the source changed during the row (file tree digest)")
		}
	}
	// Signed by default: a run that could be signed must be, and verify.
	canSign := opts.Signing.Signer != nil && !opts.Unsandboxed
	v := Run(ctx, rep.RunArtifactDir, o.Schemas, RunOptions{Trusted: opts.Signing.Trusted, RequireSignature: canSign})
	if opts.Signing.Signer != nil && opts.Unsandboxed && (rep.Signed || !strings.Contains(rep.UnsignedReason, "--unsandboxed")) {
		res.fail("an unsandboxed run, in which Case could read the signing key, is signed=%v with unsigned_reason %q", rep.Signed, rep.UnsignedReason)
	}
	res.EvidenceValid = v.OK
	if !v.OK {
		for _, f := range v.Errors {
			res.fail("evidence: %s", f)
		}
	}
	if runErr != nil {
		res.fail("evidence incomplete: %v", runErr)
	}
	if !o.Keep {
		clearRow(work, opts.RunsDir)
	}
	// The result names the evidence: it must outlast the clean-up.
	if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, evidence.ReportJSON)); err != nil {
		res.fail("the run's evidence is gone after the row's clean-up: %v", err)
	}
	res.OK = len(res.Errors) == 0
	return res
}

// clearRow removes a row's sources and its runs' workspace, keeping its runs
// directory whole: the evidence the replay names lives there, and a row may
// put that directory inside one of the sources' directories (beside the
// source, as runs-dir-beside-source does).
func clearRow(work, runs string) {
	for _, d := range []string{"owned", "targets", "elsewhere"} {
		removeAllBut(filepath.Join(work, d), runs)
	}
	_ = os.RemoveAll(filepath.Join(runs, runlist.WorkDir))
}

// removeAllBut removes dir, or, when keep lies inside it, everything in it
// but the path down to keep.
func removeAllBut(dir, keep string) {
	rel, err := filepath.Rel(dir, keep)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		_ = os.RemoveAll(dir)
		return
	}
	if rel == "." {
		return
	}
	next, _, _ := strings.Cut(rel, string(filepath.Separator))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == next {
			removeAllBut(filepath.Join(dir, next), keep)
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// maxExpectRead bounds what checkArtifacts reads of one artifact: the
// artifacts it looks into are capped well below it.
const maxExpectRead = 64 << 20

// checkArtifacts holds the run's artifacts to the row's requirements.
func checkArtifacts(runDir string, want []fixtures.ArtifactExpect, res *RowResult) {
	for _, w := range want {
		p := filepath.Join(runDir, filepath.FromSlash(w.Artifact))
		fi, err := os.Stat(p)
		if err != nil {
			res.fail("artifact %s: %v", w.Artifact, err)
			continue
		}
		if w.MaxBytes > 0 && fi.Size() > w.MaxBytes {
			res.fail("artifact %s is %d bytes, over the row's %d", w.Artifact, fi.Size(), w.MaxBytes)
		}
		if w.Contains == "" {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			res.fail("artifact %s: %v", w.Artifact, err)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(f, maxExpectRead))
		f.Close()
		if err != nil {
			res.fail("artifact %s: %v", w.Artifact, err)
			continue
		}
		if !bytes.Contains(data, []byte(w.Contains)) {
			res.fail("artifact %s does not hold %q", w.Artifact, w.Contains)
		}
	}
}

func uniq(s []string) []string {
	out := []string{}
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func sortedStrings(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

// lastStepEvent is the last harness event before run_finished, skipping
// run_blocked and Case's own events.
func lastStepEvent(runDir string) string {
	lines, errText := readLines(filepath.Join(runDir, evidence.EventsFile))
	if errText != "" {
		return ""
	}
	last := ""
	for _, l := range lines {
		var e ctoharness.Event
		if json.Unmarshal(l, &e) != nil {
			return ""
		}
		if e.Type == ctoharness.EvRunBlocked || e.Type == ctoharness.EvRunFinished || strings.HasPrefix(string(e.Type), "case.") {
			continue
		}
		last = string(e.Type)
	}
	return last
}

// rowSource is where the row's source lives for its kind, and the config
// that owns (or does not own) it.
// rowHiddenTests writes a row's hidden test files into a directory inside
// a configured read path of the view, so that only the harness hiding
// them keeps them from Case. It returns the directory ("" without files).
func rowHiddenTests(work string, files map[string]string, cfg *config.Config) (string, error) {
	if len(files) == 0 {
		return "", nil
	}
	return rowShared(work, "hidden", files, cfg)
}

// rowShared writes files into DIR/shared/name, a directory under a read
// path every sandboxed command's view shows (the config's), and returns it.
func rowShared(work, name string, files map[string]string, cfg *config.Config) (string, error) {
	shared := filepath.Join(work, "shared")
	dir := filepath.Join(shared, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if cfg.Sandbox == nil {
		cfg.Sandbox = &config.Sandbox{}
	}
	if !slices.Contains(cfg.Sandbox.ViewPaths.ReadPaths, shared) {
		cfg.Sandbox.ViewPaths.ReadPaths = append(cfg.Sandbox.ViewPaths.ReadPaths, shared)
	}
	return dir, nil
}

func rowSource(work, kind string) (string, config.Config, error) {
	cfg := config.Config{}
	switch kind {
	case "target":
		cfg.TargetRoots = []string{filepath.Join(work, "targets")}
		cfg.OwnedSources = []string{filepath.Join(work, "owned")}
		return filepath.Join(work, "targets", "sample"), cfg, nil
	case "not_owned":
		cfg.OwnedSources = []string{filepath.Join(work, "owned")}
		return filepath.Join(work, "elsewhere", "sample"), cfg, nil
	case "":
		cfg.OwnedSources = []string{filepath.Join(work, "owned")}
		cfg.TargetRoots = []string{filepath.Join(work, "targets")}
		return filepath.Join(work, "owned", "sample"), cfg, nil
	}
	return "", cfg, fmt.Errorf("unknown source kind %q", kind)
}

// prepareRow builds the row's world inside work: the stage records, the
// source, the config, and the harness options.
func prepareRow(ctx context.Context, row fixtures.Row, o ReplayOptions, work string, att *attack) (harness.Options, string, error) {
	st := row.Setup
	stage := st.Stage
	if stage == 0 {
		stage = 3
	}
	srcDir, cfg, err := rowSource(work, st.Source)
	if err != nil {
		return harness.Options{}, "", err
	}
	runs := filepath.Join(work, "runs")
	if st.RunsBesideSource {
		runs = srcDir + "-runs"
	}
	records := harness.RecordsDir(runs)
	if err := os.MkdirAll(records, 0o755); err != nil {
		return harness.Options{}, "", err
	}
	if st.Stage2Record != "missing" {
		data, err := os.ReadFile(gates.RecordPath(harness.RecordsDir(o.RunsDir), 2))
		if err != nil {
			return harness.Options{}, "", fmt.Errorf("stage 2 must be validated in %s first: %w", o.RunsDir, err)
		}
		var rec gates.Record
		if err := json.Unmarshal(data, &rec); err != nil {
			return harness.Options{}, "", err
		}
		switch st.Stage2Record {
		case "stale":
			rec.ValidatedAt = o.Clock().Add(-config.DefaultStageRecordMaxAge - time.Hour).UTC()
			rec.Seal() // stale, but intact
		case "tampered":
			rec.Checked = append(rec.Checked, "edited-after-sealing") // digest no longer matches
		case "forged":
			rec.Checked = append(rec.Checked, "forged-and-resealed")
			rec.Seal() // consistent: only a signature can tell
		case "junk-run":
			// Resealed consistently, naming a directory whose report is junk.
			junk := filepath.Join(work, rec.RunID)
			if err := forgeRecordRun(&rec, junk, []byte("{\"status\": \"pass\"}\n")); err != nil {
				return harness.Options{}, "", err
			}
		case "resealed-run":
			// The forgery of issue 20: a stage 2 run made in the row's own
			// runs directory by someone without the signing key (here the
			// harness with no signer; a copy of a genuine run with its paths
			// rewritten, its events re-chained and its digests recomputed
			// comes to the same files), and a record naming it, sealed
			// consistently. Every digest and claim checks out; only the
			// missing trusted signature can tell.
			forged, err := unsignedStage2Run(ctx, o, runs)
			if err != nil {
				return harness.Options{}, "", fmt.Errorf("the forger's stage 2 run: %w", err)
			}
			sum, err := evidence.FileSHA256(filepath.Join(forged.RunArtifactDir, evidence.ReportJSON))
			if err != nil {
				return harness.Options{}, "", err
			}
			rec.RunID, rec.RunDir, rec.RunsDir, rec.ReportSHA256 = forged.RunID, forged.RunArtifactDir, runs, sum
			rec.ValidatedAt = o.Clock().UTC()
			rec.Seal()
		case "other-runs-dir":
			// The real run copied into the row's own runs directory and the
			// record rebound to the copy: evidence moved, not made, here.
			data, err := os.ReadFile(filepath.Join(rec.RunDir, evidence.ReportJSON))
			if err != nil {
				return harness.Options{}, "", err
			}
			if err := forgeRecordRun(&rec, filepath.Join(runs, rec.RunID), data); err != nil {
				return harness.Options{}, "", err
			}
			rec.RunsDir = runs
			rec.Seal()
		case "":
		default:
			return harness.Options{}, "", fmt.Errorf("unknown stage2_record %q", st.Stage2Record)
		}
		out, _ := json.MarshalIndent(rec, "", "  ")
		if err := os.WriteFile(gates.RecordPath(records, 2), append(out, '\n'), 0o644); err != nil {
			return harness.Options{}, "", err
		}
	}
	if len(st.SourceFiles) == 0 && len(st.SourceSubmodules) == 0 {
		if err := materialize(ctx, fixtures.SampleOwned, srcDir, o.Clock()); err != nil {
			return harness.Options{}, "", err
		}
		if err := writeGitFiles(srcDir, st.SourceGitFiles); err != nil {
			return harness.Options{}, "", err
		}
	} else if err := materializeWith(ctx, srcDir, st, o.Clock()); err != nil {
		return harness.Options{}, "", err
	}
	if st.SourceAnswerOnMain {
		if err := commitAnswer(srcDir, o.Clock()); err != nil {
			return harness.Options{}, "", fmt.Errorf("commit the answer in the source: %w", err)
		}
	}
	if st.SourceLeaks {
		if err := plantLeaks(srcDir, o.Clock()); err != nil {
			return harness.Options{}, "", fmt.Errorf("plant the leaks in the source: %w", err)
		}
	}
	if st.SourceModify != "" {
		f, err := os.OpenFile(filepath.Join(srcDir, st.SourceModify), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return harness.Options{}, "", err
		}
		fmt.Fprintln(f, "modified before the run")
		f.Close()
	}
	if st.SourceGitConfig != "" {
		f, err := os.OpenFile(filepath.Join(srcDir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return harness.Options{}, "", err
		}
		_, err = fmt.Fprintln(f, strings.ReplaceAll(st.SourceGitConfig, "{source}", srcDir))
		f.Close()
		if err != nil {
			return harness.Options{}, "", err
		}
	}
	if st.SourceInfoAttributes != "" {
		if err := os.MkdirAll(filepath.Join(srcDir, ".git", "info"), 0o755); err != nil {
			return harness.Options{}, "", err
		}
		if err := os.WriteFile(filepath.Join(srcDir, ".git", "info", "attributes"), []byte(st.SourceInfoAttributes+"\n"), 0o644); err != nil {
			return harness.Options{}, "", err
		}
	}
	if st.SourceUntracked != "" {
		if err := os.WriteFile(filepath.Join(srcDir, st.SourceUntracked), []byte("untracked\n"), 0o644); err != nil {
			return harness.Options{}, "", err
		}
	}
	gitDirRepl := strings.NewReplacer()
	if st.SourceSeparateGitDir {
		// Inside a directory the view shows (a configured read path), so
		// that only the harness hiding it keeps it from the commands.
		shared := filepath.Join(work, "shared")
		gd, err := separateGitDir(srcDir, filepath.Join(shared, "gitdirs", "sample.git"))
		if err != nil {
			return harness.Options{}, "", err
		}
		cfg.Sandbox = &config.Sandbox{ViewPaths: config.ViewPaths{ReadPaths: []string{shared}}}
		gitDirRepl = strings.NewReplacer("{source_git_dir}", gd, "{source_git_dirs}", filepath.Dir(gd))
	}
	hiddenDir, err := rowHiddenTests(work, st.HiddenTests, &cfg)
	if err != nil {
		return harness.Options{}, "", err
	}
	hiddenRepl := strings.NewReplacer("{hidden}", hiddenDir)
	warmRepl, warmEnv, err := warmCaches(work, st.WarmCaches, &cfg)
	if err != nil {
		return harness.Options{}, "", err
	}
	data, err := fixtures.TaskSpec(fixtures.SampleOwned)
	if err != nil {
		return harness.Options{}, "", err
	}
	spec, err := task.Parse(data, "embedded sample task", o.Schemas.Validator(schemas.TaskSpec))
	if err != nil {
		return harness.Options{}, "", err
	}
	if st.CaseTimeoutSeconds > 0 {
		spec.CaseTimeoutSeconds = st.CaseTimeoutSeconds
	}
	if st.Verification != "" {
		spec.Verification.Command = hiddenRepl.Replace(warmRepl.Replace(gitDirRepl.Replace(att.net.replacer().Replace(st.Verification))))
	}
	spec.FixtureGit = st.FixtureGit
	spec.History = st.History
	if adv := st.Adversary; adv != nil {
		dir, err := rowShared(work, "adversary", adv.Files, &cfg)
		if err != nil {
			return harness.Options{}, "", err
		}
		cmd := []string{"/bin/sh", "-c", "cp -R '" + dir + "'/. ."}
		if len(adv.Command) > 0 {
			cmd = nil
			for _, a := range adv.Command {
				cmd = append(cmd, strings.ReplaceAll(a, "{adversary}", dir))
			}
		}
		spec.Adversary = &task.SpecAdversary{Command: cmd, TestCommand: adv.TestCommand, ShowDiff: adv.ShowDiff,
			TestResults: task.TestResults{Format: testresults.Format(adv.TestResults.Format), Path: adv.TestResults.Path}}
	}
	spec.Base = st.Base
	spec.HiddenTests = hiddenDir
	if r := st.TestResults; r != nil {
		spec.TestResults = &task.TestResults{Format: testresults.Format(r.Format), Path: r.Path}
	}
	spec.FailToPass, spec.PassToPass = st.FailToPass, st.PassToPass
	if l := st.Layout; l != nil {
		spec.Layout = &task.Layout{Workdir: l.Workdir, Links: l.Links}
	}
	if st.AllowedPaths != nil {
		spec.AllowedPaths = st.AllowedPaths
	}
	if st.SetupCommand != "" {
		spec.Setup = &task.Verification{Command: att.net.replacer().Replace(st.SetupCommand), TimeoutSeconds: 60}
	}
	if st.VerifyTimeout > 0 {
		spec.Verification.TimeoutSeconds = st.VerifyTimeout
	}
	allow, caseStage := "1", strconv.Itoa(stage)
	if st.AllowCase != nil {
		allow = *st.AllowCase
	}
	if st.CaseStage != nil {
		caseStage = *st.CaseStage
	}
	scenario := st.Scenario
	if scenario == "mutate-source" {
		scenario = "mutate-source=" + filepath.Join(srcDir, "written-by-case.txt")
	}
	// The run id is fixed up front so that a scenario can be handed a path in
	// the run's scratch directory.
	runID := harness.DefaultRunID(stage, o.Clock())
	scratch := filepath.Join(runs, runlist.WorkDir, runID, "scratch")
	scenario = strings.NewReplacer("{source}", srcDir, "{scratch}", scratch, "{snapshots}", snapshot.Root(runs), "{closures}", filepath.Join(runs, store.ClosuresDir), "{listener}", att.listenAddr(),
		"{secret}", att.secretName).Replace(hiddenRepl.Replace(warmRepl.Replace(gitDirRepl.Replace(att.net.replacer().Replace(scenario)))))
	opts := harness.Options{Stage: stage, Source: srcDir, Spec: &spec, Lane: ctoharness.LaneFake, RunsDir: runs, Config: cfg,
		Getenv: withEnv(gateEnv(o.HostEnv, allow, caseStage), warmEnv), SelfExe: o.SelfExe, Schemas: o.Schemas, Clock: o.Clock,
		Scenario: scenario, Fault: st.Fault, Unsandboxed: st.Unsandboxed, Profile: st.Profile,
		NewRunID: func(int, time.Time) string { return runID },
		// The row's stage 2 record is a copy (perhaps damaged) of the real
		// one, which names the real stage 2 run in the main runs directory.
		RecordsDir: records, RecordRunsDir: o.RunsDir, VerifyRun: o.verifier(),
		AllowNetCase: att.net.fill(st.AllowNet), AllowNetVerify: att.net.fill(st.VerifyAllowNet),
		AllowNetSetup: att.net.fill(st.SetupAllowNet)}
	if st.ClockStepMs != 0 {
		opts.Clock = steppedClock(o.Clock, time.Duration(st.ClockStepMs)*time.Millisecond)
	}
	if adv := st.Adversary; adv != nil {
		switch adv.Confirm {
		case "":
			opts.AutoConfirm = true
		case "yes", "no":
			yes := adv.Confirm == "yes"
			opts.Confirm = func(_ context.Context, s adversary.Summary) (bool, error) {
				if len(s.Kept) == 0 || !strings.Contains(s.Text(), s.Kept[0].Path) {
					return false, fmt.Errorf("the summary shown does not name the tests that would run:\n%s", s.Text())
				}
				return yes, nil
			}
		case "none":
		default:
			return harness.Options{}, "", fmt.Errorf("row adversary confirm %q: want \"\", yes, no or none", adv.Confirm)
		}
	}
	if st.NoTask {
		opts.Spec, opts.RequireTask = nil, true
	}
	if opts.Signing, err = rowSigning(ctx, st, o, work, records); err != nil {
		return harness.Options{}, "", err
	}
	if st.Stage2Record == "resealed-run" {
		opts.RecordRunsDir = runs // the forged record names a run in the row's own runs directory
	}
	if o.shared != nil {
		opts.SandboxProbe, opts.ViewTrials, opts.ViewTrialsRoot = o.shared.probe, o.shared.trials, work
	}
	if o.Harness != nil {
		o.Harness(&opts)
	}
	return opts, srcDir, nil
}

// forgeRecordRun points rec at dir, holding report as its report.json, and
// reseals it as a forger who can write the runs directory would.
func forgeRecordRun(rec *gates.Record, dir string, report []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, evidence.ReportJSON)
	if err := os.WriteFile(p, report, 0o644); err != nil {
		return err
	}
	sum, err := evidence.FileSHA256(p)
	if err != nil {
		return err
	}
	rec.RunDir, rec.ReportSHA256 = dir, sum
	rec.Seal()
	return nil
}

// logTail is the last n lines of a log, joined with " | " ("" when there is
// none): enough of an unexpected failure to read in a one-line error.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, " | "))
}

// checkCommands compares the report's account of Case's commands with the
// row's.
func checkCommands(row fixtures.Row, rep *ctoharness.Report, res *RowResult) {
	x := row.ExpectCommands
	if x == nil {
		return
	}
	c := rep.Case.Commands
	if c == nil {
		res.fail("report.json has no case.commands")
		return
	}
	got := fixtures.CommandsExpect{Observed: c.Observed, Commands: c.Commands, Tests: c.Tests, Refused: c.Refused, Claimed: c.Claimed.Commands}
	if got != *x {
		res.fail("case.commands %+v, expected %+v", got, *x)
	}
}

// steppedClock is clock with every reading after the first few off by
// step, as when NTP steps the wall clock during a run. Its readings carry
// no monotonic part, as none that was written down does.
func steppedClock(clock func() time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	calls := 0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		t := clock().Round(0)
		if calls > 5 {
			t = t.Add(step)
		}
		return t
	}
}

// unsignedStage2Run makes a stage 2 pass run in runs without a signing key:
// what a forger who can write a runs directory, but has no key, can produce.
// Its gate reads the genuine stage 1 record of the main runs directory.
func unsignedStage2Run(ctx context.Context, o ReplayOptions, runs string) (*ctoharness.Report, error) {
	rep, err := harness.Run(ctx, harness.Options{Stage: 2, Lane: ctoharness.LaneFake, RunsDir: runs,
		Getenv: gateEnv(o.HostEnv, "1", "2"), SelfExe: o.SelfExe, Schemas: o.Schemas, Clock: o.Clock,
		RecordsDir: harness.RecordsDir(o.RunsDir), RecordRunsDir: o.RunsDir, VerifyRun: o.verifier(),
		Signing: attest.Keys{Trusted: o.Signing.Trusted}})
	if err != nil {
		return nil, err
	}
	if rep.Status != ctoharness.StatusPass || rep.Signed {
		return nil, fmt.Errorf("status %s, signed %v, blockers %v; want an unsigned pass", rep.Status, rep.Signed, rep.Blockers)
	}
	return rep, nil
}
