package natsexec_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/batch/natsexec"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/supervise"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// Environment of a worker child process (this test binary re-executed).
const (
	envWorker  = "NATSEXEC_TEST_WORKER" // the NATS URL
	envRuns    = "NATSEXEC_TEST_RUNS"
	envKey     = "NATSEXEC_TEST_KEY"
	envOwned   = "NATSEXEC_TEST_OWNED"
	envAckWait = "NATSEXEC_TEST_ACK_WAIT"
	envCoord   = "NATSEXEC_TEST_COORDINATOR_KEY" // the coordinator's public key file
	envNkey    = "NATSEXEC_TEST_NKEY"            // the worker's NATS nkey seed file
	envSlots   = "NATSEXEC_TEST_SLOTS"           // the worker's trials at once
)

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
	if url := os.Getenv(envWorker); url != "" {
		os.Exit(workerMain(url))
	}
	os.Exit(m.Run())
}

// workerMain is a worker process, as 'cto-harness worker' runs one.
func workerMain(url string) int {
	set, err := schemas.Compile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	signer, err := attest.LoadSigner(os.Getenv(envKey))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ackWait, _ := time.ParseDuration(os.Getenv(envAckWait))
	coord, err := attest.LoadPublicKey(os.Getenv(envCoord))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w := newWorkerOn(set, os.Getenv(envRuns), os.Getenv(envOwned), signer)
	w.Coordinators = []attest.PublicKey{coord}
	w.URL, w.AckWait, w.Log = url, ackWait, os.Stderr
	w.Auth.NkeyFile = os.Getenv(envNkey)
	w.Slots, _ = strconv.Atoi(os.Getenv(envSlots))
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func gateEnv(k string) string {
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

// newWorkerOn is a worker with its own runs directory (stage 2 validated
// there first, as the worker command does) and key.
func newWorkerOn(set *schemas.Set, runs, owned string, signer *attest.Signer) natsexec.Worker {
	exe, _ := os.Executable()
	cfg := config.Config{OwnedSources: []string{owned}}
	keys := attest.Keys{Signer: signer, Trusted: []attest.PublicKey{signer.Public()}}
	if err := validators.EnsureStage2(context.Background(), validators.StageOptions{RunsDir: runs, Schemas: set, SelfExe: exe, HostEnv: os.Getenv,
		Config: cfg, Signing: keys}); err != nil {
		panic(err)
	}
	return natsexec.Worker{Local: batch.Local{Base: harness.Options{RunsDir: runs, Config: cfg, Getenv: gateEnv, SelfExe: exe, Schemas: set,
		VerifyRun: validators.RememberStageRuns(validators.StageRunVerifier(set)), Signing: keys, SandboxProbe: sandbox.Reuse(exe), ViewTrials: sandbox.NewTrials()}}}
}

type world struct {
	set   *schemas.Set
	dir   string
	owned string
	url   string
	plan  batch.Plan
	store batch.Store
	// coord signs the coordinator's requests; coordPub is in every
	// worker's coordinator keys (coordFile is its PEM file).
	coord     *attest.Signer
	coordPub  attest.PublicKey
	coordFile string
	coordAuth natsexec.Auth // the coordinator's NATS identity (authServer)
}

func startServer(t testing.TB) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the embedded NATS server did not start")
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

// authServer replaces the world's server by one started from the
// configuration ServerAuthorization writes for a coordinator and these
// workers, each with a fresh nkey: the documented deployment. It returns
// each worker's nkey seed file; the coordinator's is in w.coordAuth.
func (w *world) authServer(t testing.TB, workers ...attest.PublicKey) []string {
	t.Helper()
	dir := filepath.Join(w.dir, "nats")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	nkey := func(name string) (string, string) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		f := filepath.Join(dir, name+".nk")
		if err := os.WriteFile(f, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		return f, pub
	}
	coordSeed, coordPub := nkey("coordinator")
	users := []natsexec.ServerUser{{Nkey: coordPub, Comment: "the coordinator", Permissions: natsexec.CoordinatorPermissions()}}
	var seeds []string
	for i, k := range workers {
		seed, pub := nkey(fmt.Sprint("worker", i))
		perms, err := natsexec.WorkerPermissions(k.ID)
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, natsexec.ServerUser{Nkey: pub, Comment: "worker " + k.ID, Permissions: perms})
		seeds = append(seeds, seed)
	}
	conf := filepath.Join(dir, "server.conf")
	text := fmt.Sprintf("host: 127.0.0.1\nport: -1\njetstream { store_dir: %q }\n", filepath.Join(dir, "store")) + natsexec.ServerAuthorization(users)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("the server configuration ServerAuthorization wrote does not load: %v\n%s", err, text)
	}
	opts.NoLog, opts.NoSigs = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the authenticated NATS server did not start")
	}
	t.Cleanup(ns.Shutdown)
	w.url, w.coordAuth = ns.ClientURL(), natsexec.Auth{NkeyFile: coordSeed}
	return seeds
}

func newWorld(t testing.TB, repeats int) *world {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &world{set: set, dir: dir, owned: filepath.Join(dir, "owned"), url: startServer(t)}
	src := filepath.Join(w.owned, "a")
	archive, err := fixtures.Archive(fixtures.SampleOwned)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fixtures.Materialize(context.Background(), archive, src, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(batch.Spec{Name: "remote", Sources: []string{src}, Tasks: []batch.TaskRef{{Name: "note"}},
		Agents: []batch.Agent{{Name: "fine"}}, Repeats: repeats, MaxAttempts: 2})
	spec, err := batch.ParseSpec(data, filepath.Join(dir, "spec.json"), set)
	if err != nil {
		t.Fatal(err)
	}
	if w.plan, err = batch.MakePlan(context.Background(), spec, set); err != nil {
		t.Fatal(err)
	}
	if w.store, err = batch.OpenStore(filepath.Join(dir, "coordinator"), w.plan.BatchID); err != nil {
		t.Fatal(err)
	}
	w.coord, w.coordPub, _ = w.key(t, "coordinator")
	w.coordFile = filepath.Join(w.dir, "keys", "coordinator", attest.PublicKeyFile)
	return w
}

// key makes a worker key pair.
func (w *world) key(t testing.TB, name string) (*attest.Signer, attest.PublicKey, string) {
	t.Helper()
	d := filepath.Join(w.dir, "keys", name)
	pub, err := attest.Generate(d)
	if err != nil {
		t.Fatal(err)
	}
	s, err := attest.LoadSigner(filepath.Join(d, attest.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return s, pub, filepath.Join(d, attest.PrivateKeyFile)
}

func (w *world) coordinator(t *testing.T, ackWait time.Duration, workers ...attest.PublicKey) *natsexec.Coordinator {
	t.Helper()
	co, err := natsexec.NewCoordinator(context.Background(), natsexec.CoordinatorOptions{URL: w.url, Auth: w.coordAuth, Store: w.store, BatchID: w.plan.BatchID,
		Schemas: w.set, Workers: workers, Signer: w.coord, AckWait: ackWait, MaxRefusals: 2, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(co.Close)
	return co
}

// inProcess runs a worker in this process until the test ends.
func (w *world) inProcess(t *testing.T, name string, signer *attest.Signer, fault string, fetched func(natsexec.Request)) {
	t.Helper()
	w.prepared(t, name, signer, fault, fetched)()
}

// prepared makes a worker ready (its stage records validated) and returns
// the function that starts it.
func (w *world) prepared(t *testing.T, name string, signer *attest.Signer, fault string, fetched func(natsexec.Request)) func() {
	t.Helper()
	wk := w.worker(t, name, signer)
	wk.Fetched = fetched
	wk.Local.Base.Fault = fault
	return func() { w.start(t, name, wk) }
}

// worker is a worker of this world (its stage records validated, the
// coordinator's key trusted), not yet started.
func (w *world) worker(t *testing.T, name string, signer *attest.Signer) natsexec.Worker {
	t.Helper()
	wk := newWorkerOn(w.set, filepath.Join(w.dir, "workers", name), w.owned, signer)
	wk.URL, wk.AckWait, wk.Log = w.url, 3*time.Second, testLog{t}
	wk.Coordinators = []attest.PublicKey{w.coordPub}
	return wk
}

// start runs wk until the returned stop is called or the test ends.
func (w *world) start(t *testing.T, name string, wk natsexec.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := wk.Run(ctx); err != nil {
			t.Errorf("worker %s: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *world) records(t *testing.T) []batch.TrialRecord {
	t.Helper()
	var out []batch.TrialRecord
	for _, tr := range w.plan.Trials {
		rec, err := w.store.Load(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// Three worker processes on a server that admits only the documented
// roles, each worker with its own NATS nkey and one slot; one is killed
// (SIGKILL) as soon as it starts a trial. Its trial is delivered again after ack_wait,
// and every trial is counted exactly once.
func TestThreeWorkersOneKilled(t *testing.T) {
	w := newWorld(t, 6)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var pubs []attest.PublicKey
	var keyFiles []string
	for i := 0; i < 3; i++ {
		_, pub, keyFile := w.key(t, fmt.Sprint("w", i))
		pubs, keyFiles = append(pubs, pub), append(keyFiles, keyFile)
	}
	seeds := w.authServer(t, pubs...)
	var victim *exec.Cmd
	victimStarted := make(chan string, 1)
	var wg sync.WaitGroup
	for i, keyFile := range keyFiles {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envWorker+"="+w.url, envRuns+"="+filepath.Join(w.dir, "workers", fmt.Sprint(i)), envKey+"="+keyFile,
			envOwned+"="+w.owned, envAckWait+"=3s", envCoord+"="+w.coordFile, envNkey+"="+seeds[i], envSlots+"=1")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if i == 0 {
			victim = cmd
		}
		wg.Add(1)
		go func(i int, r io.Reader) {
			defer wg.Done()
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				line := sc.Text()
				t.Logf("worker %d: %s", i, line)
				if i == 0 && strings.Contains(line, " started") {
					f := strings.Fields(line)
					select {
					case victimStarted <- f[3]: // "worker KEY: trial ID attempt N started"
					default:
					}
				}
			}
		}(i, stderr)
	}
	co := w.coordinator(t, 3*time.Second, pubs...)
	var killedTrial string
	go func() {
		killedTrial = <-victimStarted
		_ = victim.Process.Kill()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var maxRunning, maxQueued int
	progress := func(e batch.Event) {
		maxRunning, maxQueued = max(maxRunning, e.Counts.Running), max(maxQueued, e.Counts.Queued)
	}
	c, err := batch.Execute(ctx, w.plan, w.store, co, batch.Options{Concurrency: len(w.plan.Trials), OnEvent: progress})
	if err != nil {
		t.Fatal(err)
	}
	if c.Done != 6 {
		t.Fatalf("%d of 6 trials done", c.Done)
	}
	// Running counts what workers took: never more than the three workers'
	// one slot each, while the rest wait in the queue.
	if maxRunning > 3 || maxRunning == 0 || maxQueued < 3 {
		t.Errorf("at most %d running and %d queued at once; want 1..3 running (3 workers) and at least 3 of 6 queued", maxRunning, maxQueued)
	}
	if killedTrial == "" {
		t.Fatal("the victim worker never started a trial")
	}
	for _, rec := range w.records(t) {
		if len(rec.Attempts) != 1 {
			t.Errorf("trial %s: %d attempts recorded, want exactly 1", rec.Trial.ID, len(rec.Attempts))
			continue
		}
		a := rec.Attempts[0]
		if a.ID != batch.AttemptID(rec.Trial.ID, 1) {
			t.Errorf("trial %s: attempt id %q", rec.Trial.ID, a.ID)
		}
		if a.Outcome != batch.OutcomePass || !a.EvidenceValid || !a.Signed {
			t.Errorf("trial %s: %s, evidence valid %v, signed %v: %v", rec.Trial.ID, a.Outcome, a.EvidenceValid, a.Signed, a.EvidenceErrors)
		}
		if a.Worker == pubs[0].ID {
			t.Errorf("trial %s is counted from the killed worker", rec.Trial.ID)
		}
		if rec.Trial.ID == killedTrial {
			t.Logf("the killed worker's trial %s was finished by worker %s (run %d ms, queued %d ms)", killedTrial, a.Worker, a.DurationMs, a.QueueMs)
			// Its time is the run's; the ack wait before redelivery (3 s)
			// is queue time.
			if a.QueueMs < 2500 || a.DurationMs >= a.QueueMs {
				t.Errorf("the redelivered trial: run %d ms, queued %d ms; want the 3 s ack wait in the queue time", a.DurationMs, a.QueueMs)
			}
		}
		if a.DurationMs <= 0 {
			t.Errorf("trial %s: run time %d ms", rec.Trial.ID, a.DurationMs)
		}
	}
}

// The documented server configuration admits the coordinator and the
// listed workers only, and lets each do its part only: a client without
// credentials or with an unknown nkey is refused; a worker cannot publish
// a request, read a stream's state or write another worker's bucket; the
// coordinator cannot publish a result.
func TestServerAdmitsOnlyItsRoles(t *testing.T) {
	w := newWorld(t, 1)
	_, a, _ := w.key(t, "a")
	_, b, _ := w.key(t, "b")
	seeds := w.authServer(t, a, b)
	w.coordinator(t, 3*time.Second, a, b) // creates the streams
	if nc, err := nats.Connect(w.url); err == nil || !errors.Is(err, nats.ErrAuthorization) {
		if nc != nil {
			nc.Close()
		}
		t.Fatalf("a client without credentials: %v, want an authorization error", err)
	}
	stranger, _ := nkeys.CreateUser()
	seed, _ := stranger.Seed()
	strangerFile := filepath.Join(w.dir, "stranger.nk")
	if err := os.WriteFile(strangerFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	connect := func(seedFile, inbox string) (*nats.Conn, jetstream.JetStream, error) {
		opt, err := nats.NkeyOptionFromSeed(seedFile)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(w.url, opt, nats.CustomInboxPrefix(inbox), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			return nil, nil, err
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return nc, js, nil
	}
	if _, _, err := connect(strangerFile, "_INBOX"); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a client with an nkey the server does not list: %v, want an authorization error", err)
	}
	_, coord, err := connect(w.coordAuth.NkeyFile, natsexec.CoordinatorInbox)
	if err != nil {
		t.Fatal(err)
	}
	_, wa, err := connect(seeds[0], natsexec.WorkerInbox(a.ID))
	if err != nil {
		t.Fatalf("worker a's nkey: %v", err)
	}
	ctx := context.Background()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		t.Cleanup(cancel)
		return c
	}
	// Worker a's own bucket: allowed (so the refusals below are the
	// permissions, not a broken connection).
	own, err := wa.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: natsexec.WorkerBucket(a.ID)})
	if err != nil {
		t.Fatalf("worker a makes its own bucket: %v", err)
	}
	if _, err := own.PutBytes(ctx, "x", []byte("run")); err != nil {
		t.Fatalf("worker a writes its own bucket: %v", err)
	}
	if _, err := coord.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: natsexec.WorkerBucket(b.ID)}); err != nil {
		t.Fatal(err)
	}
	if _, err := wa.Publish(short(), natsexec.TrialsPrefix+w.plan.BatchID, []byte("{}")); err == nil {
		t.Error("worker a published a trial request")
	}
	if _, err := wa.ObjectStore(short(), natsexec.WorkerBucket(b.ID)); err == nil {
		t.Error("worker a opened worker b's bucket")
	}
	if _, err := wa.Stream(short(), natsexec.TrialsStream); err == nil {
		t.Error("worker a read the trials stream's configuration")
	}
	if _, err := coord.Publish(short(), natsexec.ResultsPrefix+w.plan.BatchID, []byte("{}")); err == nil {
		t.Error("the coordinator published a result")
	}
	for stream, want := range map[string]uint64{natsexec.TrialsStream: 0, natsexec.ResultsStream: 0, "OBJ_" + natsexec.WorkerBucket(b.ID): 0} {
		st, err := coord.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != want {
			t.Errorf("stream %s holds %d messages, want %d: a refused publish got through", stream, info.State.Msgs, want)
		}
	}
}

// A worker whose key the coordinator does not trust: its signed, valid runs
// are refused and recorded, and nothing is counted.
func TestUntrustedWorkerRefused(t *testing.T) {
	w := newWorld(t, 1)
	_, trusted, _ := w.key(t, "trusted")
	rogue, _, _ := w.key(t, "rogue")
	w.inProcess(t, "rogue", rogue, "", nil)
	co := w.coordinator(t, 3*time.Second, trusted)
	plan := w.plan
	plan.MaxAttempts = 1
	c, err := batch.Execute(context.Background(), plan, w.store, co, batch.Options{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c.Done != 0 {
		t.Errorf("%d trials counted from an untrusted worker", c.Done)
	}
	rec := w.records(t)[0]
	if len(rec.Refused) != 2 {
		t.Fatalf("refusals %+v, want 2", rec.Refused)
	}
	for _, r := range rec.Refused {
		if r.Worker != rogue.Public().ID || !strings.Contains(r.Reason, "did not validate against the worker keys") {
			t.Errorf("refusal %+v", r)
		}
	}
	if a := rec.Last(); a == nil || a.EvidenceValid || a.Outcome != batch.OutcomeInfraFailed {
		t.Errorf("the attempt after the refusals: %+v", a)
	}
}

// A worker that always runs out of disk: its trial comes back infra_failed
// and the retry goes to the other worker.
func TestFullDiskWorkerRetriedElsewhere(t *testing.T) {
	w := newWorld(t, 1)
	full, fullPub, _ := w.key(t, "full")
	good, goodPub, _ := w.key(t, "good")
	co := w.coordinator(t, 3*time.Second, fullPub, goodPub)
	took := make(chan struct{})
	var once sync.Once
	startGood := w.prepared(t, "good", good, "", nil)
	w.inProcess(t, "full", full, harness.FaultDiskFullPrefix+"proofs/fixture-clean-end.json", func(natsexec.Request) { once.Do(func() { close(took) }) })
	go func() {
		<-took // the full-disk worker has the first attempt; now the good one joins
		startGood()
	}()
	c, err := batch.Execute(context.Background(), w.plan, w.store, co, batch.Options{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := w.records(t)[0]
	if c.Done != 1 || len(rec.Attempts) != 2 {
		t.Fatalf("done %d, attempts %+v", c.Done, rec.Attempts)
	}
	first, second := rec.Attempts[0], rec.Attempts[1]
	if first.Outcome != batch.OutcomeInfraFailed || first.Worker != fullPub.ID || !first.EvidenceValid {
		t.Errorf("first attempt: %s by %s (valid %v) %v", first.Outcome, first.Worker, first.EvidenceValid, first.EvidenceErrors)
	}
	if second.Outcome != batch.OutcomePass || second.Worker != goodPub.ID {
		t.Errorf("second attempt: %s by %s", second.Outcome, second.Worker)
	}
}

// A result whose archive is not the one the worker announced is refused:
// the coordinator checks the digest of what it downloaded. So is one that
// answers another attempt than the one requested.
func TestObjectDigestChecked(t *testing.T) {
	w := newWorld(t, 1)
	signer, pub, _ := w.key(t, "w")
	// A worker that uploads one thing and announces another digest.
	nc, err := nats.Connect(w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	co := w.coordinator(t, 3*time.Second, pub)
	js, _ := jetstream.New(nc)
	local := newWorkerOn(w.set, filepath.Join(w.dir, "workers", "liar"), w.owned, signer).Local
	local.Worker = pub.ID
	sent := 0
	go func() {
		ctx := context.Background()
		cons, err := js.Consumer(ctx, natsexec.TrialsStream, natsexec.WorkerConsumer)
		if err != nil {
			t.Error(err)
			return
		}
		obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: natsexec.WorkerBucket(pub.ID)})
		if err != nil {
			t.Error(err)
			return
		}
		for i := 0; i < 2; i++ {
			msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(20*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			for msg := range msgs.Messages() {
				req, _, err := natsexec.OpenRequest(ctx, msg.Data(), []attest.PublicKey{w.coordPub}, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				a, err := local.RunBound(ctx, req.Trial, req.Attempt, req.Nonce)
				if err != nil {
					t.Error(err)
					return
				}
				data, err := natsexec.PackForTest(a.RunDir)
				if err != nil {
					t.Error(err)
					return
				}
				name := natsexec.ObjectName(req.AttemptID, pub.ID)
				if _, err := obj.PutBytes(ctx, name, data); err != nil {
					t.Error(err)
					return
				}
				other := sha256.Sum256(append(data, 0))
				answers := req.AttemptID
				if sent++; sent == 1 {
					answers = batch.AttemptID(req.Trial.ID, req.Attempt+1) // first: claims the next attempt
				}
				res, _ := json.Marshal(natsexec.Result{RequestID: req.RequestID, BatchID: req.Trial.BatchID, TrialID: req.Trial.ID, Attempt: req.Attempt, AttemptID: answers,
					Worker: pub.ID, RunID: a.RunID, Object: name, SHA256: hex.EncodeToString(other[:]), Size: int64(len(data))})
				if _, err := js.Publish(ctx, natsexec.ResultsPrefix+req.Trial.BatchID, res); err != nil {
					t.Error(err)
				}
				_ = msg.Ack()
			}
		}
	}()
	plan := w.plan
	plan.MaxAttempts = 1
	if _, err := batch.Execute(context.Background(), plan, w.store, co, batch.Options{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	rec := w.records(t)[0]
	if len(rec.Refused) != 2 || !strings.Contains(rec.Refused[0].Reason, "answers attempt \""+batch.AttemptID(rec.Trial.ID, 2)) ||
		!strings.Contains(rec.Refused[1].Reason, "archive digest") {
		t.Fatalf("refusals %+v", rec.Refused)
	}
}

// A request whose attempt id is not its trial's attempt (a forged request,
// or one from a coordinator of another version) is dropped, not run.
func TestRequestWithForeignAttemptIDDropped(t *testing.T) {
	w := newWorld(t, 1)
	signer, pub, _ := w.key(t, "w")
	co := w.coordinator(t, 3*time.Second, pub)
	nc, err := nats.Connect(w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	tr := w.plan.Trials[0]
	forged, _ := json.Marshal(natsexec.Request{RequestID: "forged", Trial: tr, Attempt: 1, AttemptID: batch.AttemptID(tr.ID, 2)})
	if _, err := js.Publish(context.Background(), natsexec.TrialsPrefix+tr.BatchID, forged); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var taken []string
	w.inProcess(t, "w", signer, "", func(r natsexec.Request) {
		mu.Lock()
		taken = append(taken, r.RequestID)
		mu.Unlock()
	})
	if c, err := batch.Execute(context.Background(), w.plan, w.store, co, batch.Options{Concurrency: 1}); err != nil || c.Done != 1 {
		t.Fatalf("done %d: %v", c.Done, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(taken) != 1 || taken[0] == "forged" {
		t.Errorf("the worker took requests %v; want only the coordinator's", taken)
	}
}

// A stopped coordinator leaves no request in the queue: nothing runs for a
// batch nobody waits for, and nothing was recorded.
func TestStoppedBatchWithdrawsRequests(t *testing.T) {
	w := newWorld(t, 3)
	_, pub, _ := w.key(t, "w")
	co, err := natsexec.NewCoordinator(context.Background(), natsexec.CoordinatorOptions{URL: w.url, Auth: w.coordAuth, Store: w.store, BatchID: w.plan.BatchID,
		Schemas: w.set, Workers: []attest.PublicKey{pub}, Signer: w.coord, AckWait: 3 * time.Second, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	queued := func() uint64 {
		s, err := js.Stream(context.Background(), natsexec.TrialsStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(natsexec.TrialsPrefix+w.plan.BatchID))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for queued() < 3 {
			time.Sleep(50 * time.Millisecond)
		}
		cancel() // no worker: all three wait in the queue, then the operator stops
	}()
	if _, err := batch.Execute(ctx, w.plan, w.store, co, batch.Options{Concurrency: 3}); err == nil {
		t.Fatal("a stopped batch returned no error")
	}
	co.Close()
	if n := queued(); n != 0 {
		t.Errorf("%d requests left in the queue after the coordinator stopped", n)
	}
	for _, rec := range w.records(t) {
		if len(rec.Attempts) != 0 {
			t.Errorf("trial %s has attempts %+v", rec.Trial.ID, rec.Attempts)
		}
	}
}

// publishRequest puts a message on the trials stream as any client could.
func (w *world) publishRequest(t *testing.T, js jetstream.JetStream, data []byte) {
	t.Helper()
	if _, err := js.Publish(context.Background(), natsexec.TrialsPrefix+w.plan.BatchID, data); err != nil {
		t.Fatal(err)
	}
}

// Requests nobody trusted signed never run: an unsigned one, one signed by
// a key the worker does not list, and an expired one the coordinator
// signed. Each is dropped with its reason; the coordinator's own request
// runs.
func TestForgedRequestsNeverRun(t *testing.T) {
	w := newWorld(t, 1)
	signer, pub, _ := w.key(t, "w")
	rogue, _, _ := w.key(t, "rogue")
	co := w.coordinator(t, 3*time.Second, pub)
	nc, err := nats.Connect(w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	tr := w.plan.Trials[0]
	now := time.Now()
	req := natsexec.Request{RequestID: "forged", Trial: tr, Attempt: 1, AttemptID: batch.AttemptID(tr.ID, 1), Nonce: strings.Repeat("ab", 16),
		IssuedAt: now, Expires: now.Add(time.Hour)}
	unsigned, _ := json.Marshal(req)
	w.publishRequest(t, js, unsigned)
	byRogue, err := natsexec.SignRequest(context.Background(), rogue, req)
	if err != nil {
		t.Fatal(err)
	}
	w.publishRequest(t, js, byRogue)
	stale := req
	stale.IssuedAt, stale.Expires = now.Add(-2*time.Hour), now.Add(-time.Hour)
	expired, err := natsexec.SignRequest(context.Background(), w.coord, stale)
	if err != nil {
		t.Fatal(err)
	}
	w.publishRequest(t, js, expired)
	var mu sync.Mutex
	var taken []string
	var dropped []error
	worker := w.worker(t, "w", signer)
	worker.Fetched = func(r natsexec.Request) { mu.Lock(); taken = append(taken, r.RequestID); mu.Unlock() }
	worker.Dropped = func(err error) { mu.Lock(); dropped = append(dropped, err); mu.Unlock() }
	w.start(t, "w", worker)
	if c, err := batch.Execute(context.Background(), w.plan, w.store, co, batch.Options{Concurrency: 1}); err != nil || c.Done != 1 {
		t.Fatalf("done %d: %v", c.Done, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(taken) != 1 || taken[0] == "forged" {
		t.Errorf("the worker ran requests %v; want only the coordinator's", taken)
	}
	// The worker judges the messages side by side (its slots), so the
	// drops come in any order: each reason must be among them once.
	want := []string{"not a signed request", "signed by no trusted key", "it expired"}
	if len(dropped) != len(want) {
		t.Fatalf("dropped %v, want %d drops", dropped, len(want))
	}
	for _, d := range dropped {
		if !errors.Is(d, natsexec.ErrRequest) {
			t.Errorf("drop %v is not ErrRequest", d)
		}
	}
	for _, why := range want {
		n := 0
		for _, d := range dropped {
			if strings.Contains(d.Error(), why) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d drops say %q, want 1: %v", n, why, dropped)
		}
	}
}

// The replay attack: a client with no key takes a genuine, signed,
// passing run of one batch from the object store and offers it as the
// answer to another batch's request (whose agent breaks the verification,
// so no run of it can pass). The run validates against the worker key,
// but it is bound to the other trial and request nonce: it is refused,
// nothing of it is kept, and nothing is counted.
func TestReplayedRunRefused(t *testing.T) {
	w := newWorld(t, 1)
	signer, pub, _ := w.key(t, "w")
	stop := w.start(t, "w", w.worker(t, "w", signer))
	co := w.coordinator(t, 3*time.Second, pub)
	if c, err := batch.Execute(context.Background(), w.plan, w.store, co, batch.Options{Concurrency: 1}); err != nil || c.Done != 1 {
		t.Fatalf("batch A: done %d: %v", c.Done, err)
	}
	stop() // batch B gets no honest worker
	genuine := w.records(t)[0].Attempts[0]
	if genuine.Outcome != batch.OutcomePass {
		t.Fatalf("batch A's trial: %s", genuine.Outcome)
	}

	// Batch B: another name and an agent that cannot pass.
	data, _ := json.Marshal(batch.Spec{Name: "other", Sources: []string{w.plan.Trials[0].Source}, Tasks: []batch.TaskRef{{Name: "note"}},
		Agents: []batch.Agent{{Name: "broken", Scenario: "break-verification"}}, Repeats: 1, MaxAttempts: 1})
	spec, err := batch.ParseSpec(data, filepath.Join(w.dir, "other.json"), w.set)
	if err != nil {
		t.Fatal(err)
	}
	planB, err := batch.MakePlan(context.Background(), spec, w.set)
	if err != nil {
		t.Fatal(err)
	}
	storeB, err := batch.OpenStore(filepath.Join(w.dir, "coordinator"), planB.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	coB, err := natsexec.NewCoordinator(context.Background(), natsexec.CoordinatorOptions{URL: w.url, Store: storeB, BatchID: planB.BatchID,
		Schemas: w.set, Workers: []attest.PublicKey{pub}, Signer: w.coord, AckWait: 3 * time.Second, MaxRefusals: 2, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer coB.Close()

	nc, err := nats.Connect(w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	go func() {
		ctx := context.Background()
		cons, err := js.Consumer(ctx, natsexec.TrialsStream, natsexec.WorkerConsumer)
		if err != nil {
			t.Error(err)
			return
		}
		obj, err := js.ObjectStore(ctx, natsexec.WorkerBucket(pub.ID))
		if err != nil {
			t.Error(err)
			return
		}
		archive, err := obj.GetBytes(ctx, natsexec.ObjectName(genuine.ID, pub.ID))
		if err != nil {
			t.Error(err)
			return
		}
		sum := sha256.Sum256(archive)
		for i := 0; i < 2; i++ {
			msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(20*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			for msg := range msgs.Messages() {
				req := readUnverified(t, msg.Data())
				name := natsexec.ObjectName(req.AttemptID, pub.ID)
				if _, err := obj.PutBytes(ctx, name, archive); err != nil {
					t.Error(err)
					return
				}
				res, _ := json.Marshal(natsexec.Result{RequestID: req.RequestID, BatchID: req.Trial.BatchID, TrialID: req.Trial.ID, Attempt: req.Attempt,
					AttemptID: req.AttemptID, Worker: pub.ID, RunID: genuine.RunID, Object: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(archive))})
				if _, err := js.Publish(ctx, natsexec.ResultsPrefix+req.Trial.BatchID, res); err != nil {
					t.Error(err)
				}
				_ = msg.Ack()
			}
		}
	}()
	c, err := batch.Execute(context.Background(), planB, storeB, coB, batch.Options{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c.Done != 0 {
		t.Errorf("%d trials of batch B counted from a replayed run", c.Done)
	}
	rec, err := storeB.Load(planB.Trials[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Refused) != 2 {
		t.Fatalf("refusals %+v, want 2", rec.Refused)
	}
	for _, r := range rec.Refused {
		if !strings.Contains(r.Reason, "bound to another trial") || !strings.Contains(r.Reason, "request nonce") {
			t.Errorf("refusal %q does not say the run is another trial's", r.Reason)
		}
	}
	if a := rec.Last(); a != nil && a.EvidenceValid {
		t.Errorf("batch B's trial has a counted attempt: %+v", a)
	}
	left, _ := filepath.Glob(filepath.Join(storeB.Dir, "remote", "*"))
	if len(left) != 0 {
		t.Errorf("refused archives left unpacked: %v", left)
	}
}

// A signed request whose allowlist the worker's config does not grant is
// refused by the worker, with its reason in the result, and never run.
func TestRequestBeyondWorkerPolicyRefused(t *testing.T) {
	w := newWorld(t, 1)
	signer, pub, _ := w.key(t, "w")
	plan := w.plan
	plan.MaxAttempts = 1
	plan.Trials = append([]batch.Trial(nil), plan.Trials...)
	plan.Trials[0].VerifyAllowNet = []string{"127.0.0.1:9"}
	co := w.coordinator(t, 3*time.Second, pub)
	var ran []string
	var mu sync.Mutex
	w.inProcess(t, "w", signer, "", func(r natsexec.Request) { mu.Lock(); ran = append(ran, r.RequestID); mu.Unlock() })
	if _, err := batch.Execute(context.Background(), plan, w.store, co, batch.Options{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	rec, err := w.store.Load(plan.Trials[0])
	if err != nil {
		t.Fatal(err)
	}
	a := rec.Last()
	if a == nil || a.EvidenceValid || a.RunID != "" || !strings.Contains(a.Note, "refused by the worker's policy") || !strings.Contains(a.Note, "verify_allow_net names 127.0.0.1:9") {
		t.Fatalf("attempt %+v", a)
	}
	runs, _ := filepath.Glob(filepath.Join(w.dir, "workers", "w", "*-s3-*"))
	if len(runs) != 0 {
		t.Errorf("the refused request was run: %v", runs)
	}
}

// readUnverified decodes a request as an attacker would: without checking
// its signature.
func readUnverified(t *testing.T, data []byte) natsexec.Request {
	t.Helper()
	env, err := attest.ParseEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var pred struct {
		Request string `json:"request"`
	}
	var req natsexec.Request
	if err := json.Unmarshal(st.Predicate, &pred); err != nil || json.Unmarshal([]byte(pred.Request), &req) != nil {
		t.Fatalf("the request does not decode: %v", err)
	}
	return req
}

// A worker whose run outlives what the trial's limits allow stops its
// in-progress acks (MaxHold here; by default the task's timeouts and a
// margin), so a stuck run does not keep its trial from other workers: the
// server gives the trial to another worker, and it is counted once.
func TestStuckTrialGoesToAnotherWorker(t *testing.T) {
	w := newWorld(t, 1)
	spec := harness.DefaultSpec()
	spec.CaseTimeoutSeconds = 4
	specFile := filepath.Join(w.dir, "slow-task.json")
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(specFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ = json.Marshal(batch.Spec{Name: "stuck", Sources: []string{filepath.Join(w.owned, "a")}, Tasks: []batch.TaskRef{{Name: "slow", Spec: specFile}},
		Agents: []batch.Agent{{Name: "hangs", Scenario: "hang"}}, Repeats: 1, MaxAttempts: 1})
	bs, err := batch.ParseSpec(data, filepath.Join(w.dir, "stuck.json"), w.set)
	if err != nil {
		t.Fatal(err)
	}
	if w.plan, err = batch.MakePlan(context.Background(), bs, w.set); err != nil {
		t.Fatal(err)
	}
	if w.store, err = batch.OpenStore(filepath.Join(w.dir, "coordinator"), w.plan.BatchID); err != nil {
		t.Fatal(err)
	}
	a, apub, _ := w.key(t, "a")
	b, bpub, _ := w.key(t, "b")
	co := w.coordinator(t, time.Second, apub, bpub)
	var mu sync.Mutex
	took := map[string][]string{}
	first := make(chan struct{})
	var once sync.Once
	wa := w.worker(t, "a", a)
	wa.MaxHold = 500 * time.Millisecond
	wa.Fetched = func(r natsexec.Request) {
		mu.Lock()
		took["a"] = append(took["a"], r.RequestID)
		mu.Unlock()
		once.Do(func() { close(first) })
	}
	w.start(t, "a", wa)
	wb := w.worker(t, "b", b)
	wb.Fetched = func(r natsexec.Request) { mu.Lock(); took["b"] = append(took["b"], r.RequestID); mu.Unlock() }
	go func() {
		<-first
		w.start(t, "b", wb)
	}()
	c, err := batch.Execute(context.Background(), w.plan, w.store, co, batch.Options{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(took["a"]) == 0 || len(took["b"]) == 0 || took["b"][0] != took["a"][0] {
		t.Fatalf("requests taken: %v; want worker b to get worker a's stuck request", took)
	}
	rec := w.records(t)[0]
	if c.Done != 1 || len(rec.Attempts) != 1 {
		t.Errorf("done %d, attempts %+v: want the trial counted once", c.Done, rec.Attempts)
	}
}
