// Package workcopy is the fixture step: the copy of the source Case works
// in, made before Case runs, and the proofs of its start and end. Making it
// commits the baseline, creates the harness's store beside the evidence,
// snapshots the copy's .git and begins the verification checkout, all out
// of Case's reach; what the later steps need of it (the fixture's path,
// the store, the checkout begun, the baseline time) is the Copy Make
// returns. The copying itself is package fixture's; this package decides
// which copy a run gets and records it through the run's sink.
package workcopy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/checkout"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/overlay"
	"github.com/cto-harness/cto-harness/harness/progress"
	"github.com/cto-harness/cto-harness/harness/runsink"
	"github.com/cto-harness/cto-harness/harness/snapshot"
	"github.com/cto-harness/cto-harness/harness/source"
	"github.com/cto-harness/cto-harness/harness/store"
	"github.com/cto-harness/cto-harness/harness/task"
)

// Input is what the copy is made from: the proven source and the task, and
// the options that decide which copy it is.
type Input struct {
	Repo source.Repo
	Spec task.Spec
	// SourceProof is the source's before-proof: a verification checkout
	// begun from the source worktree is checked against its manifest.
	SourceProof *ctoharness.SourceProof
	// CheckoutDir is where the verification checkout is begun.
	CheckoutDir string
	// Unsandboxed (Case could write the overlay's lower layer, the source)
	// and KeepWork (a kept fixture must outlive the run, a mount must not)
	// make the fixture a copy rather than an overlay.
	Unsandboxed, KeepWork bool
	// Snapshots is the directory of the runs directory's snapshots
	// (snapshot.Root): an overlay fixture's lower layer is the snapshot of
	// the base there, made on first need. "" shows the source worktree
	// instead (HEAD only).
	Snapshots string
	// Signer signs the record of a snapshot this run makes, and is the key
	// a snapshot's record must be signed with; nil: unsigned snapshots.
	Signer *attest.Signer
	// DirtyStart is the fixture_dirty_start fault: a file left untracked in
	// the fixture after the baseline, which the clean-start proof must catch.
	DirtyStart bool
	// Allowed replaces the task's allowed-path policy at the collect when
	// set (the failure matrix's planted policies).
	Allowed  func(path string) (bool, string)
	Getenv   func(string) string
	Progress *progress.Line // the terminal status line (nil: none)
	Hooks    Hooks
}

// Hooks are what other steps are told of the copy as it is made.
type Hooks struct {
	// Made is told the fixture's directory once it exists: the launcher
	// shows it to Case.
	Made func(dir string)
}

// Copy is the harness's own account of the fixture, made before Case runs
// and kept where Case cannot write: the store holding the baseline (and
// later the result), when the baseline was made, and the fixture's .git as
// the harness left it.
type Copy struct {
	Path       string // the fixture; "" when none was made
	Store      string // "" when it could not be made
	BaselineAt time.Time
	GitBefore  []ctoharness.ManifestEntry
	// Conversions are the source's checkout settings the copy used, for
	// the collect to hash Case's changes as git add would.
	Conversions gitstatus.CheckoutSettings
	// Checkout is the verification checkout's baseline, begun once the
	// fixture is made and finished while Case works: an overlay of the
	// base's snapshot when the fixture is one, else of the source worktree
	// or a copy (the source is out of Case's reach), so that the
	// verification later only writes the change.
	Checkout *checkout.Baseline
	// History and Base are what every checkout of the source takes: how
	// much of the base's history reaches it, and the base when it is not
	// the source's HEAD ("").
	History fixture.History
	Base    string

	mount *overlay.Mount     // the overlay the fixture is, when it is one (nil: a copy)
	snap  *snapshot.Snapshot // its lower layer, held until Release (nil: none)
	// snapInputs are the conversions snap was written with.
	snapInputs fixture.CheckoutInputs
	// recorded is the closure an earlier run recorded that the fixture's
	// store was copied from (nil: its history was walked); shallow is the
	// digest of the source's shallow file it was looked up with.
	recorded *fixture.SharedClosure
	shallow  string
	// linksOut are the baseline's symlinks leading out of the fixture: the
	// clean-end proof of an overlay lists them without walking it.
	linksOut []string
	// snapErr says why the base's snapshot could not be made ("": it was,
	// or none was tried), for fixture_copied.
	snapErr string
	in      Input
}

// Release detaches what the copy holds mounted once no step needs it: the
// verification checkout and an overlay fixture. The fixture's mount point
// is left empty (and removed with the run's work); the overlay's layer,
// which holds what Case wrote, stays in the workspace until then.
func (c Copy) Release() {
	if c.Checkout != nil {
		c.Checkout.Stop()
	}
	_ = c.mount.Unmount()
	c.snap.Release()
}

// Layer is the directory of an overlay fixture's writable layer, in the
// run's workspace (outside every view).
func Layer(workspace string) string {
	return filepath.Join(workspace, evidence.FixtureDir)
}

// Make copies the source into the fixture, commits the baseline and makes
// the harness's store from it. It reports false only when there is no
// fixture at all; a copy that failed otherwise blocked the run.
func Make(ctx context.Context, s *runsink.Sink, in Input) (Copy, bool) {
	s.SetStep(ctoharness.StepCopy)
	dst := s.Dir.Path(evidence.FixtureDir)
	in.Progress.Step("copy")
	c := Copy{BaselineAt: s.Clock(), History: history(in.Spec), Base: otherBase(s.Report.Commits), in: in}
	res, mnt, err := c.makeFixture(ctx, s, dst)
	c.mount = mnt
	if mnt == nil {
		c.snap.Release() // a copy took the overlay's place
		c.snap = nil
	}
	if _, statErr := os.Lstat(dst); statErr == nil {
		c.Path = dst
		if in.Hooks.Made != nil {
			in.Hooks.Made(dst)
		}
		s.Report.FixturePath = dst
	}
	if err != nil {
		c.Release() // no verification will need a checkout; no step will read the fixture
		s.BlockErr(err, ctoharness.StepCopy)
		return c, c.Path != ""
	}
	closure := c.baseline(ctx, s, dst, res)
	c.beginCheckout(ctx, s, closure)
	return c, true
}

// beginCheckout begins the verification checkout, to be finished while
// Case works: on the base's snapshot when the fixture shows one, its store
// then copied from the closure the baseline shared (proven by this run a
// moment ago, so not walked again).
func (c *Copy) beginCheckout(ctx context.Context, s *runsink.Sink, closure *fixture.SharedClosure) {
	in := c.in
	var snap *checkout.Snapshot
	if c.snap != nil {
		snap = &checkout.Snapshot{Tree: c.snap.TreeDir(), Listing: c.snap.Listing, Index: c.snap.Index, Checkout: c.snapInputs}
		// The listing and the index have vouched for the fixture's files
		// and are the checkout's now, which lets them go once its own are
		// adopted; the run holds the snapshot (its lock) until Release.
		c.snap.Listing, c.snap.Index = nil, nil
	}
	c.Checkout = checkout.Begin(ctx, checkout.Input{SourceRoot: in.Repo.Root, SourceGitDir: in.Repo.GitDir, Dest: in.CheckoutDir, BaselineTime: c.BaselineAt,
		Tracer: s.Trace, Getenv: in.Getenv, History: c.History, Base: c.Base,
		// Unsandboxed, Case can write the source, the overlay's lower layer:
		// the copy is at least a snapshot.
		Overlay: !in.Unsandboxed, SourceProof: in.SourceProof, Snapshot: snap, Closure: closure})
}

// baseline makes the store from the fixture's baseline commit, snapshots
// the fixture's .git, and records the copy and the baseline. It returns the
// base's closure as it shared it (nil when it could not).
func (c *Copy) baseline(ctx context.Context, s *runsink.Sink, dst string, res fixture.CopyResult) *fixture.SharedClosure {
	storeDir := s.Dir.Path(evidence.StoreDir)
	gitDir := filepath.Join(dst, ".git")
	// The base's history is shared by the runs beside this one, not copied.
	// A recorded closure is already there: the fixture's store was copied
	// from it and listed against its record a moment ago.
	var closure string
	var err error
	if c.recorded != nil {
		closure = c.recorded.Objects
	} else {
		closure, err = fixture.ShareClosure(ctx, gitDir, closures(s), res.Closure, res.BaselineCommit, s.Trace)
	}
	var shared *fixture.SharedClosure
	if err == nil {
		shared = &fixture.SharedClosure{Objects: closure, Layer: fixture.ClosureLayer(closure), Proof: res.Closure, Exact: !res.SubmodulesMerged}
		// The next run at this base need not walk its history again.
		if c.snap != nil && c.recorded == nil {
			err = fixture.RecordClosure(ctx, closures(s), fixture.ClosureRecord{Base: res.BaseCommit, History: c.History.String(), Shallow: c.shallow, Objects: res.Closure}, c.in.Signer, s.Trace)
		}
	}
	if err != nil {
		s.BlockErr(err, ctoharness.StepBaseline)
	} else if err = store.Create(ctx, gitDir, storeDir, res.BaselineCommit, closure, s.Trace); err != nil {
		s.BlockErr(err, ctoharness.StepBaseline)
	} else if c.GitBefore, err = fixture.GitSnapshot(ctx, dst, s.Trace); err != nil {
		s.BlockErr(ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepBaseline, err, "list the fixture's .git"), ctoharness.StepBaseline)
	} else {
		c.Store = storeDir
	}
	s.Report.Commits.BaselineCommit = res.BaselineCommit
	s.Report.Commits.BaselineTree = res.BaselineTree
	objects := res.Closure
	s.Report.FixtureObjects = &objects
	c.Conversions = res.Checkout
	c.linksOut = res.SymlinksOutside
	if c.in.DirtyStart {
		p := filepath.Join(dst, "injected-untracked.txt")
		s.Trace.Trace(ctoharness.TraceWrite, p)
		if err := os.WriteFile(p, []byte("left by the fixture_dirty_start fault\n"), 0o644); err != nil {
			s.BlockErr(err, ctoharness.StepBaseline)
		}
	}
	copied := map[string]any{"fixture": dst, "files": res.Files, "symlinks_outside": nonNil(res.SymlinksOutside),
		"overlay": c.mount != nil, "closure_reused": c.recorded != nil}
	if c.snapErr != "" {
		copied["snapshot_unavailable"] = c.snapErr
	}
	if c.snap != nil {
		copied["snapshot"] = map[string]any{"key": c.snap.Key, "record_sha256": c.snap.RecordDigest, "made": c.snap.Made,
			"listing_digest": c.snap.Record.Listing, "signing_key_id": c.snap.Record.SigningKeyID}
	}
	s.Emit(ctx, ctoharness.EvFixtureCopied, copied)
	s.SetStep(ctoharness.StepBaseline)
	s.Emit(ctx, ctoharness.EvBaselineCommitted, map[string]any{"commit": res.BaselineCommit, "tree": res.BaselineTree,
		"source_tree": res.SourceTree, "tree_matches_source": res.BaselineTree == res.SourceTree,
		"base_commit": res.BaseCommit, "base_tree": res.BaseTree,
		"history": objects.History, "objects": objects.Objects, "objects_digest": objects.Digest, "objects_left_out": objects.LeftOut})
	if res.BaselineTree != s.Report.Commits.BaseTree {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockCopyUnfaithful, Step: ctoharness.StepBaseline,
			Message: fmt.Sprintf("baseline tree %s differs from the tree %s of the base %s", res.BaselineTree, s.Report.Commits.BaseTree, s.Report.Commits.BaseCommit)})
	}
	return shared
}

// makeFixture shows the base's tree at dst for Case to work in. Where it
// can, that is an overlay whose lower layer is the snapshot of the base
// (package snapshot, proven by its record and one lstat walk; see
// snapshotFixture): nothing is copied or hashed, and Case's writes land in
// a layer in the run's workspace. Without a snapshot directory the lower
// layer is the source worktree, whose every file is hashed against the
// tree (fixture.AdoptHashed). It is a copy instead when the run is
// unsandboxed (Case could then write the lower layer), when the work is
// kept (a kept fixture must outlive the run, a mount must not), for trees
// with submodules the source populates (and, on the worktree, any
// submodule or filtered path), and where the machine cannot mount.
func (c *Copy) makeFixture(ctx context.Context, s *runsink.Sink, dst string) (fixture.CopyResult, *overlay.Mount, error) {
	repo := c.in.Repo
	in := fixture.CopyInput{SourceRoot: repo.Root, SourceGitDir: repo.GitDir, Dest: dst, When: c.BaselineAt, Tracer: s.Trace, Progress: c.in.Progress,
		Getenv: c.in.Getenv, History: c.History, Base: c.Base}
	if c.in.Unsandboxed || c.in.KeepWork {
		res, err := fixture.Copy(ctx, in)
		return res, nil, err
	}
	layer := Layer(s.Report.RuntimeWorkspaceRoot)
	s.Trace.Trace(ctoharness.TraceMkdir, layer)
	if err := os.MkdirAll(layer, 0o755); err != nil {
		return fixture.CopyResult{}, nil, ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, err, "create the fixture's layer directory %s", layer)
	}
	upper, work := filepath.Join(layer, "layer"), filepath.Join(layer, "layer-work")
	if c.in.Snapshots != "" {
		res, m, err := c.snapshotFixture(ctx, s, in, upper, work)
		if m != nil || !errors.Is(err, errNoOverlay) {
			return res, m, err
		}
	}
	// Another base than HEAD is written from the object store: the
	// worktree shows HEAD.
	if in.Base != "" {
		res, err := fixture.Copy(ctx, in)
		return res, nil, err
	}
	m, err := overlay.Tree(ctx, overlay.Input{Source: repo.Root, GitDir: repo.GitDir, Dest: dst, Upper: upper, Work: work, Tracer: s.Trace})
	if err == nil {
		var res fixture.CopyResult
		if res, err = fixture.AdoptHashed(ctx, in); !errors.Is(err, fixture.ErrAdoptNeedsCopy) {
			return res, m, err
		}
		if err := discard(s, m, dst, upper, work); err != nil {
			return res, nil, err
		}
	} else if !errors.Is(err, overlay.ErrUnavailable) {
		return fixture.CopyResult{}, nil, ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, err, "make the overlay fixture %s", dst)
	}
	res, err := fixture.Copy(ctx, in)
	return res, nil, err
}

// errNoOverlay: no overlay of a snapshot can be made here (no mount, or a
// submodule the source populates); the fixture is made another way.
var errNoOverlay = errors.New("no snapshot overlay")

// snapshotFixture mounts the fixture's overlay on the snapshot of the base
// and adopts it (fixture.AdoptSnapshot: the paths and modes checked against
// the tree, every file's stat data against the snapshot's listing, which
// snapshot.Open has just checked against its record). The run holds the
// snapshot until Release. It returns errNoOverlay, with nothing left
// behind but the snapshot, when the fixture must be made another way.
func (c *Copy) snapshotFixture(ctx context.Context, s *runsink.Sink, in fixture.CopyInput, upper, work string) (fixture.CopyResult, *overlay.Mount, error) {
	var res fixture.CopyResult
	ci, err := fixture.SourceCheckoutInputs(in.SourceRoot, in.SourceGitDir, in.Getenv, s.Trace)
	if err != nil {
		return res, nil, err
	}
	snap, err := snapshot.Open(ctx, snapshot.Input{Root: c.in.Snapshots, SourceRoot: in.SourceRoot, SourceGitDir: in.SourceGitDir,
		Commit: s.Report.Commits.BaseCommit, Tree: s.Report.Commits.BaseTree, Checkout: ci, Signer: c.in.Signer, Now: s.Clock,
		Tracer: s.Trace, Progress: c.in.Progress})
	var be *ctoharness.BlockerError
	switch {
	case errors.As(err, &be) && be.Blocker.Code == ctoharness.BlockSnapshotChanged:
		return res, nil, err // never worked around: something wrote it
	case errors.Is(err, snapshot.ErrNeedsCopy):
		return res, nil, errNoOverlay
	case err != nil:
		// It could not be made (an LFS object missing, the disk): the
		// fixture is made another way, which proves itself and reports
		// what is wrong with the source as it always did.
		c.snapErr = err.Error()
		return res, nil, errNoOverlay
	}
	// The snapshot shows each submodule empty, as git leaves one it does
	// not populate: a source that populates one gets a copy of its files.
	srcGit := in.SourceGitDir
	if srcGit == "" {
		srcGit = filepath.Join(in.SourceRoot, ".git")
	}
	if p := fixture.SourcePopulates(in.SourceRoot, srcGit, snap.Record.Submodules, s.Trace); p != "" {
		snap.Release()
		c.snapErr = "the source populates submodule " + p + ", whose files only a copy holds"
		return res, nil, errNoOverlay
	}
	c.snap, c.snapInputs = snap, ci
	if in.Closure, err = c.recordedClosure(ctx, s); err != nil {
		return res, nil, err
	}
	// A recorded closure's objects are shown below the snapshot, not copied.
	var below []string
	if in.Closure != nil && in.Closure.Layer != "" {
		below, in.ObjectsShown = []string{in.Closure.Layer}, true
	}
	m, err := overlay.Lower(ctx, overlay.Input{Source: snap.TreeDir(), Below: below, Dest: in.Dest, Upper: upper, Work: work, Tracer: s.Trace})
	if errors.Is(err, overlay.ErrUnavailable) {
		return res, nil, errNoOverlay
	}
	if err != nil {
		return res, nil, ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, err, "make the overlay fixture %s on the snapshot %s", in.Dest, snap.Dir)
	}
	in.Snapshot, in.TreeIndex, in.Checkout, in.Upper, in.UserXattr = snap.Listing, snap.Index, &ci, m.Upper(), m.UserXattr()
	res, err = fixture.AdoptSnapshot(ctx, in)
	return res, m, err
}

// closures is the runs directory's shared closures.
func closures(s *runsink.Sink) string {
	return filepath.Join(filepath.Dir(s.Dir.Root()), store.ClosuresDir)
}

// recordedClosure is the base's closure as an earlier run walked and
// recorded it (fixture.LookupClosure), nil when none did: the fixture's
// store is then copied from it, and the history not walked again.
func (c *Copy) recordedClosure(ctx context.Context, s *runsink.Sink) (*fixture.SharedClosure, error) {
	gitDir := c.in.Repo.GitDir
	if gitDir == "" {
		gitDir = filepath.Join(c.in.Repo.Root, ".git")
	}
	var err error
	if c.shallow, err = fixture.SourceShallow(gitDir); err != nil {
		return nil, ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, err, "read the shallow file of source %s", c.in.Repo.Root)
	}
	c.recorded, err = fixture.LookupClosure(ctx, closures(s), s.Report.Commits.BaseCommit, c.History.String(), c.shallow, c.in.Signer, s.Trace)
	return c.recorded, err
}

// discard gives up an overlay fixture so that a copy can take its place.
func discard(s *runsink.Sink, m *overlay.Mount, dst, upper, work string) error {
	for _, p := range []string{dst, upper, work} {
		s.Trace.Trace(ctoharness.TraceRemove, p)
	}
	if err := m.Discard(); err != nil {
		return ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepCopy, err, "give up the overlay fixture %s before copying it instead", dst)
	}
	return nil
}

// history is how much of the base's history the task lets reach Case (the
// spec's form was checked by its schema; a form the copy cannot take
// blocks it).
func history(spec task.Spec) fixture.History {
	h, err := fixture.ParseHistory(spec.HistoryText())
	if err != nil {
		return fixture.History{Mode: spec.HistoryText()}
	}
	return h
}

// BaseRev is the revision the task starts from: --rev, else the spec's
// base, else "" (HEAD).
func BaseRev(rev string, spec task.Spec) string {
	if rev != "" {
		return rev
	}
	return spec.Base
}

// otherBase is the base commit when it is not the source's HEAD, "" when
// it is.
func otherBase(c ctoharness.Commits) string {
	if c.BaseCommit != c.SourceHead {
		return c.BaseCommit
	}
	return ""
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
