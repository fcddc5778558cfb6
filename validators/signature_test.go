package validators_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
	"github.com/cto-harness/cto-harness/harness/reportmd"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

func newKeys(t *testing.T) attest.Keys {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	pub, err := attest.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := attest.LoadSigner(filepath.Join(dir, attest.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return attest.Keys{Signer: s, Trusted: []attest.PublicKey{pub}}
}

// signedStage2 validates stage 2 with a signing key in a fresh runs
// directory and returns the result, the keys and the schemas.
func signedStage2(t *testing.T) (validators.StageResult, attest.Keys, *schemas.Set, string) {
	t.Helper()
	runs := t.TempDir()
	o, set := stageOpts(t, runs)
	o.Signing = newKeys(t)
	o.RequireSignature = true
	res := validators.Stage(context.Background(), 2, o)
	if !res.OK {
		t.Fatalf("signed stage 2: %v", res.Errors)
	}
	return res, o.Signing, set, runs
}

// tamper lets f damage the run directory in place (a copy elsewhere would
// be refused for being relocated) and restores it afterwards.
func tamper(t *testing.T, dir string, f func(dir string)) {
	t.Helper()
	backup := filepath.Join(t.TempDir(), "backup")
	copyTree(t, dir, backup)
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		copyTree(t, backup, dir)
	})
	f(dir)
}

// replica copies a run directory next to the original under another name.
func replica(t *testing.T, src, name string) string {
	t.Helper()
	dst := filepath.Join(filepath.Dir(src), name)
	copyTree(t, src, dst)
	t.Cleanup(func() { os.RemoveAll(dst) })
	return dst
}

func sha(t *testing.T, p string) string {
	t.Helper()
	s, err := evidence.FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rewriteReport edits report.json, re-renders report.md and recomputes
// every digest, as someone able to write the runs directory would.
func rewriteReport(t *testing.T, dir string, edit func(*ctoharness.Report)) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	var r ctoharness.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	edit(&r)
	md := filepath.Join(dir, evidence.ReportMD)
	if err := os.WriteFile(md, reportmd.Markdown(&r), 0o644); err != nil {
		t.Fatal(err)
	}
	r.ArtifactDigests[evidence.ReportMD] = sha(t, md)
	// A consistent forger renders the run page again too.
	page, err := htmlreport.RenderReport(&r, dir)
	if err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, evidence.ReportHTML)
	if err := os.WriteFile(html, page, 0o644); err != nil {
		t.Fatal(err)
	}
	r.ArtifactDigests[evidence.ReportHTML] = sha(t, html)
	out, _ := json.MarshalIndent(r, "", "  ")
	out = append(out, '\n')
	if err := os.WriteFile(filepath.Join(dir, evidence.ReportJSON), out, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(out)
	if err := os.WriteFile(filepath.Join(dir, evidence.ReportSum), []byte(hex.EncodeToString(sum[:])+"  report.json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func onlyCheck(t *testing.T, res validators.Result, check, want string) {
	t.Helper()
	if res.OK {
		t.Fatalf("forged evidence validated: %+v", res)
	}
	found := false
	for _, f := range res.Errors {
		if f.Check == check && strings.Contains(f.String(), want) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no %s error mentioning %q; errors: %v", check, want, res.Errors)
	}
}

func TestSignedRunsAndForgeries(t *testing.T) {
	ctx := context.Background()
	res, keys, set, runs := signedStage2(t)
	if !res.Signed || !res.SignatureOK || res.KeyID != keys.Signer.Public().ID {
		t.Fatalf("stage result signed=%v ok=%v key=%q", res.Signed, res.SignatureOK, res.KeyID)
	}
	if _, err := os.Stat(gates.SignaturePath(harness.RecordsDir(runs), 2)); err != nil {
		t.Fatalf("the stage 2 record is not signed: %v", err)
	}
	pass := res.PassArtifactPath
	other := newKeys(t)
	trusted := validators.RunOptions{Trusted: keys.Trusted, RequireSignature: true}

	t.Run("genuine", func(t *testing.T) {
		v := validators.Run(ctx, pass, set, trusted)
		if !v.OK || !v.Signed || !v.SignatureOK || v.KeyID != keys.Signer.Public().ID {
			t.Fatalf("a genuine signed run: %+v", v)
		}
	})
	t.Run("report rewritten with all digests recomputed", func(t *testing.T) {
		tamper(t, pass, func(dir string) {
			log := filepath.Join(dir, evidence.TestLog)
			f, _ := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("ok  forged line\n")
			f.Close()
			rewriteReport(t, dir, func(r *ctoharness.Report) {
				r.ArtifactDigests[evidence.TestLog] = sha(t, log)
				r.Case.DurationMs++
			})
		})
		// Without any trusted key the digests alone are consistent, but the
		// attestation's subjects are not.
		v := validators.Run(ctx, pass, set, validators.RunOptions{})
		onlyCheck(t, v, "attestation", "does not match the signed")
		for _, f := range v.Errors {
			if f.Check != "attestation" {
				t.Errorf("only the signature may catch this forgery, but %s", f)
			}
		}
	})
	t.Run("re-signed by an unknown key", func(t *testing.T) {
		tamper(t, pass, func(dir string) {
			rewriteReport(t, dir, func(r *ctoharness.Report) { r.Case.DurationMs++; r.SigningKeyID = other.Signer.Public().ID })
			resign(t, dir, other.Signer)
		})
		onlyCheck(t, validators.Run(ctx, pass, set, trusted), "attestation", "signed by no trusted key")
	})
	t.Run("verified with an unknown key", func(t *testing.T) {
		onlyCheck(t, validators.Run(ctx, pass, set, validators.RunOptions{Trusted: other.Trusted, RequireSignature: true}), "attestation", "signed by no trusted key")
		// Accepting unsigned evidence accepts it unverified, and says so.
		if v := validators.Run(ctx, pass, set, validators.RunOptions{Trusted: other.Trusted}); !v.OK || !v.Signed || v.SignatureOK {
			t.Fatalf("unverified but accepted: %+v", v)
		}
	})
	t.Run("envelope from another run copied in", func(t *testing.T) {
		stage1 := readRecord(t, runs, 1).RunDir
		data, err := os.ReadFile(filepath.Join(stage1, evidence.Attestation))
		if err != nil {
			t.Fatal(err)
		}
		tamper(t, pass, func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, evidence.Attestation), data, 0o644); err != nil {
				t.Fatal(err)
			}
		})
		v := validators.Run(ctx, pass, set, trusted)
		onlyCheck(t, v, "attestation", "belongs to another run")
		onlyCheck(t, v, "attestation", "found in directory")
	})
	t.Run("truncated envelope", func(t *testing.T) {
		tamper(t, pass, func(dir string) {
			p := filepath.Join(dir, evidence.Attestation)
			data, _ := os.ReadFile(p)
			if err := os.WriteFile(p, data[:len(data)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		})
		onlyCheck(t, validators.Run(ctx, pass, set, trusted), "attestation", "malformed")
	})
	t.Run("replayed under another run id", func(t *testing.T) {
		dir := replica(t, pass, "20991231T000000Z-s2-deadbeef")
		onlyCheck(t, validators.Run(ctx, dir, set, trusted), "attestation", "replayed under another run id")
	})
	t.Run("attestation removed", func(t *testing.T) {
		tamper(t, pass, func(dir string) { os.Remove(filepath.Join(dir, evidence.Attestation)) })
		onlyCheck(t, validators.Run(ctx, pass, set, validators.RunOptions{}), "attestation", "says the run is signed")
	})
	t.Run("downgraded to unsigned", func(t *testing.T) {
		tamper(t, pass, func(dir string) {
			os.Remove(filepath.Join(dir, evidence.Attestation))
			rewriteReport(t, dir, func(r *ctoharness.Report) { r.Signed, r.SigningKeyID = false, "" })
		})
		if v := validators.Run(ctx, pass, set, validators.RunOptions{}); !v.OK || v.Signed {
			t.Fatalf("an unsigned run is valid but must say so: %+v", v)
		}
		onlyCheck(t, validators.Run(ctx, pass, set, trusted), "attestation", "--allow-unsigned")
	})
	t.Run("attestation write not traced", func(t *testing.T) {
		tamper(t, pass, func(dir string) {
			tr := filepath.Join(dir, evidence.TraceFile)
			data, _ := os.ReadFile(tr)
			var kept []string
			for _, l := range strings.SplitAfter(string(data), "\n") {
				if !strings.Contains(l, evidence.Attestation) {
					kept = append(kept, l)
				}
			}
			if err := os.WriteFile(tr, []byte(strings.Join(kept, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			rewriteReport(t, dir, func(r *ctoharness.Report) { r.ArtifactDigests[evidence.TraceFile] = sha(t, tr) })
			resign(t, dir, keys.Signer) // even the genuine key cannot make an untraced write acceptable
		})
		onlyCheck(t, validators.Run(ctx, pass, set, trusted), "attestation", "is not traced")
	})
	t.Run("file added after signing", func(t *testing.T) {
		tamper(t, pass, func(dir string) { os.WriteFile(filepath.Join(dir, "backend", "extra.log"), []byte("x\n"), 0o644) })
		onlyCheck(t, validators.Run(ctx, pass, set, trusted), "attestation", "not covered by the attestation")
	})
}

// resign replaces the run's attestation with one over its current files,
// signed by s: what a forger holding their own key would do.
func resign(t *testing.T, dir string, s *attest.Signer) {
	t.Helper()
	os.Remove(filepath.Join(dir, evidence.Attestation))
	names, err := evidence.ListArtifacts(dir)
	if err != nil {
		t.Fatal(err)
	}
	var subs []attest.Subject
	for _, n := range names {
		subs = append(subs, attest.Subject{Name: n, SHA256: sha(t, filepath.Join(dir, n))})
	}
	env, err := os.ReadFile(filepath.Join(dir, evidence.ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	var r ctoharness.Report
	_ = json.Unmarshal(env, &r)
	payload, err := attest.NewStatement(subs, attest.RunPredicateType, attest.RunPredicate{RunID: r.RunID, Stage: r.Stage, Status: r.Status,
		Blockers: []string{}, Nonce: r.Freshness.Nonce, FinalEventHash: r.Freshness.FinalEventHash, Qualifies: r.Qualifies,
		StartedAt: r.Freshness.StartedAt, FinishedAt: r.Freshness.FinishedAt, SignedAt: r.Freshness.FinishedAt,
		Harness: attest.HarnessIdentity{Version: "0.1.0", SchemaVersion: ctoharness.SchemaVersion}, Sandbox: attest.SandboxStrength{Mechanisms: []string{}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := attest.Sign(context.Background(), s, payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, evidence.Attestation), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGateRefusesUntrustedRecord drives the stage 3 gate with a signed stage
// 2 record, then with the record forged consistently, unsigned, and checked
// against an unknown key.
func TestGateRefusesUntrustedRecord(t *testing.T) {
	ctx := context.Background()
	_, keys, set, runs := signedStage2(t)
	other := newKeys(t)
	dir := harness.RecordsDir(runs)
	env := func(k string) string {
		return map[string]string{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}[k]
	}
	check := func(trusted []attest.PublicKey, disabled ...string) []string {
		k := attest.Keys{Trusted: trusted}
		if len(disabled) > 0 {
			k.Disabled = disabled[0]
		}
		d := gates.Check(ctx, gates.Request{Stage: 3, Getenv: env, Signing: k, Records: gates.RecordCheck{Dir: dir,
			RunsDir: runs, VerifyRun: validators.StageRunVerifier(set),
			MaxAge: 24 * 3600e9, Now: readRecord(t, runs, 2).ValidatedAt, Validate: set.Validator(schemas.StageRecord)}})
		var codes []string
		for _, b := range d.Blockers {
			codes = append(codes, string(b.Code))
		}
		return codes
	}
	want := func(name string, got []string, codes ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(codes, ",") {
			t.Errorf("%s: blockers %v, want %v", name, got, codes)
		}
	}
	want("genuine, trusted", check(keys.Trusted))
	want("genuine, no trusted keys", check(nil), string(ctoharness.BlockStageRecordUntrusted))
	want("genuine, unknown key", check(other.Trusted), string(ctoharness.BlockStageRecordUntrusted))

	p := gates.RecordPath(dir, 2)
	orig, _ := os.ReadFile(p)
	rec := readRecord(t, runs, 2)
	rec.Checked = append(rec.Checked, "forged")
	rec.Seal()
	forged, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(p, append(forged, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	// No trusted key used to let this through; now only the explicit
	// opt-out does, and the next run's signed predicate says so.
	want("forged consistently, no trusted keys", check(nil), string(ctoharness.BlockStageRecordUntrusted))
	want("forged consistently, signing disabled in the config", check(nil, "test opt-out"))
	want("forged consistently, trusted", check(keys.Trusted), string(ctoharness.BlockStageRecordUntrusted))
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gates.SignaturePath(dir, 2)); err != nil {
		t.Fatal(err)
	}
	want("unsigned, trusted", check(keys.Trusted), string(ctoharness.BlockStageRecordUntrusted))
}
