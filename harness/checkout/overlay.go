package checkout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

// errNoOverlay means this machine or this source cannot have an overlay
// checkout; the baseline is copied instead.
var errNoOverlay = errors.New("no overlay checkout")

// overlayDirs are the overlay's writable layer and overlayfs's work
// directory, beside the checkout. Neither is in any command's view: the
// verification sees the layer only through the mount.
func overlayDirs(dest string) (upper, work string) {
	v := filepath.Dir(dest)
	return filepath.Join(v, "layer"), filepath.Join(v, "layer-work")
}

// overlayBaseline shows the source's HEAD tree at in.Dest without copying
// it: an overlayfs whose lower layer is the source worktree and whose upper
// layer hides everything the tree does not hold (the source's .git, its
// untracked and ignored files) with whiteouts. Whatever is written in the
// checkout then — the result's changes, the verification's own writes —
// lands in the upper layer; overlayfs never writes a lower layer, so the
// source stays untouched. The files shown are the source's own: the fixture
// copy hashed them against the same tree, and the source's before and after
// proofs show them unchanged since, so they are not hashed again (see
// fixture.Adopt). Mounting needs CAP_SYS_ADMIN; without it, or when the
// kernel refuses, it returns errNoOverlay and leaves nothing behind.
func overlayBaseline(ctx context.Context, in Input) (fixture.CopyResult, string, error) {
	if in.SourceManifest == nil {
		return fixture.CopyResult{}, "", fmt.Errorf("%w: no source proof to hold the source's files to", errNoOverlay)
	}
	src := filepath.Clean(in.SourceRoot)
	upper, work := overlayDirs(in.Dest)
	for _, p := range []string{src, upper, work} {
		if strings.ContainsAny(p, ",:\\\n") {
			return fixture.CopyResult{}, "", fmt.Errorf("%w: %s has a character overlayfs options cannot carry", errNoOverlay, p)
		}
	}
	tracked, err := trackedPaths(src)
	if err != nil {
		return fixture.CopyResult{}, "", fmt.Errorf("%w: %v", errNoOverlay, err)
	}
	cleanup := func() { os.RemoveAll(upper); os.RemoveAll(work); os.Remove(in.Dest) }
	for _, d := range []string{in.Dest, upper, work} {
		in.Tracer.Trace(ctoharness.TraceMkdir, d)
		if err := os.Mkdir(d, 0o755); err != nil {
			cleanup()
			return fixture.CopyResult{}, "", fmt.Errorf("%w: %v", errNoOverlay, err)
		}
	}
	in.Tracer.Trace(ctoharness.TraceWalk, src)
	if err := hideUntracked(ctx, src, upper, "", tracked); err != nil {
		cleanup()
		return fixture.CopyResult{}, "", failed(err, "hide the source's untracked files in the checkout's layer %s", upper)
	}
	opts := "lowerdir=" + src + ",upperdir=" + upper + ",workdir=" + work
	in.Tracer.Trace(ctoharness.TraceWrite, in.Dest)
	if err := unix.Mount("overlay", in.Dest, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		cleanup()
		return fixture.CopyResult{}, "", fmt.Errorf("%w: mount overlayfs at %s: %v", errNoOverlay, in.Dest, err)
	}
	res, err := fixture.Adopt(ctx, fixture.CopyInput{SourceRoot: src, Dest: in.Dest, When: in.BaselineTime, Tracer: in.Tracer, Progress: in.Progress,
		SourceManifest: in.SourceManifest, Getenv: in.Getenv})
	if errors.Is(err, fixture.ErrAdoptNeedsCopy) {
		if uerr := unmount(in.Dest); uerr != nil {
			return res, in.Dest, failed(uerr, "give up the overlay checkout")
		}
		cleanup()
		return res, "", fmt.Errorf("%w: %v", errNoOverlay, err)
	}
	if err != nil {
		return res, in.Dest, failed(err, "make the overlay checkout %s a repository", in.Dest)
	}
	return res, in.Dest, nil
}

// tracked is the source HEAD tree's paths: files (and links) and the
// directories holding them.
type tracked struct{ files, dirs map[string]bool }

// trackedPaths lists the source HEAD tree, read with go-git from the
// source's objects (nothing the source configures runs).
func trackedPaths(src string) (tracked, error) {
	t := tracked{files: map[string]bool{}, dirs: map[string]bool{"": true}}
	r, err := gitstatus.Open(src, filepath.Join(src, ".git"))
	if err != nil {
		return t, err
	}
	head, err := r.Head()
	if err != nil {
		return t, err
	}
	c, err := r.CommitObject(head.Hash())
	if err != nil {
		return t, err
	}
	tree, err := c.Tree()
	if err != nil {
		return t, err
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return t, err
		}
		if e.Mode == filemode.Dir {
			t.dirs[name] = true
			continue
		}
		if e.Mode == filemode.Submodule {
			// The copy writes a submodule's files at its recorded commit,
			// which its worktree need not show.
			return t, fmt.Errorf("%s is a submodule", name)
		}
		t.files[name] = true
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			t.dirs[d] = true
		}
	}
}

// hideUntracked puts a whiteout in upper for every entry of src's directory
// rel that the tree does not hold: the source's .git, untracked and ignored
// files, and directories holding only those. It follows no symlink.
func hideUntracked(ctx context.Context, src, upper, rel string, t tracked) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ents, err := os.ReadDir(filepath.Join(src, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := e.Name()
		if rel != "" {
			p = rel + "/" + p
		}
		switch {
		case e.IsDir() && t.dirs[p]:
			if err := hideUntracked(ctx, src, upper, p, t); err != nil {
				return err
			}
		case t.files[p]:
		default:
			dir := filepath.Join(upper, filepath.FromSlash(path.Dir(p)))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			// A whiteout is a character device 0/0 (mknod allows it
			// without CAP_MKNOD since Linux 5.8).
			if err := unix.Mknod(filepath.Join(dir, e.Name()), unix.S_IFCHR|0o000, 0); err != nil {
				return fmt.Errorf("whiteout for %s: %w", p, err)
			}
		}
	}
	return nil
}

// unmount detaches the overlay checkout at dir.
func unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount the overlay checkout %s: %w", dir, err)
	}
	return nil
}
