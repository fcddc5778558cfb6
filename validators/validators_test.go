package validators_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == backend.FakeSubcommand {
		os.Exit(fakecase.Main(os.Args[2:], os.Stdout, os.Stderr, os.Getenv))
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.Subcommand {
		os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == supervise.Subcommand {
		os.Exit(supervise.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

func stageOpts(t testing.TB, runs string) (validators.StageOptions, *schemas.Set) {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	return validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: testKeys, RequireSignature: true}, set
}

// testKeys sign every stage these tests validate, in memory: one pair for
// the whole package, so that a stage validated in one call is trusted in
// the next, as the machine key makes it outside tests.
var testKeys = func() attest.Keys {
	k, err := attest.Ephemeral()
	if err != nil {
		panic(err)
	}
	return k
}()

// passRun validates stage 2 (and so stage 1) in a fresh runs dir and returns
// the stage 2 pass run directory.
func passRun(t *testing.T) (string, *schemas.Set, string) {
	t.Helper()
	runs := t.TempDir()
	o, set := stageOpts(t, runs)
	res := validators.Stage(context.Background(), 2, o)
	if !res.OK {
		t.Fatalf("stage 2: %v", res.Errors)
	}
	return res.PassArtifactPath, set, runs
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case info.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, info.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Changing one byte of any artifact makes validation fail and name it.
func TestOneByteTamperNamesArtifact(t *testing.T) {
	run, set, _ := passRun(t)
	if res := validators.Run(context.Background(), run, set, validators.RunOptions{ExpectPass: true}); !res.OK {
		t.Fatalf("pristine run invalid: %v", res.Errors)
	}
	names, err := evidence.ListArtifacts(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 14 {
		t.Fatalf("only %d artifacts: %v", len(names), names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(run))
			copyTree(t, run, dir)
			p := filepath.Join(dir, filepath.FromSlash(name))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) == 0 {
				data = []byte{'x'}
			} else {
				i := len(data) / 2
				data[i] ^= 0x01
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			res := validators.Run(context.Background(), dir, set, validators.RunOptions{})
			if res.OK {
				t.Fatalf("a changed byte in %s went unnoticed", name)
			}
			named := false
			for _, f := range res.Errors {
				// Without trusted keys a flipped byte in the envelope's payload
				// shows as the subject digests it changed: the attestation check.
				if f.Artifact == name || (name == "attestation.dsse.json" && f.Check == "attestation") {
					named = true
				}
			}
			if !named {
				t.Fatalf("errors do not name %s: %v", name, res.Errors)
			}
		})
	}
}

func editJSON(t *testing.T, p string, edit func(map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Each check fails on its own kind of damage, even when the damage is made
// consistent with the digests (the report re-sealed).
func TestEachCheckCatchesItsDamage(t *testing.T) {
	run, set, _ := passRun(t)
	reseal := func(t *testing.T, dir string) {
		// Recompute digests and the report checksum so only the semantic check can object.
		var rep ctoharness.Report
		data, _ := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		d, err := evidence.Digests(dir)
		if err != nil {
			t.Fatal(err)
		}
		rep.ArtifactDigests = d
		out, _ := json.MarshalIndent(rep, "", "  ")
		out = append(out, '\n')
		os.WriteFile(filepath.Join(dir, evidence.ReportJSON), out, 0o644)
		sum, _ := evidence.FileSHA256(filepath.Join(dir, evidence.ReportJSON))
		os.WriteFile(filepath.Join(dir, evidence.ReportSum), []byte(sum+"  report.json\n"), 0o644)
	}
	cases := []struct {
		check  string
		damage func(t *testing.T, dir string)
	}{
		{"artifacts_present", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, evidence.CleanEnd)) }},
		{"artifact_digests", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "extra.txt"), []byte("added later\n"), 0o644)
		}},
		{"source_non_mutation", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.SourceAfter), func(m map[string]any) {
				man := m["manifest"].([]any)
				man[1].(map[string]any)["ctime_ns"] = float64(42)
			})
			reseal(t, dir)
		}},
		{"source_non_mutation", func(t *testing.T, dir string) {
			// The report names a separate git directory the proofs never read.
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) { m["source_git_dir"] = "/elsewhere/repo.git" })
			reseal(t, dir)
		}},
		{"trace_roots", func(t *testing.T, dir string) {
			// The harness wrote into the source's separate git directory.
			var rep ctoharness.Report
			data, _ := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
			json.Unmarshal(data, &rep)
			gd := filepath.Join(rep.RuntimeWorkspaceRoot, "separate.git") // inside a harness root, so only the git directory rule objects
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) { m["source_git_dir"] = gd })
			f, _ := os.OpenFile(filepath.Join(dir, evidence.TraceFile), os.O_APPEND|os.O_WRONLY, 0)
			line, _ := json.Marshal(ctoharness.TraceEntry{Seq: 10000, RunID: rep.RunID, Op: ctoharness.TraceWrite, Path: gd + "/HEAD", Step: ctoharness.StepReport})
			f.Write(append(line, '\n'))
			f.Close()
			reseal(t, dir)
		}},
		{"sandbox_view", func(t *testing.T, dir string) {
			// The source's separate git directory bound into the view.
			editView(t, dir, func(rep *ctoharness.Report, v *ctoharness.ViewRecord) {
				rep.SourceGitDir = "/opt/cto-harness-separate.git" // under no owned root or hidden path
				v.Mounts = append(v.Mounts, ctoharness.ViewMount{Path: "/gd", Kind: ctoharness.ViewBind, Source: rep.SourceGitDir, Mode: ctoharness.ViewRO})
			})
			reseal(t, dir)
		}},
		{"task_contract", func(t *testing.T, dir string) {
			// The contract names the source's separate git directory.
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) { m["source_git_dir"] = "/elsewhere/repo.git" })
			editJSON(t, filepath.Join(dir, evidence.TaskFile), func(m map[string]any) { m["task"] = "see /elsewhere/repo.git" })
			reseal(t, dir)
		}},
		{"fixture_clean_end", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.CleanEnd), func(m map[string]any) {
				m["clean"] = false
				m["problems"] = []any{"untracked file x"}
			})
			reseal(t, dir)
		}},
		{"changed_files_allowed", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
				m["allowed_paths"] = []any{"elsewhere/**"}
			})
			reseal(t, dir)
		}},
		{"status_consistent", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
				m["case"].(map[string]any)["exit_code"] = float64(1)
			})
			reseal(t, dir)
		}},
		{"freshness", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.TaskFile), func(m map[string]any) { m["run_id"] = "20200101T000000Z-s2-00000000" })
			reseal(t, dir)
		}},
		{"trace_roots", func(t *testing.T, dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, evidence.TraceFile), os.O_APPEND|os.O_WRONLY, 0)
			var rep ctoharness.Report
			data, _ := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
			json.Unmarshal(data, &rep)
			line, _ := json.Marshal(ctoharness.TraceEntry{Seq: 10000, RunID: rep.RunID, Op: ctoharness.TraceWrite, Path: "/etc/elsewhere", Step: ctoharness.StepReport})
			f.Write(append(line, '\n'))
			f.Close()
			reseal(t, dir)
		}},
		{"sandbox_view", func(t *testing.T, dir string) {
			// A writable /usr, consistently digested.
			editView(t, dir, func(rep *ctoharness.Report, v *ctoharness.ViewRecord) {
				for i := range v.Mounts {
					if v.Mounts[i].Path == "/usr" {
						v.Mounts[i].Mode = ctoharness.ViewRW
					}
				}
			})
			reseal(t, dir)
		}},
		{"sandbox_view", func(t *testing.T, dir string) {
			// The source bound into the view.
			editView(t, dir, func(rep *ctoharness.Report, v *ctoharness.ViewRecord) {
				v.Mounts = append(v.Mounts, ctoharness.ViewMount{Path: "/src", Kind: ctoharness.ViewBind, Source: rep.SourcePath, Mode: ctoharness.ViewRO})
			})
			reseal(t, dir)
		}},
		{"sandbox_view", func(t *testing.T, dir string) {
			// A directory that holds /root bound without a mask over it.
			editView(t, dir, func(rep *ctoharness.Report, v *ctoharness.ViewRecord) {
				v.Mounts = append(v.Mounts, ctoharness.ViewMount{Path: "/host", Kind: ctoharness.ViewBind, Source: "/", Mode: ctoharness.ViewRO})
			})
			reseal(t, dir)
		}},
		{"sandbox_view", func(t *testing.T, dir string) {
			// A mount dropped from the record, the digest left as it was.
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
				v := m["sandbox"].(map[string]any)["view"].(map[string]any)
				v["mounts"] = v["mounts"].([]any)[1:]
			})
			reseal(t, dir)
		}},
		{"report_schema", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) { m["status"] = "pasz" })
			reseal(t, dir)
		}},
		{"artifact_schemas", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.TaskFile), func(m map[string]any) { m["source_path"] = "/somewhere" })
			reseal(t, dir)
		}},
		{"task_contract", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.TaskFile), func(m map[string]any) { m["allowed_paths"] = []any{"**"} })
			reseal(t, dir)
		}},
		{"tests", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
				m["tests"].(map[string]any)["exit_code"] = float64(1)
			})
			reseal(t, dir)
		}},
		{"tests", func(t *testing.T, dir string) {
			// The verification claims to have run on the baseline, not the result.
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
				m["tests"].(map[string]any)["verified_tree"] = m["commits"].(map[string]any)["baseline_tree"]
			})
			reseal(t, dir)
		}},
		{"sandbox_view", func(t *testing.T, dir string) {
			// A file of the source shown at /etc/hosts: only the harness's
			// own hosts file, from the run's workspace, may be.
			editVerificationView(t, dir, func(rep *ctoharness.Report, v *ctoharness.ViewRecord) {
				v.Mounts = append(v.Mounts, ctoharness.ViewMount{Path: "/etc/hosts", Kind: ctoharness.ViewBind,
					Source: filepath.Join(rep.SourcePath, "hosts-verify"), Mode: ctoharness.ViewRO})
			})
			reseal(t, dir)
		}},
		{"sandbox_view", func(t *testing.T, dir string) {
			// Case's fixture shown to the verification, read-only.
			editVerificationView(t, dir, func(rep *ctoharness.Report, v *ctoharness.ViewRecord) {
				v.Mounts = append(v.Mounts, ctoharness.ViewMount{Path: "/case", Kind: ctoharness.ViewBind, Source: rep.FixturePath, Mode: ctoharness.ViewRO})
			})
			reseal(t, dir)
		}},
		{"patch_rederived", func(t *testing.T, dir string) {
			// The store's branch moved back to the baseline: the record no
			// longer holds the result the report names.
			var rep ctoharness.Report
			data, _ := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
			json.Unmarshal(data, &rep)
			ref := filepath.Join(dir, evidence.StoreDir, "refs", "heads", "main")
			if err := os.WriteFile(ref, []byte(rep.Commits.BaselineCommit+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"fixture_objects", func(t *testing.T, dir string) {
			// An object of the source's other history in the store: had it
			// reached Case's .git, the store made from it would hold it.
			r, err := git.PlainOpen(filepath.Join(dir, evidence.StoreDir))
			if err != nil {
				t.Fatal(err)
			}
			obj := r.Storer.NewEncodedObject()
			obj.SetType(plumbing.BlobObject)
			w, _ := obj.Writer()
			w.Write([]byte("the answer, from a branch of the future\n"))
			w.Close()
			if _, err := r.Storer.SetEncodedObject(obj); err != nil {
				t.Fatal(err)
			}
		}},
		{"fixture_objects", func(t *testing.T, dir string) {
			// The report's record of the objects no longer matches the store.
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
				m["fixture_objects"].(map[string]any)["objects"] = float64(3)
			})
			reseal(t, dir)
		}},
		{"event_order", func(t *testing.T, dir string) {
			// Drop fixture_clean_start and rebuild a consistent chain: only the order check can object.
			p := filepath.Join(dir, evidence.EventsFile)
			data, _ := os.ReadFile(p)
			var rep ctoharness.Report
			raw, _ := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
			json.Unmarshal(raw, &rep)
			prev := evidence.GenesisHash(rep.RunID, rep.Freshness.Nonce)
			var out []byte
			seq := 0
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var e ctoharness.Event
				json.Unmarshal([]byte(line), &e)
				if e.Type == ctoharness.EvFixtureCleanStart {
					continue
				}
				seq++
				e.Seq, e.Prev = seq, prev
				b, _ := json.Marshal(e)
				prev = evidence.LineHash(b)
				out = append(append(out, b...), '\n')
			}
			os.WriteFile(p, out, 0o644)
			editJSON(t, filepath.Join(dir, evidence.ReportJSON), func(m map[string]any) {
				f := m["freshness"].(map[string]any)
				f["final_event_hash"] = prev
				f["events"] = float64(seq)
			})
			reseal(t, dir)
		}},
		{"report_page", func(t *testing.T, dir string) {
			// The page claims a different outcome than the evidence; digests re-sealed.
			p := filepath.Join(dir, evidence.ReportHTML)
			data, _ := os.ReadFile(p)
			edited := strings.Replace(string(data), `id="status">pass<`, `id="status">blocked<`, 1)
			if edited == string(data) {
				t.Fatal("the page does not carry the status where the test expects it")
			}
			os.WriteFile(p, []byte(edited), 0o644)
			reseal(t, dir)
		}},
		{"event_chain", func(t *testing.T, dir string) {
			p := filepath.Join(dir, evidence.EventsFile)
			data, _ := os.ReadFile(p)
			lines := strings.SplitAfter(string(data), "\n")
			lines[1], lines[2] = lines[2], lines[1]
			os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644)
			reseal(t, dir)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.check, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(run))
			copyTree(t, run, dir)
			tc.damage(t, dir)
			res := validators.Run(context.Background(), dir, set, validators.RunOptions{})
			found := false
			for _, f := range res.Errors {
				if f.Check == tc.check {
					found = true
				}
			}
			if !found {
				t.Fatalf("check %s did not fire; errors: %v", tc.check, res.Errors)
			}
		})
	}
}

func TestValidateMissingDir(t *testing.T) {
	set, _ := schemas.Compile()
	res := validators.Run(context.Background(), filepath.Join(t.TempDir(), "nope"), set, validators.RunOptions{})
	if res.OK || len(res.Errors) == 0 {
		t.Fatal("a missing directory validated")
	}
}

func TestStage3(t *testing.T) {
	runs := t.TempDir()
	o, set := stageOpts(t, runs)
	o.Health = func(ctx context.Context) (any, bool) { return map[string]any{"ok": true}, true }
	o.HarnessRoot = ".."
	res := validators.Stage(context.Background(), 3, o)
	if !res.OK {
		t.Fatalf("stage 3: %v", res.Errors)
	}
	for _, name := range []string{"governance_documents", "fixture:timeout", "fixture:source-is-target", "stage_2_validated", "gate_allow_case_missing", "gate_case_stage_mismatch", "pass_route", "stage2_expectations", "health", "record_written"} {
		if !contains(res.Checked, name) {
			t.Errorf("check %s missing from %v", name, res.Checked)
		}
	}
	if res.SourceNonMutationProofPath == "" || res.PassArtifactPath == "" || len(res.FailureArtifactPaths) < 2 {
		t.Fatalf("paths missing: %+v", res)
	}
	// The one full replay of the failure matrix in this package: every row
	// was replayed (and failed closed as the matrix says, or res.OK would
	// be false), and each row's evidence is still there.
	rows, err := fixtures.Matrix()
	if err != nil || len(rows) < 20 {
		t.Fatalf("the matrix: %d rows, %v", len(rows), err)
	}
	for _, row := range rows {
		if !contains(res.Checked, "fixture:"+row.Name) {
			t.Errorf("row %s was not replayed", row.Name)
		}
		if _, err := os.Stat(filepath.Join(res.FailureArtifactPaths[row.Name], evidence.ReportJSON)); err != nil {
			t.Errorf("row %s: the evidence the replay names is gone: %v", row.Name, err)
		}
	}
	// The replay is recorded as the latest, which supersedes every earlier
	// one: pruning keeps all its folders. (The command line's pruning of
	// what it supersedes is cli/testdata/e2e/validate_stage3.txtar.)
	if !res.MatrixReplayed {
		t.Error("the full replay was not recorded as the latest")
	}
	if p, err := runlist.PruneMatrix(runs, true); err != nil || len(p.Removed) != 0 || len(p.Kept) == 0 {
		t.Errorf("pruning after the full replay would remove %v and keep %d folders (%v)", p.Removed, len(p.Kept), err)
	}
	// Its record now opens stage 4? No: stage 4 is never approved, but the record itself verifies.
	rc := gates.RecordCheck{Dir: harness.RecordsDir(runs), RunsDir: runs, MaxAge: time.Hour, Now: time.Now(),
		Validate: set.Validator(schemas.StageRecord), VerifyRun: validators.StageRunVerifier(set)}
	if _, err := rc.Verify(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(res)
	if err := set.Validate(schemas.StageResult, line); err != nil {
		t.Fatalf("stage result line does not match its schema: %v", err)
	}
}

// A stale or tampered stage 2 record makes stage 3 validation fail rather
// than silently re-running stage 2.
func TestStage3RefusesBadStage2Record(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(r map[string]any)
		clock  time.Duration
	}{
		{"tampered", func(r map[string]any) { r["run_id"] = "20200101T000000Z-s2-00000000" }, 0},
		{"stale", func(map[string]any) {}, 48 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := t.TempDir()
			o, _ := stageOpts(t, runs)
			if res := validators.Stage(context.Background(), 2, o); !res.OK {
				t.Fatal(res.Errors)
			}
			editJSON(t, gates.RecordPath(harness.RecordsDir(runs), 2), tc.damage)
			o.Clock = func() time.Time { return time.Now().Add(tc.clock) }
			o.HarnessRoot = ".."
			res := validators.Stage(context.Background(), 3, o)
			if res.OK || len(res.Errors) == 0 || !strings.Contains(res.Errors[0], "stage_2_validated") {
				t.Fatalf("stage 3 accepted a %s stage 2 record: %+v", tc.name, res)
			}
		})
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

func TestGovernanceDocs(t *testing.T) {
	for _, d := range validators.GovernanceDocs() {
		if err := validators.CheckGovernanceDoc(filepath.Join("..", d)); err != nil {
			t.Error(err)
		}
	}
	dir := t.TempDir()
	bad := map[string]string{
		"no-front-matter.md": "# title\n",
		"unclosed.md":        "---\nname: x\n",
		"missing-owner.md":   "---\nname: x\nstatus: draft\ncreated: 2026-01-01\nlast_reviewed: 2026-01-01\ndescription: d\n---\n",
		"bad-date.md":        "---\nname: x\nstatus: draft\nowner: o\ncreated: yesterday\nlast_reviewed: 2026-01-01\ndescription: d\n---\n",
	}
	for name, content := range bad {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		if err := validators.CheckGovernanceDoc(p); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if err := validators.CheckGovernanceDoc(filepath.Join(dir, "absent.md")); err == nil {
		t.Error("a missing document accepted")
	}
	// Stage 3 validation without the documents is not ok, and stops
	// before it runs anything: no stage is validated, no row replayed.
	runs := t.TempDir()
	o, _ := stageOpts(t, runs)
	o.HarnessRoot = dir
	res := validators.Stage(context.Background(), 3, o)
	if res.OK || len(res.Errors) == 0 || !strings.HasPrefix(res.Errors[0], "governance_documents:") {
		t.Fatalf("stage 3 validated without governance documents: %v", res.Errors)
	}
	if len(res.Checked) != 1 || res.PassArtifactPath != "" || len(res.FailureArtifactPaths) != 0 {
		t.Errorf("stage 3 went on after the governance documents failed: %+v", res)
	}
	if left, _ := os.ReadDir(runs); len(left) != 0 {
		t.Errorf("stage 3 without governance documents wrote to its runs directory: %v", left)
	}
}

// editView changes the recorded Case view and recomputes its digest, so only
// the view's own rules can object.
// editVerificationView is editView for the verification command's view.
func editVerificationView(t *testing.T, dir string, edit func(*ctoharness.Report, *ctoharness.ViewRecord)) {
	t.Helper()
	editViewOf(t, dir, func(r *ctoharness.Report) *ctoharness.ViewRecord { return r.Sandbox.VerificationView }, edit)
}

func editView(t *testing.T, dir string, edit func(*ctoharness.Report, *ctoharness.ViewRecord)) {
	t.Helper()
	editViewOf(t, dir, func(r *ctoharness.Report) *ctoharness.ViewRecord { return r.Sandbox.View }, edit)
}

// editViewOf edits the view pick names in report.json and re-digests it.
func editViewOf(t *testing.T, dir string, pick func(*ctoharness.Report) *ctoharness.ViewRecord, edit func(*ctoharness.Report, *ctoharness.ViewRecord)) {
	t.Helper()
	p := filepath.Join(dir, evidence.ReportJSON)
	var rep ctoharness.Report
	data, _ := os.ReadFile(p)
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	v := pick(&rep)
	if v == nil {
		t.Fatal("the pass run recorded no such sandbox view")
	}
	edit(&rep, v)
	v.Digest = ctoharness.ViewDigest(v.Mounts)
	out, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(p, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
