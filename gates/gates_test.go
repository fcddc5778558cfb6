package gates_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/schemas"
)

func TestLadderTable(t *testing.T) {
	l := gates.Ladder()
	if len(l) != 6 {
		t.Fatalf("%d stages", len(l))
	}
	for i, st := range l {
		if st.N != i+1 {
			t.Errorf("stage at %d is numbered %d", i, st.N)
		}
		if st.Approved != (st.N <= 3) {
			t.Errorf("%s approved=%v", st, st.Approved)
		}
	}
	if l[0].Backend != ctoharness.BackendFake || l[1].Backend != ctoharness.BackendCase || l[2].Fixture != gates.FixtureOwnedRepo {
		t.Errorf("unexpected ladder %+v", l)
	}
	for _, n := range []int{0, 7, -1} {
		if _, err := gates.Lookup(n); ctoharness.AsBlocker(err, "").Code != ctoharness.BlockStageUnknown {
			t.Errorf("Lookup(%d) = %v", n, err)
		}
	}
}

type fixture struct {
	dir    string
	set    *schemas.Set
	now    time.Time
	report string
}

// newFixture writes a run's report.json and a sealed stage record for it.
func newFixture(t *testing.T, stage int) *fixture {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: t.TempDir(), set: set, now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	runDir := filepath.Join(f.dir, "20261101T110000Z-s1-abcdef01")
	os.MkdirAll(runDir, 0o755)
	f.report = filepath.Join(runDir, "report.json")
	f.writeReport(t, stage, func(*ctoharness.Report) {})
	f.write(t, stage, func(*gates.Record) {})
	return f
}

// writeReport writes the named run's report: what the stand-in run verifier
// below returns. The real verifier (full run validation) is exercised by the
// validators' forgery tests.
func (f *fixture) writeReport(t *testing.T, stage int, edit func(*ctoharness.Report)) {
	t.Helper()
	rep := ctoharness.Report{RunID: "20261101T110000Z-s1-abcdef01", Stage: stage, Status: ctoharness.StatusPass, Qualifies: true,
		RunArtifactDir: filepath.Dir(f.report), Freshness: ctoharness.Freshness{FinishedAt: f.now.Add(-2 * time.Hour)}}
	edit(&rep)
	data, _ := json.Marshal(rep)
	if err := os.WriteFile(f.report, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) write(t *testing.T, stage int, edit func(*gates.Record)) {
	t.Helper()
	r := gates.Record{SchemaVersion: ctoharness.SchemaVersion, Stage: stage, RunID: "20261101T110000Z-s1-abcdef01",
		RunDir: filepath.Dir(f.report), RunsDir: f.dir, ReportSHA256: "b0a4d9d8b4eb0c37ddbfc1a1d9b1d54fba4f37c9b19e0d25bfc8f7a0a3c28e6d",
		ValidatedAt: f.now.Add(-time.Hour), HarnessVersion: ctoharness.Version, Checked: []string{"pass_route"}}
	sum, _ := os.ReadFile(f.report)
	r.ReportSHA256 = sha(sum)
	edit(&r)
	if r.RecordDigest == "" {
		r.Seal()
	}
	data, _ := json.Marshal(r)
	if err := os.WriteFile(gates.RecordPath(f.dir, stage), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) check() gates.RecordCheck {
	return gates.RecordCheck{Dir: f.dir, RunsDir: f.dir, MaxAge: 24 * time.Hour, Now: f.now, Validate: f.set.Validator(schemas.StageRecord),
		VerifyRun: func(_ context.Context, dir string) (ctoharness.Report, error) {
			var rep ctoharness.Report
			data, err := os.ReadFile(filepath.Join(dir, "report.json"))
			if err != nil {
				return rep, err
			}
			return rep, json.Unmarshal(data, &rep)
		}}
}

func TestRecordVerify(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, f *fixture)
		want   ctoharness.BlockerCode
	}{
		{"valid", func(*testing.T, *fixture) {}, ""},
		{"missing", func(t *testing.T, f *fixture) { os.Remove(gates.RecordPath(f.dir, 1)) }, ctoharness.BlockPrevStageMissing},
		{"not json", func(t *testing.T, f *fixture) { os.WriteFile(gates.RecordPath(f.dir, 1), []byte("{"), 0o644) }, ctoharness.BlockPrevStageInvalid},
		{"schema invalid", func(t *testing.T, f *fixture) {
			os.WriteFile(gates.RecordPath(f.dir, 1), []byte(`{"stage":1}`), 0o644)
		}, ctoharness.BlockPrevStageInvalid},
		{"digest broken", func(t *testing.T, f *fixture) {
			f.write(t, 1, func(r *gates.Record) { r.Seal(); r.RunID = "20261101T110000Z-s1-ffffffff" })
		}, ctoharness.BlockPrevStageTampered},
		{"report changed", func(t *testing.T, f *fixture) { os.WriteFile(f.report, []byte(`{"status":"pasz"}`), 0o644) }, ctoharness.BlockPrevStageTampered},
		{"names a blocked run", func(t *testing.T, f *fixture) {
			f.writeReport(t, 1, func(r *ctoharness.Report) { r.Status = ctoharness.StatusBlocked })
			f.write(t, 1, func(*gates.Record) {})
		}, ctoharness.BlockPrevStageUnproven},
		{"names a run of another stage", func(t *testing.T, f *fixture) {
			f.writeReport(t, 1, func(r *ctoharness.Report) { r.Stage = 2 })
			f.write(t, 1, func(*gates.Record) {})
		}, ctoharness.BlockPrevStageUnproven},
		{"names a run that does not qualify", func(t *testing.T, f *fixture) {
			f.writeReport(t, 1, func(r *ctoharness.Report) { r.Qualifies = false })
			f.write(t, 1, func(*gates.Record) {})
		}, ctoharness.BlockPrevStageUnproven},
		{"names an old run", func(t *testing.T, f *fixture) {
			f.writeReport(t, 1, func(r *ctoharness.Report) { r.Freshness.FinishedAt = f.now.Add(-48 * time.Hour) })
			f.write(t, 1, func(*gates.Record) {})
		}, ctoharness.BlockPrevStageStale},
		{"bound to another runs directory", func(t *testing.T, f *fixture) {
			f.write(t, 1, func(r *gates.Record) { r.RunsDir = t.TempDir() })
		}, ctoharness.BlockPrevStageUnproven},
		{"run outside the runs directory", func(t *testing.T, f *fixture) {
			other := filepath.Join(t.TempDir(), "20261101T110000Z-s1-abcdef01")
			os.MkdirAll(other, 0o755)
			data, _ := os.ReadFile(f.report)
			os.WriteFile(filepath.Join(other, "report.json"), data, 0o644)
			f.write(t, 1, func(r *gates.Record) { r.RunDir = other })
		}, ctoharness.BlockPrevStageUnproven},
		{"report gone", func(t *testing.T, f *fixture) { os.Remove(f.report) }, ctoharness.BlockPrevStageMissing},
		{"other stage", func(t *testing.T, f *fixture) { f.write(t, 1, func(r *gates.Record) { r.Stage = 2 }) }, ctoharness.BlockPrevStageTampered},
		{"schema version", func(t *testing.T, f *fixture) { f.write(t, 1, func(r *gates.Record) { r.SchemaVersion = "0.9.0" }) }, ctoharness.BlockPrevStageSchema},
		{"stale", func(t *testing.T, f *fixture) {
			f.write(t, 1, func(r *gates.Record) { r.ValidatedAt = f.now.Add(-25 * time.Hour) })
		}, ctoharness.BlockPrevStageStale},
		{"from the future", func(t *testing.T, f *fixture) {
			f.write(t, 1, func(r *gates.Record) { r.ValidatedAt = f.now.Add(time.Hour) })
		}, ctoharness.BlockPrevStageStale},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1)
			tc.damage(t, f)
			_, err := f.check().Verify(context.Background(), 1)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var be *ctoharness.BlockerError
			if !errors.As(err, &be) || be.Blocker.Code != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
}

func TestCheckDecisions(t *testing.T) {
	f := newFixture(t, 2)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name  string
		stage int
		env   map[string]string
		want  []ctoharness.BlockerCode
	}{
		{"stage 1 needs nothing", 1, nil, nil},
		{"stage 3 open", 3, map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}, nil},
		{"allow missing", 3, map[string]string{gates.EnvCaseStage: "3"}, []ctoharness.BlockerCode{ctoharness.BlockAllowCaseMissing}},
		{"allow not 1", 3, map[string]string{gates.EnvAllowCase: "true", gates.EnvCaseStage: "3"}, []ctoharness.BlockerCode{ctoharness.BlockAllowCaseMissing}},
		{"stage missing", 3, map[string]string{gates.EnvAllowCase: "1"}, []ctoharness.BlockerCode{ctoharness.BlockCaseStageMissing}},
		{"stage mismatch", 3, map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "2"}, []ctoharness.BlockerCode{ctoharness.BlockCaseStageMismatch}},
		{"previous missing", 2, map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "2"}, []ctoharness.BlockerCode{ctoharness.BlockPrevStageMissing}},
		{"all at once", 2, nil, []ctoharness.BlockerCode{ctoharness.BlockAllowCaseMissing, ctoharness.BlockCaseStageMissing, ctoharness.BlockPrevStageMissing}},
		{"stage 5", 5, map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "5"}, []ctoharness.BlockerCode{ctoharness.BlockStageNotApproved}},
		{"stage 0", 0, nil, []ctoharness.BlockerCode{ctoharness.BlockStageUnknown}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The fixture's records are unsigned; signatures are TestRecordSignature's.
			d := gates.Check(context.Background(), gates.Request{Stage: tc.stage, Getenv: env(tc.env), Records: f.check(),
				Signing: attest.Keys{Disabled: "ladder decisions only"}})
			var got []ctoharness.BlockerCode
			for _, b := range d.Blockers {
				got = append(got, b.Code)
				if b.Step != ctoharness.StepGate || b.Message == "" {
					t.Errorf("blocker %+v lacks step or message", b)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
			if d.Allowed() != (len(tc.want) == 0) {
				t.Fatalf("Allowed() = %v", d.Allowed())
			}
			if tc.stage == 3 && d.Allowed() && (d.Previous == nil || d.Previous.Stage != 2) {
				t.Fatalf("previous record not returned: %+v", d.Previous)
			}
		})
	}
	// Without the opt-out the same open stage 3 refuses the unsigned record.
	d := gates.Check(context.Background(), gates.Request{Stage: 3, Getenv: env(map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}), Records: f.check()})
	if len(d.Blockers) != 1 || d.Blockers[0].Code != ctoharness.BlockStageRecordUntrusted {
		t.Fatalf("unsigned record without an opt-out: %+v", d.Blockers)
	}
}

// TestRefusalNamesThePasteableCommand checks that a missing record asks for
// validate-stage with the runs directory and config of this run, so the
// command can be pasted as it is; paths that a shell would split are quoted.
func TestRefusalNamesThePasteableCommand(t *testing.T) {
	f := newFixture(t, 1)
	os.Remove(gates.RecordPath(f.dir, 1))
	rc := f.check()
	rc.ConfigFile = "/home/me/harness.json"
	_, err := rc.Verify(context.Background(), 1)
	var be *ctoharness.BlockerError
	if !errors.As(err, &be) {
		t.Fatalf("Verify = %v, want a blocker", err)
	}
	want := "run 'cto-harness --runs-dir " + f.dir + " --config /home/me/harness.json validate-stage 1' first"
	if !strings.HasSuffix(be.Blocker.Message, want) {
		t.Errorf("message %q, want it to end with %q", be.Blocker.Message, want)
	}
	if got, want := gates.StageCommand("/srv/my runs", "", 2), `cto-harness --runs-dir '/srv/my runs' validate-stage 2`; got != want {
		t.Errorf("StageCommand = %q, want %q", got, want)
	}
	if got, want := gates.StageCommand("", "", 2), "cto-harness validate-stage 2"; got != want {
		t.Errorf("StageCommand = %q, want %q", got, want)
	}
}
