package natsexec_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/batch/natsexec"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/validators"
)

// BenchmarkBatch20 times 20 fake-lane trials three ways: one at a time and
// two at a time with the local executor, and two at a time through NATS
// JetStream (embedded server, two in-process workers of one slot each,
// each with its own runs directory and key; the coordinator downloads and re-validates every
// run). It reports the ratios the batch is held to: local2/seq (target
// <= 0.6) and nats2/local2 (target <= 1.1). The machine is shared: each op
// runs the three phases three times, each time in another order, and the
// ratios are of the summed times, which evens out load that comes and goes
// (-benchtime Nx repeats that N times). cpu-s/trial
// is the processor time (this process and its children) a trial costs,
// which load does not change.
func BenchmarkBatch20(b *testing.B) {
	w := newWorld(b, 20)
	local := w.local(b)
	var pubs []attest.PublicKey
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		signer, pub, _ := w.key(b, fmt.Sprint("w", i))
		pubs = append(pubs, pub)
		wk := newWorkerOn(w.set, filepath.Join(w.dir, "workers", fmt.Sprint(i)), w.owned, signer)
		// One slot each: two trials at once, as the local phase runs.
		wk.URL, wk.AckWait, wk.Coordinators, wk.Slots = w.url, 30*time.Second, []attest.PublicKey{w.coordPub}, 1
		go func() { _ = wk.Run(ctx) }()
	}
	// Each phase is its own batch (a fresh store), so nothing is skipped.
	cpus := map[string]time.Duration{} // processor time of each phase
	run := func(name string, conc int, runner func(batch.Plan, batch.Store) (batch.Runner, func())) time.Duration {
		p, st := w.fresh(b, name)
		r, done := runner(p, st)
		defer done()
		start, cpu0 := time.Now(), cpuTime()
		c, err := batch.Execute(context.Background(), p, st, r, batch.Options{Concurrency: conc})
		if err != nil || c.Done != len(p.Trials) || c.Failed != 0 {
			b.Fatalf("%s: done %d of %d, failed %d: %v", name, c.Done, len(p.Trials), c.Failed, err)
		}
		cpus[name] += cpuTime() - cpu0
		return time.Since(start)
	}
	localRunner := func(batch.Plan, batch.Store) (batch.Runner, func()) { return local, func() {} }
	natsRunner := func(p batch.Plan, st batch.Store) (batch.Runner, func()) {
		co, err := natsexec.NewCoordinator(context.Background(), natsexec.CoordinatorOptions{URL: w.url, Store: st, BatchID: p.BatchID,
			Schemas: w.set, Workers: pubs, Signer: w.coord, AckWait: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return co, co.Close
	}
	b.ResetTimer()
	var seq, par, nts time.Duration
	// Each op is three rounds, and each round runs the phases in another
	// order: a phase that always came last would pay for the writeback
	// and block discards the earlier phases left behind, and one that
	// always came first would not. Before each phase the disk is synced
	// and the heap collected, outside the timing.
	phases := []func(){
		func() { seq += run("seq", 1, localRunner) },
		func() { par += run("local2", 2, localRunner) },
		// Every trial is queued (as batch run --nats does); the two
		// workers, one trial each, are the concurrency.
		func() { nts += run("nats2", len(w.plan.Trials), natsRunner) },
	}
	// The machine's own floor, measured in the same rounds: the processes
	// a trial starts each get fresh namespaces, and how far starting such
	// processes two at a time beats one at a time is what these cores and
	// this kernel allow a batch of trials, whatever the executor does.
	// Hashing, which needs nothing of the kernel, shows what the two cores
	// give plain computation.
	var nsSeq, nsPar, cpuSeq, cpuPar time.Duration
	nsOK := true
	for n := 0; n < b.N; n++ {
		for round := 0; round < len(phases); round++ {
			for i := range phases {
				b.StopTimer()
				syscall.Sync()
				runtime.GC()
				b.StartTimer()
				phases[(round+i)%len(phases)]()
			}
			b.StopTimer()
			s, p, _ := oneAndTwo(hashCount, round%2 == 1, hashMiB)
			cpuSeq, cpuPar = cpuSeq+s, cpuPar+p
			if nsOK {
				s, p, err := oneAndTwo(nsStartCount, round%2 == 1, nsStart)
				if err != nil {
					b.Logf("no namespaced start reference: %v", err)
					nsOK = false
				}
				nsSeq, nsPar = nsSeq+s, nsPar+p
			}
			b.StartTimer()
		}
	}
	if nsOK {
		b.ReportMetric(nsPar.Seconds()/nsSeq.Seconds(), "nsstart2/seq")
	}
	b.ReportMetric(cpuPar.Seconds()/cpuSeq.Seconds(), "hash2/seq")
	per := float64(b.N * len(phases))
	b.ReportMetric(seq.Seconds()/per, "seq-s")
	b.ReportMetric(par.Seconds()/per, "local2-s")
	b.ReportMetric(nts.Seconds()/per, "nats2-s")
	b.ReportMetric(par.Seconds()/seq.Seconds(), "local2/seq")
	b.ReportMetric(nts.Seconds()/par.Seconds(), "nats2/local2")
	b.ReportMetric((cpus["seq"]+cpus["local2"]).Seconds()/per/float64(2*len(w.plan.Trials)), "cpu-s/trial")
	// How many cores each local phase kept busy. The sequential phase's
	// own figure (a trial's child processes and background work overlap
	// with the harness) sets the floor on local2/seq: with two cores,
	// local2/seq >= seq-cores/2 even when both cores are busy all the time.
	b.ReportMetric(cpus["seq"].Seconds()/seq.Seconds(), "seq-cores")
	b.ReportMetric(cpus["local2"].Seconds()/par.Seconds(), "local2-cores")
	b.ReportMetric(cpus["nats2"].Seconds()/nts.Seconds(), "nats2-cores")
}

// local is a local executor with its own runs directory (stage 2
// validated there) and an ephemeral key: every run signed, as by default.
func (w *world) local(b *testing.B) batch.Local {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cfg := config.Config{OwnedSources: []string{w.owned}}
	runs := filepath.Join(w.dir, "local")
	keys, err := attest.Ephemeral()
	if err != nil {
		b.Fatal(err)
	}
	if err := validators.EnsureStage2(context.Background(), validators.StageOptions{RunsDir: runs, Schemas: w.set, SelfExe: exe, HostEnv: os.Getenv, Config: cfg, Signing: keys}); err != nil {
		b.Fatal(err)
	}
	return batch.Local{Base: harness.Options{RunsDir: runs, Config: cfg, Getenv: gateEnv, SelfExe: exe, Schemas: w.set, VerifyRun: validators.RememberStageRuns(validators.StageRunVerifier(w.set)), Signing: keys, SandboxProbe: sandbox.Reuse(exe), ViewTrials: sandbox.NewTrials()}}
}

// fresh is the world's plan as a batch of its own (a new id, a new store),
// so that nothing of an earlier phase is skipped.
func (w *world) fresh(b *testing.B, name string) (batch.Plan, batch.Store) {
	b.Helper()
	p := w.plan
	p.BatchID = fmt.Sprintf("%s-%s-%d", p.BatchID, name, time.Now().UnixNano())
	p.Trials = append([]batch.Trial(nil), p.Trials...)
	for i := range p.Trials {
		p.Trials[i].BatchID = p.BatchID
	}
	st, err := batch.OpenStore(filepath.Join(w.dir, "coordinator"), p.BatchID)
	if err != nil {
		b.Fatal(err)
	}
	return p, st
}

// cpuTime is the user and system time of this process and its waited-for
// children so far.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	sum := time.Duration(0)
	for _, tv := range []syscall.Timeval{self.Utime, self.Stime, kids.Utime, kids.Stime} {
		sum += time.Duration(tv.Nano())
	}
	return sum
}

// nsStartCount and hashCount are how many times the references run their
// job each way.
const (
	nsStartCount = 200
	hashCount    = 128
)

// nsStart starts /bin/true in new user, mount, PID, network and IPC
// namespaces, as the sandbox's launcher is started.
func nsStart() error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	return cmd.Run()
}

// hashBuf is what hashMiB hashes; nothing writes it.
var hashBuf = make([]byte, 1<<20)

// hashMiB hashes one MiB: computation that needs nothing of the kernel.
func hashMiB() error {
	sha256.Sum256(hashBuf)
	return nil
}

// oneAndTwo runs job n times one at a time, and n times split between two
// goroutines (the other way round when parFirst), and returns both times.
func oneAndTwo(n int, parFirst bool, job func() error) (seq, par time.Duration, err error) {
	timed := func(conc int) (time.Duration, error) {
		t := time.Now()
		errs := make(chan error, conc)
		for g := 0; g < conc; g++ {
			go func() {
				for i := 0; i < n/conc; i++ {
					if err := job(); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		var first error
		for g := 0; g < conc; g++ {
			if e := <-errs; e != nil && first == nil {
				first = e
			}
		}
		return time.Since(t), first
	}
	order := []int{1, 2}
	if parFirst {
		order = []int{2, 1}
	}
	for _, conc := range order {
		d, e := timed(conc)
		if e != nil {
			return seq, par, e
		}
		if conc == 1 {
			seq = d
		} else {
			par = d
		}
	}
	return seq, par, nil
}

// BenchmarkRequestSignOpen is what a signed request costs per trial
// attempt: the coordinator's signature and the worker's check, on a
// request carrying a real trial. Compare it with a trial's own time
// (BenchmarkBatch20's seq/trial); the target is ≤ 5 % of the NATS path.
func BenchmarkRequestSignOpen(b *testing.B) {
	w := newWorld(b, 1)
	tr := w.plan.Trials[0]
	now := time.Now()
	req := natsexec.Request{RequestID: "r", Trial: tr, Attempt: 1, AttemptID: batch.AttemptID(tr.ID, 1), Nonce: batch.NewNonce(), IssuedAt: now, Expires: now.Add(time.Hour)}
	keys := []attest.PublicKey{w.coordPub}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data, err := natsexec.SignRequest(ctx, w.coord, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := natsexec.OpenRequest(ctx, data, keys, now); err != nil {
			b.Fatal(err)
		}
	}
}
