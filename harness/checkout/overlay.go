package checkout

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/overlay"
	"github.com/cto-harness/cto-harness/harness/source"
)

// overlayDirs are the overlay's writable layer and overlayfs's work
// directory, beside the checkout. Neither is in any command's view: the
// verification sees the layer only through the mount.
func overlayDirs(dest string) (upper, work string) {
	v := filepath.Dir(dest)
	return filepath.Join(v, "layer"), filepath.Join(v, "layer-work")
}

// overlayBaseline shows the source's HEAD tree at in.Dest without copying
// it (package overlay). Whatever is written in the checkout then — the
// result's changes, the verification's own writes — lands in the overlay's
// layer, never in the source. The files shown are the source's own: the
// fixture hashed them against the same tree, and the source's before and
// after proofs show them unchanged since, so they are not hashed again (see
// fixture.Adopt). Where no overlay can be made it returns an error wrapping
// overlay.ErrUnavailable and leaves nothing behind.
func overlayBaseline(ctx context.Context, in Input) (fixture.CopyResult, *overlay.Mount, error) {
	if in.Snapshot != nil {
		return snapshotBaseline(ctx, in)
	}
	if in.SourceProof == nil {
		return fixture.CopyResult{}, nil, fmt.Errorf("%w: no source proof to hold the source's files to", overlay.ErrUnavailable)
	}
	// The before-proof is set aside in a file while Case works; this
	// checkout reads its own copy back.
	before, err := source.Restored(in.SourceProof)
	if err != nil {
		return fixture.CopyResult{}, nil, failed(err, "read back the source proof the overlay checkout %s is held to", in.Dest)
	}
	upper, work := overlayDirs(in.Dest)
	m, err := overlay.Tree(ctx, overlay.Input{Source: in.SourceRoot, GitDir: in.SourceGitDir, Dest: in.Dest, Upper: upper, Work: work, Tracer: in.Tracer})
	if err != nil {
		if errors.Is(err, overlay.ErrUnavailable) {
			return fixture.CopyResult{}, nil, err
		}
		return fixture.CopyResult{}, nil, failed(err, "make the overlay checkout %s", in.Dest)
	}
	res, err := fixture.Adopt(ctx, fixture.CopyInput{SourceRoot: in.SourceRoot, SourceGitDir: in.SourceGitDir, Dest: in.Dest, When: in.BaselineTime, Tracer: in.Tracer, Progress: in.Progress,
		SourceManifest: before.Entries(), Getenv: in.Getenv, History: in.History, Closure: in.Closure})
	if errors.Is(err, fixture.ErrAdoptNeedsCopy) {
		if derr := m.Discard(); derr != nil {
			return res, nil, failed(derr, "give up the overlay checkout")
		}
		return res, nil, fmt.Errorf("%w: %v", overlay.ErrUnavailable, err)
	}
	if err != nil {
		return res, m, failed(err, "make the overlay checkout %s a repository", in.Dest)
	}
	return res, m, nil
}

// snapshotBaseline shows the base's snapshot at in.Dest, as the fixture's
// overlay does: nothing is walked to hide, and nothing is hashed (the
// files' stat data are held to the snapshot's listing; fixture.AdoptSnapshot).
func snapshotBaseline(ctx context.Context, in Input) (fixture.CopyResult, *overlay.Mount, error) {
	upper, work := overlayDirs(in.Dest)
	// The closure's objects are shown below the snapshot, not copied.
	var below []string
	if in.Closure != nil && in.Closure.Layer != "" {
		below = []string{in.Closure.Layer}
	}
	m, err := overlay.Lower(ctx, overlay.Input{Source: in.Snapshot.Tree, Below: below, Dest: in.Dest, Upper: upper, Work: work, Tracer: in.Tracer})
	if err != nil {
		if errors.Is(err, overlay.ErrUnavailable) {
			return fixture.CopyResult{}, nil, err
		}
		return fixture.CopyResult{}, nil, failed(err, "make the overlay checkout %s on the snapshot %s", in.Dest, in.Snapshot.Tree)
	}
	ci := in.Snapshot.Checkout
	res, err := fixture.AdoptSnapshot(ctx, fixture.CopyInput{SourceRoot: in.SourceRoot, SourceGitDir: in.SourceGitDir, Dest: in.Dest, When: in.BaselineTime, Tracer: in.Tracer, Progress: in.Progress,
		Getenv: in.Getenv, History: in.History, Base: in.Base, Snapshot: in.Snapshot.Listing, TreeIndex: in.Snapshot.Index, Upper: m.Upper(), UserXattr: m.UserXattr(), Checkout: &ci, Closure: in.Closure, ObjectsShown: below != nil})
	if err != nil {
		return res, m, failed(err, "make the overlay checkout %s a repository", in.Dest)
	}
	return res, m, nil
}
