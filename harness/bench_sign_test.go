package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// BenchmarkSigningOverheadSample measures what signing and verifying add to a
// stage 3 pass-route run on the embedded sample repository. Unsigned runs
// (signing disabled in the config: nothing signed, nothing verified at the
// gate or by validate; run + validate) and signed runs (the default: the
// machine key loaded and the binary hashed afresh as a command would, the
// previous record and run verified at the gate, run + attestation, validate
// against the trusted key) are interleaved, and the medians compared. The target (under 5 % of the run)
// is checked on CPU time from getrusage, which a machine shared with other
// work disturbs far less than wall time; the wall-time medians are reported
// too.
func BenchmarkSigningOverheadSample(b *testing.B) {
	ctx := context.Background()
	keyDir := filepath.Join(b.TempDir(), "keys")
	pub, err := attest.Generate(keyDir)
	if err != nil {
		b.Fatal(err)
	}
	stageSigner, err := attest.LoadSigner(filepath.Join(keyDir, attest.PrivateKeyFile))
	if err != nil {
		b.Fatal(err)
	}
	// The stage 2 record is signed, so that a signed run's gate verifies it.
	base, set := sampleStage3(b, attest.Keys{Signer: stageSigner, Trusted: []attest.PublicKey{pub}})
	// one returns a run's wall time, the harness process's own CPU time,
	// and that plus its children's (Case, the sandbox, the verification).
	one := func(signed bool) (wall, self, total time.Duration) {
		s0, c0 := cpuTime()
		start := time.Now()
		o := base
		// The baseline is signing disabled in the config: no key, no
		// signature made, none verified at the gate or by validate.
		o.Signing = attest.Keys{Disabled: "benchmark baseline"}
		vo := validators.RunOptions{ExpectPass: true}
		if signed {
			// The default: the machine key, loaded as a command does.
			s, _, err := attest.EnsureMachineKey(keyDir)
			if err != nil {
				b.Fatal(err)
			}
			o.Signing = attest.Keys{Signer: s, Trusted: []attest.PublicKey{pub}}
			vo.Trusted, vo.RequireSignature = o.Signing.Trusted, true
		}
		rep, err := harness.Run(ctx, o)
		if err != nil || rep.Status != ctoharness.StatusPass || rep.Signed != signed {
			b.Fatalf("run: %v %v signed=%v", err, rep.Blockers, rep.Signed)
		}
		if v := validators.Run(ctx, rep.RunArtifactDir, set, vo); !v.OK || v.SignatureOK != signed {
			b.Fatalf("validate: %v", v.Errors)
		}
		wall = time.Since(start)
		s1, c1 := cpuTime()
		return wall, s1 - s0, (s1 - s0) + (c1 - c0)
	}
	one(false) // warm up
	one(true)
	var pw, sw, ps, ss, pt, st []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < 10; k++ {
			for _, sign := range []bool{(i+k)%2 == 0, (i+k)%2 != 0} {
				w, s, t := one(sign)
				if sign {
					sw, ss, st = append(sw, w), append(ss, s), append(st, t)
				} else {
					pw, ps, pt = append(pw, w), append(ps, s), append(pt, t)
				}
			}
		}
	}
	b.StopTimer()
	// Signing and verifying happen only in the harness process, so their
	// cost is the difference in its own CPU time; the children's CPU, which
	// varies most on a busy machine, stays out of the difference.
	added := median(ss) - median(ps)
	overhead := float64(added) / float64(median(pt)) * 100
	b.ReportMetric(float64(median(pw).Microseconds())/1000, "ms-wall-unsigned")
	b.ReportMetric(float64(median(sw).Microseconds())/1000, "ms-wall-signed")
	b.ReportMetric(float64(median(pt).Microseconds())/1000, "ms-cpu-run")
	b.ReportMetric(float64(added.Microseconds())/1000, "ms-cpu-added")
	b.ReportMetric(overhead, "%-overhead")
	b.ReportMetric((float64(median(sw))/float64(median(pw))-1)*100, "%-wall-overhead")
	if overhead > 5 {
		b.Errorf("signing and verifying added %s CPU (%.1f %%) to a stage 3 run of %s CPU; the target is under 5 %%", added, overhead, median(pt))
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpuTime is the user and system time of this process, and of its
// waited-for children, so far.
func cpuTime() (self, children time.Duration) {
	var s, c syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(s.Utime) + tv(s.Stime), tv(c.Utime) + tv(c.Stime)
}

// sampleStage3 is what the sample benchmarks share: the embedded sample
// repository materialized as an owned source, stage 2 validated (its records
// and runs signed with keys), and the options of a stage 3 pass-route run on
// it, to be given their signing by the caller.
func sampleStage3(b *testing.B, keys attest.Keys) (harness.Options, *schemas.Set) {
	b.Helper()
	ctx := context.Background()
	set := compileB(b)
	runs := b.TempDir()
	exe, _ := os.Executable()
	src := filepath.Join(b.TempDir(), "sample")
	archive, err := fixtures.Archive(fixtures.SampleOwned)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fixtures.Materialize(ctx, archive, src, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		b.Fatal(err)
	}
	data, err := fixtures.TaskSpec(fixtures.SampleOwned)
	if err != nil {
		b.Fatal(err)
	}
	spec, err := task.Parse(data, "sample task", set.Validator(schemas.TaskSpec))
	if err != nil {
		b.Fatal(err)
	}
	if res := validators.Stage(ctx, 2, validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv, Signing: keys}); !res.OK {
		b.Fatalf("stage 2: %v", res.Errors)
	}
	return harness.Options{Stage: 3, Source: src, Spec: &spec, RunsDir: runs, Schemas: set, SelfExe: exe,
		Config: config.Config{OwnedSources: []string{src}}, Getenv: env{gates.EnvAllowCase: "1", gates.EnvCaseStage: "3"}.get,
		VerifyRun: validators.StageRunVerifier(set), Signing: keys}, set
}
