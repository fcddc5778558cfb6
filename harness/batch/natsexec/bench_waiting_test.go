package natsexec_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/batch/natsexec"
)

// BenchmarkWaitingTrialsNATS runs 16 trials whose coding agent waits 2 s
// for each answer of the scripted model server, as a hosted model's
// agent does, 8 at once with the local executor and 8 at once through
// NATS JetStream (embedded server, one worker with 8 slots; the
// coordinator downloads and re-validates every run), and reports
// nats8/local8 (target ≤ 1.1): a worker keeps as many waiting trials in
// flight as a local batch. Each op runs each phase twice (local, NATS,
// NATS, local), and the ratio is of the summed times. The
// agent is the fake Case's stand-in (started as qwen-code, one model
// request, then its change), which every machine has, or the real
// qwen-code, which is skipped when it is not installed (cto-harness
// agents install qwen-code).
func BenchmarkWaitingTrialsNATS(b *testing.B) {
	b.Run("stand-in", func(b *testing.B) {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		waitingTrials(b, harness.AgentOptions{Command: []string{exe, backend.FakeSubcommand, fakecase.AgentScenario}})
	})
	b.Run("qwen-code", func(b *testing.B) {
		s, err := agent.Lookup(string(agent.QwenCode))
		if err != nil {
			b.Fatal(err)
		}
		dir, err := agent.Dir("", os.Getenv)
		if err != nil || !s.Installed(dir) {
			b.Skipf("qwen-code %s is not installed: run cto-harness agents install qwen-code", s.Version)
		}
		waitingTrials(b, harness.AgentOptions{Dir: dir})
	})
}

// waitingTrials is BenchmarkWaitingTrialsNATS with one agent.
func waitingTrials(b *testing.B, ag harness.AgentOptions) {
	const trials, slots = 16, 8
	w := newWorld(b, 1)
	w.replan(b, batch.Spec{Name: "waiting", Tasks: []batch.TaskRef{{Name: "note"}}, Repeats: trials,
		Agents: []batch.Agent{{Name: "qwen", Kind: string(agent.QwenCode), Model: "scripted-model", Scripted: batch.ScriptedNote, ScriptedLatencyMs: 2000}}})
	local := w.local(b)
	local.Base.Agent = ag
	signer, pub, _ := w.key(b, "w")
	wk := newWorkerOn(w.set, filepath.Join(w.dir, "workers", "w"), w.owned, signer)
	wk.URL, wk.AckWait, wk.Coordinators, wk.Slots = w.url, 30*time.Second, []attest.PublicKey{w.coordPub}, slots
	wk.Local.Base.Agent = ag
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = wk.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	run := func(name string, r func(batch.Plan, batch.Store) (batch.Runner, func())) time.Duration {
		p, st := w.fresh(b, name)
		runner, done := r(p, st)
		defer done()
		start := time.Now()
		c, err := batch.Execute(context.Background(), p, st, runner, batch.Options{Concurrency: slots})
		if err != nil || c.Done != trials || c.Failed != 0 {
			b.Fatalf("%s: done %d of %d, failed %d: %v", name, c.Done, trials, c.Failed, err)
		}
		return time.Since(start)
	}
	localRunner := func(batch.Plan, batch.Store) (batch.Runner, func()) { return local, func() {} }
	natsRunner := func(p batch.Plan, st batch.Store) (batch.Runner, func()) {
		co, err := natsexec.NewCoordinator(context.Background(), natsexec.CoordinatorOptions{URL: w.url, Store: st, BatchID: p.BatchID,
			Schemas: w.set, Workers: []attest.PublicKey{pub}, Signer: w.coord, AckWait: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return co, co.Close
	}
	b.ResetTimer()
	var loc, nts time.Duration
	for n := 0; n < b.N; n++ {
		// Local, NATS, NATS, local: load that rises or falls during the op
		// weighs on both alike.
		loc += run("local8", localRunner)
		nts += run("nats8", natsRunner)
		nts += run("nats8", natsRunner)
		loc += run("local8", localRunner)
	}
	ratio := nts.Seconds() / loc.Seconds()
	per := float64(2 * b.N)
	b.ReportMetric(loc.Seconds()/per, "local8-s")
	b.ReportMetric(nts.Seconds()/per, "nats8-s")
	b.ReportMetric(ratio, "nats8/local8")
	b.Logf("%d trials waiting 2 s on their model, %d at once: %.1f s locally, %.1f s through one NATS worker with %d slots: %.2f×",
		trials, slots, loc.Seconds()/per, nts.Seconds()/per, slots, ratio)
	if ratio > 1.1 {
		b.Errorf("the NATS path took %.2f× the local executor's time at the same concurrency; the target is ≤ 1.1×", ratio)
	}
}
