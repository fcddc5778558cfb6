package batch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// TestMain lets this test binary be the fake Case, the sandbox launcher and
// the supervisor, as the harness binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case backend.FakeSubcommand:
			os.Exit(fakecase.Main(os.Args[2:], os.Stdout, os.Stderr, os.Getenv))
		case sandbox.Subcommand:
			os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
		case supervise.Subcommand:
			os.Exit(supervise.Main(os.Args[2:], os.Stderr))
		}
	}
	os.Exit(m.Run())
}

// world is a runs directory with stage 2 validated and owned sources.
type world struct {
	set     *schemas.Set
	runs    string
	owned   string
	base    harness.Options
	sources []string
	keys    attest.Keys
}

func newWorld(t testing.TB, sources int) *world {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &world{set: set, runs: filepath.Join(dir, "runs"), owned: filepath.Join(dir, "owned")}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{OwnedSources: []string{w.owned}}
	env := func(k string) string {
		switch k {
		case gates.EnvAllowCase:
			return "1"
		case gates.EnvCaseStage:
			return "3"
		case "PATH":
			return os.Getenv("PATH")
		}
		return ""
	}
	ctx := context.Background()
	keys, err := attest.Ephemeral() // every run is signed, as by default
	if err != nil {
		t.Fatal(err)
	}
	w.keys = keys
	if err := validators.EnsureStage2(ctx, validators.StageOptions{RunsDir: w.runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Config: cfg, Signing: keys}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < sources; i++ {
		src := filepath.Join(w.owned, string(rune('a'+i)))
		archive, err := fixtures.Archive(fixtures.SampleOwned)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fixtures.Materialize(ctx, archive, src, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		w.sources = append(w.sources, src)
	}
	w.base = harness.Options{RunsDir: w.runs, Config: cfg, Getenv: env, SelfExe: exe, Schemas: set, VerifyRun: validators.RememberStageRuns(validators.StageRunVerifier(set)), Signing: keys, SandboxProbe: sandbox.Reuse(exe), ViewTrials: sandbox.NewTrials()}
	return w
}

func (w *world) plan(t testing.TB, s batch.Spec) batch.Plan {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := batch.ParseSpec(data, filepath.Join(w.owned, "spec.json"), w.set)
	if err != nil {
		t.Fatal(err)
	}
	p, err := batch.MakePlan(context.Background(), spec, w.set)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// faultFirst is the local executor with a disk-full fault on each trial's
// first attempt: a real infrastructure failure, with real evidence.
type faultFirst struct{ l batch.Local }

func (f faultFirst) RunTrial(ctx context.Context, t batch.Trial, n int) (batch.Attempt, error) {
	l := f.l
	if n == 1 {
		l.Base.Fault = harness.FaultDiskFullPrefix + "proofs/fixture-clean-end.json"
	}
	return l.RunTrial(ctx, t, n)
}

func TestRetriesOnlyInfraAndModelFailures(t *testing.T) {
	w := newWorld(t, 1)
	p := w.plan(t, batch.Spec{Name: "retry", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note"}},
		Agents: []batch.Agent{{Name: "fine"}, {Name: "broken", Scenario: "break-verification"}}, Repeats: 1, MaxAttempts: 3})
	st, err := batch.OpenStore(w.runs, p.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := batch.Execute(context.Background(), p, st, faultFirst{batch.Local{Base: w.base}}, batch.Options{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c.Done != 2 || c.Retries != 2 {
		t.Errorf("counts %+v: want 2 done after 2 retries", c)
	}
	for _, tr := range p.Trials {
		rec, err := st.Load(tr)
		if err != nil {
			t.Fatal(err)
		}
		// Attempt 1 hit the disk-full fault: infra_failed, kept, retried.
		if len(rec.Attempts) != 2 || rec.Attempts[0].Outcome != batch.OutcomeInfraFailed {
			t.Fatalf("%s: attempts %+v", tr.Agent.Name, rec.Attempts)
		}
		if !rec.Attempts[0].EvidenceValid || !contains(rec.Attempts[0].Blockers, string(ctoharness.BlockArtifactWriteFailed)) {
			t.Errorf("%s: the infra failure's evidence: valid %v, blockers %v, errors %v", tr.Agent.Name, rec.Attempts[0].EvidenceValid, rec.Attempts[0].Blockers, rec.Attempts[0].EvidenceErrors)
		}
		if _, err := os.Stat(rec.Attempts[0].RunDir); err != nil {
			t.Errorf("the first attempt's run directory is gone: %v", err)
		}
		want := batch.OutcomePass
		if tr.Agent.Name == "broken" {
			want = batch.OutcomeAgentFailed // a result, not retried although attempts remain
		}
		// Each attempt has its own id; the trial keeps its own.
		if rec.Trial.ID != tr.ID || rec.Attempts[0].ID != batch.AttemptID(tr.ID, 1) || rec.Attempts[1].ID != batch.AttemptID(tr.ID, 2) {
			t.Errorf("%s: trial %s, attempt ids %q and %q", tr.Agent.Name, rec.Trial.ID, rec.Attempts[0].ID, rec.Attempts[1].ID)
		}
		if got := rec.Attempts[1].Outcome; got != want || !rec.Attempts[1].EvidenceValid {
			t.Errorf("%s: second attempt %s (valid %v), want %s", tr.Agent.Name, got, rec.Attempts[1].EvidenceValid, want)
		}
	}
	sum, err := batch.Summarize(p, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Complete || sum.Cells[0].Passes != 1 || sum.Cells[0].Attempts != 2 || sum.Cells[1].Outcomes.AgentFailed != 1 {
		t.Errorf("summary %+v", sum.Cells)
	}
	for _, row := range sum.TrialList {
		if row.AttemptID != batch.AttemptID(row.TrialID, 2) {
			t.Errorf("trial %s: the summary names attempt %q, want the second", row.TrialID, row.AttemptID)
		}
	}
	// The failure reasons count every attempt, the retried one too: the
	// passing agent's infra failure, and the broken one's as well as its
	// final agent failure.
	infra := batch.FailureCount{Outcome: string(batch.OutcomeInfraFailed), Code: string(ctoharness.BlockArtifactWriteFailed), Attempts: 1}
	for _, a := range sum.Agents {
		if !slices.Contains(a.Failures, infra) {
			t.Errorf("%s: failures %+v lack %+v", a.Agent, a.Failures, infra)
		}
		switch a.Agent {
		case "fine":
			if len(a.Failures) != 1 {
				t.Errorf("fine: failures %+v, want the infra failure alone", a.Failures)
			}
		case "broken":
			if len(a.Failures) < 2 || a.Failures[0].Outcome != string(batch.OutcomeAgentFailed) {
				t.Errorf("broken: failures %+v, want its agent failure first (the classes' order), then the infra failure", a.Failures)
			}
		}
	}
	if _, err := batch.WriteSummary(context.Background(), st, sum, w.set, nil); err != nil {
		t.Fatal(err)
	}
}

// stopAfter cancels the batch once n trials are done.
func TestResumeSkipsFinishedTrials(t *testing.T) {
	w := newWorld(t, 1)
	p := w.plan(t, batch.Spec{Name: "resume", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note"}}, Agents: []batch.Agent{{Name: "fine"}}, Repeats: 4})
	st, err := batch.OpenStore(w.runs, p.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := batch.Local{Base: w.base}
	_, err = batch.Execute(ctx, p, st, r, batch.Options{Concurrency: 1, OnEvent: func(e batch.Event) {
		if e.Kind == "done" && e.Counts.Done == 2 {
			cancel() // as Ctrl-C: the next trial is interrupted
		}
	}})
	if err == nil {
		t.Fatal("a stopped batch returned no error")
	}
	sum, _ := batch.Summarize(p, st, time.Now())
	if sum.Finished != 2 {
		t.Fatalf("finished %d after the stop, want 2", sum.Finished)
	}
	first := map[string]string{}
	for _, row := range sum.TrialList {
		first[row.TrialID] = row.RunDir
		if row.Outcome == batch.Pending {
			continue
		}
		if row.Attempts != 1 {
			t.Errorf("%s: %d attempts", row.TrialID, row.Attempts)
		}
	}
	started := 0
	verify := func(ctx context.Context, _ batch.Trial, a batch.Attempt) []string {
		return batch.Describe(ctx, a.RunDir, w.set, false, nil).EvidenceErrors
	}
	c, err := batch.Execute(context.Background(), p, st, r, batch.Options{Concurrency: 2, Verify: verify, OnEvent: func(e batch.Event) {
		if e.Kind == "start" {
			started++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if started != 2 || c.Skipped != 2 || c.Done != 4 {
		t.Errorf("resume started %d trials and skipped %d (done %d); want 2 and 2", started, c.Skipped, c.Done)
	}
	sum, _ = batch.Summarize(p, st, time.Now())
	for _, row := range sum.TrialList {
		if prev := first[row.TrialID]; prev != "" && prev != row.RunDir {
			t.Errorf("%s was run again: %s then %s", row.TrialID, prev, row.RunDir)
		}
		if row.Outcome != string(batch.OutcomePass) || row.Attempts != 1 {
			t.Errorf("%s: %s in %d attempts", row.TrialID, row.Outcome, row.Attempts)
		}
	}
	// Evidence changed after the fact is not skipped: that trial runs again.
	victim := sum.TrialList[0]
	if err := os.WriteFile(filepath.Join(victim.RunDir, "report.md"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	started = 0
	if _, err := batch.Execute(context.Background(), p, st, r, batch.Options{Concurrency: 2, Verify: verify, OnEvent: func(e batch.Event) {
		if e.Kind == "start" {
			started++
			if e.Trial.ID != victim.TrialID {
				t.Errorf("trial %s ran again", e.Trial.ID)
			}
		}
	}}); err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Errorf("%d trials ran after one's evidence was edited, want 1", started)
		dumpRecord(t, st, p.Trials[0])
	}
}

func TestTrialIDs(t *testing.T) {
	w := newWorld(t, 2)
	s := batch.Spec{Name: "ids", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note"}}, Agents: []batch.Agent{{Name: "a"}, {Name: "b"}}, Repeats: 2}
	p1, p2 := w.plan(t, s), w.plan(t, s)
	if len(p1.Trials) != 8 || p1.BatchID != p2.BatchID {
		t.Fatalf("%d trials, batch ids %s %s", len(p1.Trials), p1.BatchID, p2.BatchID)
	}
	seen := map[string]bool{}
	for i := range p1.Trials {
		if p1.Trials[i].ID != p2.Trials[i].ID {
			t.Errorf("trial %d: id %s then %s", i, p1.Trials[i].ID, p2.Trials[i].ID)
		}
		if seen[p1.Trials[i].ID] {
			t.Errorf("id %s twice", p1.Trials[i].ID)
		}
		seen[p1.Trials[i].ID] = true
	}
	a := p1.Trials[0]
	if id := batch.TrialID(a.Source, "0000000000000000000000000000000000000000", a.TaskDigest, a.Agent, a.Repeat); id == a.ID {
		t.Error("a new source commit keeps the trial id")
	}
	b := a.Agent
	b.Model = "other"
	if id := batch.TrialID(a.Source, a.SourceHead, a.TaskDigest, b, a.Repeat); id == a.ID {
		t.Error("another model keeps the trial id")
	}
}

// An attempt's id is the trial's and its index: deterministic, distinct per
// attempt. A record whose attempts are misnumbered is refused; one written
// before attempts had ids gets them on load.
func TestAttemptIDs(t *testing.T) {
	w := newWorld(t, 1)
	p := w.plan(t, batch.Spec{Name: "attempts", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note"}}, Agents: []batch.Agent{{Name: "a"}}, Repeats: 2})
	t1, t2 := p.Trials[0].ID, p.Trials[1].ID
	ids := map[string]bool{}
	for _, id := range []string{batch.AttemptID(t1, 1), batch.AttemptID(t1, 2), batch.AttemptID(t2, 1), batch.AttemptID(t2, 2)} {
		if ids[id] || !strings.HasPrefix(id, "t-") {
			t.Errorf("attempt id %q repeats or is malformed", id)
		}
		ids[id] = true
	}
	if batch.AttemptID(t1, 2) != batch.AttemptID(t1, 2) || !strings.HasPrefix(batch.AttemptID(t1, 2), t1) {
		t.Errorf("attempt id %q is not derived from trial %s", batch.AttemptID(t1, 2), t1)
	}
	st, err := batch.OpenStore(w.runs, p.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(st.Dir, "trials", t1+".json")
	write := func(attempts string) {
		t.Helper()
		tr, _ := json.Marshal(p.Trials[0])
		if err := os.WriteFile(path, []byte(`{"trial":`+string(tr)+`,"attempts":`+attempts+`,"refused":[]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"attempt":1,"outcome":"infra_failed"},{"attempt":2,"outcome":"pass"}]`)
	rec, err := st.Load(p.Trials[0])
	if err != nil || rec.Attempts[0].ID != batch.AttemptID(t1, 1) || rec.Attempts[1].ID != batch.AttemptID(t1, 2) {
		t.Errorf("a record without attempt ids: %v, %+v", err, rec.Attempts)
	}
	write(`[{"attempt":1,"attempt_id":"` + batch.AttemptID(t2, 1) + `","outcome":"pass"}]`)
	if _, err := st.Load(p.Trials[0]); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("another trial's attempt in the record: %v", err)
	}
	write(`[{"attempt":2,"outcome":"pass"}]`)
	if _, err := st.Load(p.Trials[0]); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a misnumbered attempt: %v", err)
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		report string
		want   batch.Outcome
	}{
		{`{"status":"pass","blockers":[],"outcome":"model_failed"}`, batch.OutcomeModelFailed}, // the report's own field wins
		{`{"status":"pass","blockers":[]}`, batch.OutcomePass},
		{`{"status":"failed","blockers":[{"code":"TESTS_FAILED"}]}`, batch.OutcomeAgentFailed},
		{`{"status":"blocked","blockers":[{"code":"AGENT_MODEL_ERROR"}]}`, batch.OutcomeModelFailed},
		{`{"status":"blocked","blockers":[{"code":"DISALLOWED_CHANGE"},{"code":"TESTS_FAILED"}]}`, batch.OutcomePolicyBlocked},
		{`{"status":"blocked","blockers":[{"code":"TESTS_FAILED"},{"code":"ARTIFACT_WRITE_FAILED"}]}`, batch.OutcomeInfraFailed},
		{`{"status":"blocked","blockers":[{"code":"SOMETHING_NEW"}]}`, batch.OutcomePolicyBlocked},
		{`{"status":"blocked","blockers":[]}`, batch.OutcomeInfraFailed},
		{`{"status":"pass","blockers":[],"outcome":"great"}`, batch.OutcomeInfraFailed},
		{`not json`, batch.OutcomeInfraFailed},
		// A task that could not judge the run is the task's outcome, not the agent's.
		{`{"status":"blocked","outcome":"policy_blocked","blockers":[{"code":"TASK_INVALID"}]}`, batch.OutcomeTaskInvalid},
		{`{"status":"blocked","blockers":[{"code":"TASK_INVALID"}]}`, batch.OutcomeTaskInvalid},
		{`{"status":"blocked","outcome":"infra_failed","blockers":[{"code":"TASK_INVALID"},{"code":"ARTIFACT_WRITE_FAILED"}]}`, batch.OutcomeInfraFailed},
	} {
		if got, _ := batch.OutcomeOf([]byte(c.report)); got != c.want {
			t.Errorf("%s: %s, want %s", c.report, got, c.want)
		}
	}
	for _, o := range batch.AllOutcomes() {
		if o.Retryable() != (o == batch.OutcomeInfraFailed || o == batch.OutcomeModelFailed) {
			t.Errorf("%s retryable %v", o, o.Retryable())
		}
		if o.Scored() != (o == batch.OutcomePass || o == batch.OutcomeAgentFailed || o == batch.OutcomePolicyBlocked) {
			t.Errorf("%s scored %v", o, o.Scored())
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func dumpRecord(t *testing.T, st batch.Store, tr batch.Trial) {
	rec, _ := st.Load(tr)
	b, _ := json.MarshalIndent(rec.Attempts, "", " ")
	t.Logf("%s", b)
}

func TestPassAtKAndCompare(t *testing.T) {
	// 5 trials, 2 passes: pass@1 = 0.4, pass@2 = 1 - (3*2)/(5*4) = 0.7, pass@4 = pass@5 = 1.
	// Scored trials are the denominators: t2 of y has 4 scored (one
	// infra_failed), t4 of x none.
	sum := batch.Summary{Cells: []batch.Cell{
		{Agent: "x", Task: "t1", Totals: batch.Totals{Trials: 5, Finished: 5, Scored: 5, Passes: 2}},
		{Agent: "y", Task: "t1", Totals: batch.Totals{Trials: 5, Finished: 5, Scored: 5, Passes: 5}},
		{Agent: "x", Task: "t2", Totals: batch.Totals{Trials: 5, Finished: 5, Scored: 5, Passes: 5}},
		{Agent: "y", Task: "t2", Totals: batch.Totals{Trials: 5, Finished: 5, Scored: 4, Passes: 2}},
		{Agent: "y", Task: "t3", Totals: batch.Totals{Trials: 1, Finished: 1, Scored: 1, Passes: 1}},
		{Agent: "x", Task: "t4", Totals: batch.Totals{Trials: 2, Finished: 2, Scored: 0, Passes: 0}},
		{Agent: "y", Task: "t4", Totals: batch.Totals{Trials: 2, Finished: 2, Scored: 2, Passes: 1}},
	}}
	values := func(p []batch.PassAtK) []float64 {
		var out []float64
		for i, e := range p {
			if e.K != i+1 {
				t.Errorf("estimate %d is for k=%d", i, e.K)
			}
			if e.Value == nil {
				out = append(out, -1)
			} else {
				out = append(out, *e.Value)
			}
		}
		return out
	}
	at, hat := batch.PassAtKForTest(5, 5, 2)
	if got, want := values(at), []float64{0.4, 0.7, 0.9, 1, 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pass@k = %v, want %v", got, want)
	}
	// pass^1 = 0.4, pass^2 = (2*1)/(5*4) = 0.1, pass^3.. = 0.
	if got, want := values(hat), []float64{0.4, 0.1, 0, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pass^k = %v, want %v", got, want)
	}
	// 5 planned, 3 scored with 3 passes: k = 4, 5 are not enough trials.
	at, hat = batch.PassAtKForTest(5, 3, 3)
	if got, want := values(at), []float64{1, 1, 1, -1, -1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pass@k with 3 of 5 scored = %v, want %v", got, want)
	}
	if got, want := values(hat), []float64{1, 1, 1, -1, -1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pass^k with 3 of 5 scored = %v, want %v", got, want)
	}
	cmp := batch.Compare(batch.Side{Label: "x", Summary: sum, Agent: "x"}, batch.Side{Label: "y", Summary: sum, Agent: "y"})
	if len(cmp.Pairs) != 2 || cmp.BBetter != 1 || cmp.ABetter != 1 || len(cmp.OnlyInB) != 1 || cmp.OnlyInB[0] != "t3" {
		t.Fatalf("comparison %+v", cmp)
	}
	if p := cmp.Pairs[0]; p.Key != "t1" || p.ARate != 0.4 || p.BRate != 1 || p.Delta < 0.59 || p.Delta > 0.61 {
		t.Errorf("t1: %+v", p)
	}
	if p := cmp.Pairs[1]; p.Key != "t2" || p.BRate != 0.5 || p.BScored != 4 {
		t.Errorf("t2: %+v (want 2 of 4 scored)", p)
	}
	// x never got a scored trial on t4: no rate, so neither side is better.
	if len(cmp.Unscored) != 1 || cmp.Unscored[0] != "t4" {
		t.Errorf("unscored pairs %v, want [t4]", cmp.Unscored)
	}
	// Whole batches pair by agent and task.
	whole := batch.Compare(batch.Side{Label: "a", Summary: sum}, batch.Side{Label: "b", Summary: sum})
	if len(whole.Pairs) != 6 || whole.Ties != 6 || len(whole.Unscored) != 1 {
		t.Errorf("a batch against itself: %+v", whole)
	}
}

// A signed batch verifies from a copy of the runs directory; an edited
// summary, an edited run, or a missing signature does not.
func TestVerifyDir(t *testing.T) {
	w := newWorld(t, 1)
	keyDir := filepath.Join(t.TempDir(), "keys")
	pub, err := attest.Generate(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := attest.LoadSigner(filepath.Join(keyDir, attest.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	w.base.Signing = attest.Keys{Signer: signer, Trusted: append([]attest.PublicKey{pub}, w.keys.Trusted...)}
	p := w.plan(t, batch.Spec{Name: "verify", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note"}},
		Agents: []batch.Agent{{Name: "fine"}, {Name: "broken", Scenario: "break-verification"}}, Repeats: 1})
	st, err := batch.OpenStore(w.runs, p.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch.Execute(context.Background(), p, st, batch.Local{Base: w.base}, batch.Options{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	sum, _ := batch.Summarize(p, st, time.Now())
	if _, err := batch.WriteSummary(context.Background(), st, sum, w.set, signer); err != nil {
		t.Fatal(err)
	}
	// The runs directory copied elsewhere: the batch's links still reach its runs.
	copyRuns := filepath.Join(t.TempDir(), "runs")
	if err := os.CopyFS(copyRuns, os.DirFS(w.runs)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(copyRuns, "batches", p.BatchID)
	opts := batch.VerifyOptions{Trusted: append([]attest.PublicKey{pub}, w.keys.Trusted...), RequireSignature: true}
	if v := batch.VerifyDir(context.Background(), dir, w.set, opts); !v.OK || v.Trials != 2 || v.SignedBy != pub.ID {
		t.Fatalf("a good batch: %+v", v)
	}
	// batch.json records the key it is signed with; a summary that names
	// another key than the one that signed it (re-signed after the edit) fails.
	good, _ := os.ReadFile(filepath.Join(dir, batch.SummaryJSON))
	goodSig, _ := os.ReadFile(filepath.Join(dir, batch.SummarySignature))
	var rec batch.Summary
	if err := json.Unmarshal(good, &rec); err != nil || rec.SigningKeyID != pub.ID {
		t.Fatalf("batch.json records signing key %q, want %s (%v)", rec.SigningKeyID, pub.ID, err)
	}
	rec.SigningKeyID = w.keys.Trusted[0].ID
	renamed, _ := json.Marshal(rec)
	sum256 := sha256.Sum256(renamed)
	stmt, err := attest.NewStatement([]attest.Subject{{Name: batch.SummaryJSON, SHA256: hex.EncodeToString(sum256[:])}}, batch.BatchPredicateType, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.Sign(context.Background(), signer, stmt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, batch.SummaryJSON), renamed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, batch.SummarySignature), env, 0o644); err != nil {
		t.Fatal(err)
	}
	if v := batch.VerifyDir(context.Background(), dir, w.set, opts); v.OK || !anyContains(v.Errors, "names signing key "+rec.SigningKeyID+", but batch.dsse.json is signed by "+pub.ID) {
		t.Errorf("a summary naming another signing key: %+v", v)
	}
	// Its signature removed, a summary that records a key is not taken as unsigned.
	if err := os.Remove(filepath.Join(dir, batch.SummarySignature)); err != nil {
		t.Fatal(err)
	}
	if v := batch.VerifyDir(context.Background(), dir, w.set, batch.VerifyOptions{Trusted: opts.Trusted}); v.OK || !anyContains(v.Errors, "yet batch.json names signing key") {
		t.Errorf("a summary whose signature was removed: %+v", v)
	}
	_ = os.WriteFile(filepath.Join(dir, batch.SummaryJSON), good, 0o644)
	_ = os.WriteFile(filepath.Join(dir, batch.SummarySignature), goodSig, 0o644)
	// The broken agent's trial claimed as a pass (batch.json edited, its counts too).
	data, _ := os.ReadFile(filepath.Join(dir, batch.SummaryJSON))
	var s batch.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	for i := range s.TrialList {
		s.TrialList[i].Outcome = "pass"
	}
	s.TrialList[0].AttemptID = batch.AttemptID(s.TrialList[0].TrialID, 2) // an attempt that was never made
	for i := range s.Cells {
		s.Cells[i].Passes, s.Cells[i].Outcomes = 1, batch.OutcomeCounts{Pass: 1}
	}
	edited, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(dir, batch.SummaryJSON), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	v := batch.VerifyDir(context.Background(), dir, w.set, opts)
	if v.OK || !anyContains(v.Errors, "changed after it was signed") || !anyContains(v.Errors, "batch.json says pass, its run says agent_failed") ||
		!anyContains(v.Errors, "names attempt") {
		t.Errorf("an edited summary: %+v", v)
	}
	// Unsigned, the edit is still caught by the runs themselves.
	if err := os.Remove(filepath.Join(dir, batch.SummarySignature)); err != nil {
		t.Fatal(err)
	}
	v = batch.VerifyDir(context.Background(), dir, w.set, batch.VerifyOptions{Trusted: opts.Trusted})
	if v.OK || !anyContains(v.Errors, "its run says agent_failed") {
		t.Errorf("an edited unsigned summary: %+v", v)
	}
	if v := batch.VerifyDir(context.Background(), dir, w.set, opts); v.OK || !anyContains(v.Errors, "not signed") {
		t.Errorf("a missing signature under --require-signature: %+v", v)
	}
	// One trial's row pointed at the other trial's genuine, signed run: the
	// run is bound to the other trial and its request nonce is used twice.
	var orig batch.Summary
	if err := json.Unmarshal(data, &orig); err != nil {
		t.Fatal(err)
	}
	r0, r1 := &orig.TrialList[0], orig.TrialList[1]
	r0.RunID, r0.RunDir, r0.ReportHTML, r0.Worker, r0.KeyID, r0.RequestNonce = r1.RunID, r1.RunDir, r1.ReportHTML, r1.Worker, r1.KeyID, r1.RequestNonce
	r0.Outcome = r1.Outcome
	replayed, _ := json.Marshal(orig)
	if err := os.WriteFile(filepath.Join(dir, batch.SummaryJSON), replayed, 0o644); err != nil {
		t.Fatal(err)
	}
	v = batch.VerifyDir(context.Background(), dir, w.set, batch.VerifyOptions{Trusted: opts.Trusted})
	if v.OK || !anyContains(v.Errors, "its run is bound to batch") || !anyContains(v.Errors, "(a replay)") {
		t.Errorf("a row naming another trial's run: %+v", v)
	}
	// Only the estimates raised: every count stays true, pass@1 does not.
	var inflated batch.Summary
	if err := json.Unmarshal(data, &inflated); err != nil {
		t.Fatal(err)
	}
	one := 1.0
	for i := range inflated.Cells {
		inflated.Cells[i].PassAtK[0].Value = &one
	}
	raised, _ := json.Marshal(inflated)
	if err := os.WriteFile(filepath.Join(dir, batch.SummaryJSON), raised, 0o644); err != nil {
		t.Fatal(err)
	}
	v = batch.VerifyDir(context.Background(), dir, w.set, batch.VerifyOptions{Trusted: opts.Trusted})
	if v.OK || !anyContains(v.Errors, "pass@k or pass^k is not what 0 passes of 1 scored trials give") {
		t.Errorf("an inflated pass@1: %+v", v)
	}
}

func anyContains(list []string, s string) bool {
	for _, x := range list {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// A task's task_check travels with its trials: a record of this task at
// the trial's base lets the trial run and pass; a record of another task
// refuses it before Case starts (TASK_INVALID, unscored).
func TestBatchTaskCheck(t *testing.T) {
	w := newWorld(t, 1)
	dir := t.TempDir()
	spec := batch.Spec{Name: "checked", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note"}}, Agents: []batch.Agent{{Name: "fine"}}, Repeats: 1}
	first := w.plan(t, spec).Trials[0]
	record := func(name, digest string) string {
		rec := ctoharness.TaskCheck{SchemaVersion: ctoharness.SchemaVersion, CheckedAt: time.Now().UTC(), Source: first.Source, BaseCommit: first.SourceHead,
			TaskDigest: digest, Reference: "fix.patch", ReferenceDigest: strings.Repeat("a", 64), Repeats: 1, Runs: []ctoharness.TaskCheckRun{}, Valid: true, Problems: []string{}}
		data, _ := json.Marshal(rec)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := filepath.Join(dir, "other.task.json")
	if err := os.WriteFile(other, []byte(`{"task": "Add another note under docs/.", "allowed_paths": ["docs/**"], "verification": {"command": "sh scripts/check.sh", "timeout_seconds": 30}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The other task's record is of the first task: it does not cover it.
	spec.Tasks = []batch.TaskRef{{Name: "note", TaskCheck: record("good.json", first.TaskDigest)},
		{Name: "other", Spec: other, TaskCheck: record("other.json", first.TaskDigest)}}
	p := w.plan(t, spec)
	if len(p.Trials) != 2 || len(p.Trials[0].TaskCheck) == 0 {
		t.Fatalf("the trials do not carry their task checks: %+v", p.Trials)
	}
	st, err := batch.OpenStore(w.runs, p.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch.Execute(context.Background(), p, st, batch.Local{Base: w.base}, batch.Options{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tr := range p.Trials {
		rec, err := st.Load(tr)
		if err != nil || len(rec.Attempts) == 0 {
			t.Fatalf("trial %s: %v", tr.Task, err)
		}
		want := batch.OutcomePass
		if tr.Task == "other" {
			want = batch.OutcomeTaskInvalid
		}
		if res := validators.Run(context.Background(), rec.Last().RunDir, w.set, validators.RunOptions{Trusted: w.keys.Trusted}); !res.OK {
			t.Errorf("task %s: the run's evidence does not validate: %v", tr.Task, res.Errors)
		}
		if got := rec.Last().Outcome; got != want {
			t.Errorf("task %s: outcome %s, want %s (%v; %s)", tr.Task, got, want, rec.Last().Blockers, rec.Last().Note)
		}
	}
}

// A batch of a graded task reads each trial's listed tests from its run:
// the summary and the page say, per agent, how often each fail-to-pass
// test was made to pass and which pass-to-pass tests were broken, and
// leave out the pass-to-pass tests nobody broke.
func TestBatchPerTest(t *testing.T) {
	w := newWorld(t, 1)
	task := filepath.Join(t.TempDir(), "graded.task.json")
	tap := `if grep -rq 'note added by the fake Case' docs; then F=ok; else F='not ok'; fi; if grep -rq 'does not accept' docs; then K='not ok'; else K=ok; fi; printf 'TAP version 13\n1..3\n%s 1 - fixed\n%s 2 - kept\nok 3 - untouched\n' "$F" "$K" > results.tap`
	spec, _ := json.Marshal(map[string]any{"task": "Add a note under docs/.", "allowed_paths": []string{"docs/**"},
		"test_results": map[string]string{"format": "tap", "path": "results.tap"}, "fail_to_pass": []string{"fixed"}, "pass_to_pass": []string{"kept", "untouched"},
		"verification": map[string]any{"command": tap, "timeout_seconds": 30}})
	if err := os.WriteFile(task, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	p := w.plan(t, batch.Spec{Name: "graded", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "graded", Spec: task}},
		Agents: []batch.Agent{{Name: "fine"}, {Name: "broken", Scenario: "break-verification"}}, Repeats: 1})
	st, err := batch.OpenStore(w.runs, p.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch.Execute(context.Background(), p, st, batch.Local{Base: w.base}, batch.Options{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := batch.Summarize(p, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]batch.TestCell{}
	for _, c := range s.Tests {
		got[c.Agent+"/"+c.Test] = c
	}
	want := map[string]batch.TestCell{
		"broken/fixed": {Task: "graded", Agent: "broken", Test: "fixed", List: batch.ListFailToPass, Graded: 1, Held: 0},
		"fine/fixed":   {Task: "graded", Agent: "fine", Test: "fixed", List: batch.ListFailToPass, Graded: 1, Held: 1},
		"broken/kept":  {Task: "graded", Agent: "broken", Test: "kept", List: batch.ListPassToPass, Graded: 1, Held: 0},
	}
	if len(got) != len(want) {
		t.Fatalf("test cells %+v, want %+v", s.Tests, want)
	}
	for k, c := range want {
		if got[k] != c {
			t.Errorf("%s: %+v, want %+v", k, got[k], c)
		}
	}
	page, err := batch.Page(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`<table id="tests">`, `<code>kept</code>`, `class="fail">0/1</td>`, `class="pass">1/1</td>`} {
		if !strings.Contains(string(page), frag) {
			t.Errorf("batch.html lacks %q", frag)
		}
	}
	if strings.Contains(string(page), "<code>untouched</code>") {
		t.Error("batch.html lists a pass-to-pass test no agent broke")
	}
}

// holdRunner is a Runner whose attempts wait d, as a trial that waits on
// its model does, and which records how many of each agent's ran at once.
type holdRunner struct {
	d    time.Duration
	mu   sync.Mutex
	now  map[string]int
	peak map[string]int
}

func (h *holdRunner) RunTrial(ctx context.Context, t batch.Trial, attempt int) (batch.Attempt, error) {
	h.mu.Lock()
	h.now[t.Agent.Name]++
	h.peak[t.Agent.Name] = max(h.peak[t.Agent.Name], h.now[t.Agent.Name])
	h.mu.Unlock()
	time.Sleep(h.d)
	h.mu.Lock()
	h.now[t.Agent.Name]--
	h.mu.Unlock()
	return batch.Attempt{ID: batch.AttemptID(t.ID, attempt), N: attempt, Outcome: batch.OutcomePass, Status: "pass", Blockers: []string{}, EvidenceValid: true}, nil
}

// Trials that wait on their model run many at once, each agent's bounded
// by its max_in_flight (8 by default for a coding agent), whatever the
// workers; the default concurrency is the agents' in-flight bounds, not
// the cores.
func TestAgentsInFlight(t *testing.T) {
	w := newWorld(t, 1)
	p := w.plan(t, batch.Spec{Name: "inflight", Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note"}},
		Agents: []batch.Agent{{Name: "capped", Kind: "qwen-code", Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "K", MaxInFlight: 2},
			{Name: "hosted", Kind: "codex", Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "K"}}, Repeats: 12})
	n, why := batch.ConcurrencyFor(p)
	if want := 2 + batch.DefaultMaxInFlight; n != want && why == "" {
		t.Errorf("default concurrency %d, want %d (the agents' in-flight bounds)", n, want)
	}
	st, err := batch.OpenStore(w.runs, p.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	h := &holdRunner{d: 50 * time.Millisecond, now: map[string]int{}, peak: map[string]int{}}
	start := time.Now()
	counts, err := batch.Execute(context.Background(), p, st, h, batch.Options{Concurrency: 24})
	if err != nil || counts.Done != 24 {
		t.Fatalf("%+v %v", counts, err)
	}
	if h.peak["capped"] != 2 || h.peak["hosted"] != batch.DefaultMaxInFlight {
		t.Errorf("peak trials at once %v, want capped 2 and hosted %d", h.peak, batch.DefaultMaxInFlight)
	}
	// 12 trials of 50 ms, 2 at a time, take 6 rounds: at least 300 ms.
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("the capped agent's trials took %v: its bound did not hold", took)
	}
}

// MemoryBound leaves a number the memory holds as it is and bounds one it
// does not, saying so with the figures; it never gives less than one.
func TestMemoryBound(t *testing.T) {
	if n, why := batch.MemoryBound(1); n != 1 || why != "" {
		t.Errorf("one trial: %d %q, want 1 and no reason", n, why)
	}
	if n, _ := batch.MemoryBound(0); n != 1 {
		t.Errorf("zero trials: %d, want at least 1", n)
	}
	huge := 1 << 40 // far more trials than any machine's memory holds
	n, why := batch.MemoryBound(huge)
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo: the memory is unknown here")
	}
	if n >= huge || n < 1 || !strings.Contains(why, "bounded by memory") || !strings.Contains(why, "MiB available") {
		t.Errorf("%d trials: %d %q, want a bound the memory sets and its reason", huge, n, why)
	}
}
