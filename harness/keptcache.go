package harness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/backend"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/verify"
	"github.com/cto-harness/cto-harness/harness/warmcache"
)

// checkoutInView is where the verification's checkout appears in its
// sandbox when the Go caches are offered. Go keys a compiled package by
// its directory, and each run's checkout is somewhere else on the host:
// shown at one fixed path (every sandbox has a mount namespace of its
// own, so concurrent runs do not collide), the repository's own packages
// compiled by an earlier warm-up are found again.
const checkoutInView = "/cto-harness/checkout"

// warmUpGoFlags make every `go test` (and `go run`) of the warm-up
// compile and link without running what it built: the warm-up executes
// none of the repository's Go code, and go test caches no test result
// when -exec is set.
const warmUpGoFlags = "GOFLAGS=-exec=/bin/true"

// keptKey names the kept layer of this run's baseline, toolchain, host
// build cache and verification command. The key decides only when to warm
// up again: the entries themselves are keyed by Go's action ids.
func (r *run) keptKey(g warmcache.Go) string {
	return warmcache.KeptKey("go-build 1", r.Report.Commits.BaselineTree, g.Toolchain, g.BuildCache, r.spec.Verification.Command, checkoutInView)
}

// keptWarm is keepGo running beside Case: started once the contract is
// written (the warm-up needs only the baseline and the run's limits), and
// joined before the verification's view, which shows its layer, is built.
type keptWarm struct {
	done   chan struct{}
	cancel context.CancelFunc
}

func (r *run) startKeepGo(ctx context.Context, own record) *keptWarm {
	ctx, cancel := context.WithCancel(ctx)
	w := &keptWarm{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		r.keepGo(ctx, own)
	}()
	return w
}

// wait returns once keepGo has ended.
func (w *keptWarm) wait() { <-w.done }

// stop ends a warm-up no verification will read (the run ended before
// it) and waits for it: nothing of it may outlive the run.
func (w *keptWarm) stop() {
	w.cancel()
	<-w.done
}

// keepGo makes sure the kept build cache layer of the source's baseline
// exists before the verification's view is built, warming it up when it
// does not, and records what the verification will read. Only this step
// writes a kept layer, from a fresh checkout of the baseline (the source's
// HEAD, which the user owns) that Case never touched, with a build cache
// whose lower layer is the host's alone; the verification and Case only
// ever see it as a read-only layer under a writable layer of their run.
// Nothing here can block the run: without a layer the verification
// compiles from the host's cache, and the record says why.
func (r *run) keepGo(ctx context.Context, own record) {
	g, ok, _ := warmGo(r.o)
	if !ok || r.o.Unsandboxed {
		return
	}
	// The record exists whenever the verification's checkout is moved
	// (warmView), and names the only layer its view may show.
	key, root := r.keptKey(g), warmcache.KeptRoot(r.o.RunsDir)
	rec := &ctoharness.KeptCacheRecord{Key: key, CheckoutPath: checkoutInView}
	r.Report.Sandbox.KeptBuildCache = rec
	if !r.profile.RunTests {
		rec.Note = "the " + string(r.profile.Name) + " profile runs no verification, so nothing was warmed up or read"
		return
	}
	k, err := warmcache.OpenKept(root, key)
	switch {
	case err == nil:
		rec.Layer, rec.ID, rec.Files, rec.Bytes = k.Layer, k.ID, k.Files, k.Bytes
		return
	case errors.Is(err, warmcache.ErrKeptCorrupt):
		rec.Note = "a kept layer was discarded: " + err.Error() + "; "
		if rerr := RemoveTree(filepath.Join(root, key)); rerr != nil {
			rec.Note += "it could not be removed (" + rerr.Error() + "), so none is read"
			return
		}
	case !errors.Is(err, fs.ErrNotExist):
		rec.Note = "the kept layer could not be read (" + err.Error() + "), so none is read"
		return
	}
	upper, err := r.warmUp(ctx, own, g, rec)
	if err == nil {
		k, err = warmcache.Keep(root, key, upper)
	}
	_ = RemoveTree(filepath.Join(r.Report.RuntimeWorkspaceRoot, "warmup"))
	if err != nil {
		rec.Note += "no kept layer is read: " + err.Error()
		return
	}
	rec.Layer, rec.ID, rec.Files, rec.Bytes = k.Layer, k.ID, k.Files, k.Bytes
}

// warmUp runs the verification command once on a fresh checkout of the
// baseline, at checkoutInView in the verification's sandbox (no network,
// the run's limits and timeout) with warmUpGoFlags, and returns the
// writable layer of its build cache overlay. It succeeds when the command
// ran to its end, whatever its exit status: tests that fail on the
// baseline (the task may be to fix them) do not make what go compiled
// less the baseline's.
func (r *run) warmUp(ctx context.Context, own record, g warmcache.Go, rec *ctoharness.KeptCacheRecord) (string, error) {
	base := filepath.Join(r.Report.RuntimeWorkspaceRoot, "warmup")
	work, scratch := filepath.Join(base, "checkout"), filepath.Join(base, "scratch")
	in := checkout.Input{SourceRoot: r.repo.Root, Dest: work, BaselineTime: own.baselineAt, Tracer: r.Trace, Getenv: r.o.Getenv, History: r.history(), Base: r.otherBase(),
		Overlay: true, SourceManifest: r.before.Manifest}
	b := checkout.Begin(ctx, in)
	defer b.Stop()
	in.Store, in.Baseline, in.Result, in.ResultTime = own.store, r.Report.Commits.BaselineCommit, r.Report.Commits.BaselineCommit, own.baselineAt
	if _, err := b.Finish(ctx, in); err != nil {
		return "", fmt.Errorf("the warm-up's checkout of the baseline could not be made: %w", err)
	}
	dirs := backend.ScratchDirs(scratch)
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("the warm-up's scratch directory %s could not be made: %w", d, err)
		}
	}
	layer := filepath.Join(scratch, "warm")
	ovs, err := g.Overlays(layer)
	if err != nil {
		return "", err
	}
	v, _, err := r.planView(true, []string{"/bin/sh"})
	if err != nil {
		return "", fmt.Errorf("the warm-up's sandbox view cannot be planned: %w", err)
	}
	v.Moved, v.Cwd, v.Overlays, v.Expect = []sandbox.Bind{{Path: checkoutInView, Source: work}}, checkoutInView, ovs, ""
	pol := r.policy(true)
	pol.Writable = append([]string{work}, dirs...)
	pol.View = v
	f, err := r.Dir.OpenAppend(evidence.WarmUpLog)
	if err != nil {
		return "", fmt.Errorf("%s could not be opened: %w", evidence.WarmUpLog, err)
	}
	rec.WarmedUp, rec.WarmUpLog = true, evidence.WarmUpLog
	env := replaceEnv(r.toolEnv(egress.CommandVerify, backend.Env(scratch, "", r.o.Getenv("PATH"), r.repo.Root)), []string{warmUpGoFlags})
	timeout := time.Duration(r.spec.Verification.TimeoutSeconds) * time.Second
	vin := verify.Input{Command: r.spec.Verification.Command, Fixture: work, Env: env, Timeout: timeout, Log: f, LogPath: evidence.WarmUpLog, Tracer: r.Trace,
		Wrap: func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) {
			launch, attr, pf, err := sandbox.Command(r.o.SelfExe, pol, argv)
			return launch, attr, []*os.File{pf}, err
		}}
	vpol := verify.Policy{Profile: r.profile, AllowDangerous: r.o.AllowDangerous, Roots: dirs}
	vpol.Profile.FlakeReruns = 0
	out, err := verify.RunWithPolicy(ctx, vin, vpol, verify.NewBudget(timeout, 1))
	rec.WarmUpExitCode, rec.WarmUpMs = out.ExitCode, out.DurationMs
	switch {
	case err != nil:
		return "", fmt.Errorf("the warm-up could not run: %w", err)
	case out.Refusal != "" || out.ExitCode == nil:
		return "", fmt.Errorf("the warm-up did not run (%s: %s); see %s", out.Classification, out.Reason, evidence.WarmUpLog)
	case out.TimedOut:
		return "", fmt.Errorf("the warm-up timed out; see %s", evidence.WarmUpLog)
	}
	if msg, bad := sandbox.IsSetupFailure(*out.ExitCode, out.StderrInline); bad {
		return "", fmt.Errorf("the warm-up's sandbox could not be set up: %s", msg)
	}
	return filepath.Join(layer, "build", "upper"), nil
}
