package warm

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
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/verify"
	"github.com/cto-harness/cto-harness/harness/warmcache"
)

// CheckoutInView is where the verification's checkout appears in its
// sandbox when the Go caches are offered. Go keys a compiled package by
// its directory, and each run's checkout is somewhere else on the host:
// shown at one fixed path (every sandbox has a mount namespace of its
// own, so concurrent runs do not collide), the repository's own packages
// compiled by an earlier warm-up are found again.
const CheckoutInView = "/cto-harness/checkout"

// warmUpGoFlags make every `go test` (and `go run`) of the warm-up
// compile and link without running what it built: the warm-up executes
// none of the repository's Go code, and go test caches no test result
// when -exec is set.
const warmUpGoFlags = "GOFLAGS=-exec=/bin/true"

// KeptKey names the kept layer of a baseline tree, toolchain, host build
// cache and verification command. The key decides only when to warm up
// again: the entries themselves are keyed by Go's action ids.
func KeptKey(g warmcache.Go, baselineTree, command string) string {
	return warmcache.KeptKey("go-build 1", baselineTree, g.Toolchain, g.BuildCache, command, CheckoutInView)
}

// Keep is what the warm-up needs of the run: the baseline, the
// verification, and the pipeline's means to check it out and to launch a
// command in the verification's sandbox.
type Keep struct {
	RunsDir      string // holds the kept layers (warmcache.KeptRoot)
	Workspace    string // the run's runtime workspace root; the warm-up works in its "warmup"
	BaselineTree string
	Command      string        // the verification command
	Timeout      time.Duration // the verification's
	Profile      profile.Policy
	// AllowDangerous is the run's --allow-dangerous for the script scan.
	AllowDangerous bool
	// Checkout is the fresh checkout of the baseline, all but its Dest.
	Checkout checkout.Input
	// RepoRoot and Allowed make the verification's environment: the
	// source's root (named to no command) and the verification's allowlist.
	RepoRoot string
	Allowed  func(host string) bool
	// Sandbox is the verification's sandbox policy with its view planned
	// for /bin/sh; the warm-up narrows it to its own checkout and scratch.
	Sandbox func() (sandbox.Policy, error)
	// Launch wraps argv in the sandbox launcher for pol.
	Launch func(pol sandbox.Policy, argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error)
	// RemoveTree removes a directory tree, even one without write bits.
	RemoveTree func(string) error
}

// Warming is the warm-up running beside Case: started once the contract
// is written (it needs only the baseline and the run's limits), and joined
// before the verification's view, which shows its layer, is built.
type Warming struct {
	done   chan struct{}
	cancel context.CancelFunc
	rec    *ctoharness.KeptCacheRecord
}

// StartKeep starts the warm-up of the kept Go build cache layer.
func (c *Caches) StartKeep(ctx context.Context, s *runsink.Sink, in Keep) *Warming {
	ctx, cancel := context.WithCancel(ctx)
	w := &Warming{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		w.rec = c.keep(ctx, s, in)
	}()
	return w
}

// Wait returns, once the warm-up has ended, what the verification will
// read (nil when the Go caches are not offered): the report's
// sandbox.kept_build_cache.
func (w *Warming) Wait() *ctoharness.KeptCacheRecord {
	<-w.done
	return w.rec
}

// Stop ends a warm-up no verification will read (the run ended before
// it) and waits for it: nothing of it may outlive the run.
func (w *Warming) Stop() *ctoharness.KeptCacheRecord {
	w.cancel()
	return w.Wait()
}

// keep makes sure the kept build cache layer of the source's baseline
// exists before the verification's view is built, warming it up when it
// does not, and records what the verification will read. Only this step
// writes a kept layer, from a fresh checkout of the baseline (the source's
// HEAD, which the user owns) that Case never touched, with a build cache
// whose lower layer is the host's alone; the verification and Case only
// ever see it as a read-only layer under a writable layer of their run.
// Nothing here can block the run: without a layer the verification
// compiles from the host's cache, and the record says why.
func (c *Caches) keep(ctx context.Context, s *runsink.Sink, in Keep) *ctoharness.KeptCacheRecord {
	if c.goc == nil || c.unsandboxed {
		return nil
	}
	// The record exists whenever the verification's checkout is moved
	// (ShowGo), and names the only layer its view may show.
	key, root := KeptKey(*c.goc, in.BaselineTree, in.Command), warmcache.KeptRoot(in.RunsDir)
	rec := &ctoharness.KeptCacheRecord{Key: key, CheckoutPath: CheckoutInView}
	if !in.Profile.RunTests {
		rec.Note = "the " + string(in.Profile.Name) + " profile runs no verification, so nothing was warmed up or read"
		return rec
	}
	k, err := warmcache.OpenKept(root, key)
	switch {
	case err == nil:
		rec.Layer, rec.ID, rec.Files, rec.Bytes = k.Layer, k.ID, k.Files, k.Bytes
		return rec
	case errors.Is(err, warmcache.ErrKeptCorrupt):
		rec.Note = "a kept layer was discarded: " + err.Error() + "; "
		if rerr := in.RemoveTree(filepath.Join(root, key)); rerr != nil {
			rec.Note += "it could not be removed (" + rerr.Error() + "), so none is read"
			return rec
		}
	case !errors.Is(err, fs.ErrNotExist):
		rec.Note = "the kept layer could not be read (" + err.Error() + "), so none is read"
		return rec
	}
	upper, err := c.warmUp(ctx, s, in, rec)
	if err == nil {
		k, err = warmcache.Keep(root, key, upper)
	}
	_ = in.RemoveTree(filepath.Join(in.Workspace, "warmup"))
	if err != nil {
		rec.Note += "no kept layer is read: " + err.Error()
		return rec
	}
	rec.Layer, rec.ID, rec.Files, rec.Bytes = k.Layer, k.ID, k.Files, k.Bytes
	return rec
}

// warmUp runs the verification command once on a fresh checkout of the
// baseline, at CheckoutInView in the verification's sandbox (no network,
// the run's limits and timeout) with warmUpGoFlags, and returns the
// writable layer of its build cache overlay. It succeeds when the command
// ran to its end, whatever its exit status: tests that fail on the
// baseline (the task may be to fix them) do not make what go compiled
// less the baseline's.
func (c *Caches) warmUp(ctx context.Context, s *runsink.Sink, in Keep, rec *ctoharness.KeptCacheRecord) (string, error) {
	base := filepath.Join(in.Workspace, "warmup")
	work, scratch := filepath.Join(base, "checkout"), filepath.Join(base, "scratch")
	co := in.Checkout
	co.Dest = work
	b := checkout.Begin(ctx, co)
	defer b.Stop()
	if _, err := b.Finish(ctx, co); err != nil {
		return "", fmt.Errorf("the warm-up's checkout of the baseline could not be made: %w", err)
	}
	dirs := backend.ScratchDirs(scratch)
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("the warm-up's scratch directory %s could not be made: %w", d, err)
		}
	}
	layer := filepath.Join(scratch, "warm")
	ovs, err := c.goc.Overlays(layer)
	if err != nil {
		return "", err
	}
	pol, err := in.Sandbox()
	if err != nil {
		return "", fmt.Errorf("the warm-up's sandbox view cannot be planned: %w", err)
	}
	pol.View.Moved, pol.View.Cwd, pol.View.Overlays, pol.View.Expect = []sandbox.Bind{{Path: CheckoutInView, Source: work}}, CheckoutInView, ovs, ""
	pol.Writable = append([]string{work}, dirs...)
	f, err := s.Dir.OpenAppend(evidence.WarmUpLog)
	if err != nil {
		return "", fmt.Errorf("%s could not be opened: %w", evidence.WarmUpLog, err)
	}
	rec.WarmedUp, rec.WarmUpLog = true, evidence.WarmUpLog
	env := backend.ReplaceEnv(c.Env(egress.CommandVerify, backend.Env(scratch, "", c.getenv("PATH"), in.RepoRoot), in.Allowed), []string{warmUpGoFlags})
	vin := verify.Input{Command: in.Command, Fixture: work, Env: env, Timeout: in.Timeout, Log: f, LogPath: evidence.WarmUpLog, Tracer: s.Trace,
		Wrap: func(argv []string) ([]string, *syscall.SysProcAttr, []*os.File, error) { return in.Launch(pol, argv) }}
	vpol := verify.Policy{Profile: in.Profile, AllowDangerous: in.AllowDangerous, Roots: dirs}
	vpol.Profile.FlakeReruns = 0
	out, err := verify.RunWithPolicy(ctx, vin, vpol, verify.NewBudget(in.Timeout, 1))
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
