// Package checkout makes the verification workspace: a fresh checkout of
// the result commit, in a directory of its own that Case never saw. Its
// baseline is copied from the source (the same hash-checked copy the
// fixture gets) and the change is written from the harness's store, so
// nothing Case left outside the result — ignored files, changes to the
// fixture's .git, dotfiles in its HOME, caches, daemons — can reach the
// verification. The checkout is then collected like a fixture and must give
// the result tree exactly, which proves it is the result.
package checkout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/overlay"
	"github.com/cto-harness/cto-harness/harness/store"
)

// Input says what to check out where.
type Input struct {
	SourceRoot string // the classified source, copied for the baseline
	// SourceGitDir is the source's git directory (source.Repo.GitDir);
	// empty means SourceRoot/.git.
	SourceGitDir string
	Dest         string // the checkout directory; must not exist
	Store        string // the harness's store (git directory)
	// Baseline and Result are commits in the store; BaselineTime and
	// ResultTime are the times they were made with, so the checkout's own
	// commits get the same hashes.
	Baseline, Result         string
	BaselineTime, ResultTime time.Time
	Tracer                   ctoharness.Tracer
	Progress                 fixture.Progress
	// Overlay shows the baseline as an overlay of the source instead of
	// copying it, where the machine allows (see overlayBaseline); the
	// caller must Stop the Baseline to unmount it.
	Overlay bool
	// SourceProof is the source proof taken before the run, its manifest
	// held packed or not; an overlay of the source worktree shows only
	// files it vouches for (read only then: an overlay of a snapshot does
	// not need it).
	SourceProof *ctoharness.SourceProof
	// Getenv is the environment the source's git configuration is read
	// with, for its checkout conversions (see fixture.CopyInput).
	Getenv func(string) string
	// History is the fixture's: the checkout's .git holds the same part of
	// the source's history, and nothing else of it.
	History fixture.History
	// Base is the fixture's base when it is not the source's HEAD: the
	// baseline is then written from the object store, or shown from its
	// snapshot, never an overlay of the worktree.
	Base string
	// Snapshot is the base's snapshot the fixture's overlay shows (package
	// snapshot), held by the caller until Stop; an overlay checkout shows
	// it too rather than the source worktree. nil: none.
	Snapshot *Snapshot
	// Closure is the base's closure the fixture's baseline shared: the
	// checkout's store is copied from it where the copy allows
	// (fixture.CopyInput.Closure); nil: it walks the history itself.
	Closure *fixture.SharedClosure
}

// Snapshot is a snapshot's tree, as the caller opened and checked it.
type Snapshot struct {
	Tree    string                     // the directory holding exactly the base's tree
	Listing *ctoharness.PackedManifest // its lstat listing, checked against its record (read in order when adopted)
	Index   *fixture.TreeIndex         // its tree's index (fixture.CopyInput.TreeIndex); nil: the trees are read
	// Checkout are the conversions it was written with.
	Checkout fixture.CheckoutInputs
}

// Result is the checkout that was made.
type Result struct {
	Dir, Commit, Tree string
}

// Make builds the checkout. Every failure is CHECKOUT_FAILED, and a
// checkout that does not give the result tree is CHECKOUT_UNFAITHFUL.
func Make(ctx context.Context, in Input) (Result, error) {
	return Begin(ctx, in).Finish(ctx, in)
}

// Baseline is the first half of a checkout: the source's baseline copied
// into the checkout directory. The source is out of Case's reach, so the
// copy can run while Case works and cost the run little but the change.
type Baseline struct {
	done    chan struct{}
	stop    context.CancelFunc
	res     fixture.CopyResult
	err     error
	mounted *overlay.Mount // the overlay checkout to unmount, if one was made
}

// Begin starts copying the baseline (in's SourceRoot, Dest, BaselineTime,
// Tracer and Progress) in the background.
func Begin(ctx context.Context, in Input) *Baseline {
	ctx, stop := context.WithCancel(ctx)
	b := &Baseline{done: make(chan struct{}), stop: stop}
	go func() {
		defer close(b.done)
		b.res, b.mounted, b.err = copyBaseline(ctx, in)
	}()
	return b
}

// Wait returns once the baseline copy has ended, whatever its outcome; a
// run calls it before its evidence is closed.
func (b *Baseline) Wait() {
	<-b.done
	b.stop()
}

// Stop abandons the copy (no verification will need it), waits for it and
// unmounts an overlay checkout; a run calls it once nothing more runs in
// the checkout.
func (b *Baseline) Stop() error {
	b.stop()
	b.Wait()
	return b.mounted.Unmount()
}

// Overlaid reports whether the checkout is an overlay of the source rather
// than a copy (valid once Finish or Wait returned).
func (b *Baseline) Overlaid() bool { return b.mounted != nil }

func copyBaseline(ctx context.Context, in Input) (fixture.CopyResult, *overlay.Mount, error) {
	in.Tracer.Trace(ctoharness.TraceMkdir, filepath.Dir(in.Dest))
	if err := os.MkdirAll(filepath.Dir(in.Dest), 0o755); err != nil {
		return fixture.CopyResult{}, nil, failed(err, "create the directory of the verification checkout %s", in.Dest)
	}
	if in.Overlay && (in.Base == "" || in.Snapshot != nil) {
		cp, mounted, err := overlayBaseline(ctx, in)
		if !errors.Is(err, overlay.ErrUnavailable) {
			return cp, mounted, err
		}
	}
	cp, err := fixture.Copy(ctx, fixture.CopyInput{SourceRoot: in.SourceRoot, SourceGitDir: in.SourceGitDir, Dest: in.Dest, When: in.BaselineTime, Tracer: in.Tracer, Progress: in.Progress, Getenv: in.Getenv, History: in.History, Base: in.Base, Closure: in.Closure})
	if err != nil {
		return cp, nil, failed(err, "copy the baseline into the verification checkout %s", in.Dest)
	}
	return cp, nil, nil
}

// Finish completes the checkout begun by b: in's Store, Baseline, Result
// and ResultTime say what to write on top of the copied baseline.
func (b *Baseline) Finish(ctx context.Context, in Input) (Result, error) {
	out := Result{Dir: in.Dest}
	b.Wait()
	if b.err != nil {
		return out, b.err
	}
	cp := b.res
	r, done, err := store.Open(in.Store, "")
	if err != nil {
		return out, failed(err, "open the store %s", in.Store)
	}
	defer done()
	base, err := r.CommitObject(plumbing.NewHash(in.Baseline))
	if err != nil {
		return out, failed(err, "read the baseline %s from the store", in.Baseline)
	}
	res, err := r.CommitObject(plumbing.NewHash(in.Result))
	if err != nil {
		return out, failed(err, "read the result %s from the store", in.Result)
	}
	if cp.BaselineTree != base.TreeHash.String() {
		return out, ctoharness.Block(ctoharness.BlockCheckoutUnfaithful, ctoharness.StepVerify, nil,
			"the source's tree is now %s, the run's baseline was %s: the source changed during the run", cp.BaselineTree, base.TreeHash)
	}
	if res.Hash != base.Hash {
		in.Tracer.Trace(ctoharness.TraceWrite, in.Dest)
		if err := apply(ctx, in.Dest, r.Storer, base, res, cp.Checkout, filepath.Join(in.Store, "lfs", "objects")); err != nil {
			return out, err
		}
	}
	ci := fixture.CollectInput{Root: in.Dest, Store: filepath.Join(in.Dest, ".git"), Baseline: cp.BaselineCommit,
		When: in.ResultTime, Tracer: in.Tracer, Allowed: func(string) (bool, string) { return true, "" }, Checkout: cp.Checkout}
	if b.mounted != nil {
		// An overlay checkout is collected as an overlay fixture is: from
		// what its layer holds (the change just written, the untracked
		// paths hidden), not by a walk of every file of the tree.
		ci.Upper, ci.UserXattr = b.mounted.Upper(), b.mounted.UserXattr()
	}
	got, err := fixture.Collect(ctx, ci)
	if err != nil {
		return out, failed(err, "commit the verification checkout %s", in.Dest)
	}
	out.Commit, out.Tree = got.ResultCommit, got.ResultTree
	if got.ResultTree != res.TreeHash.String() {
		return out, ctoharness.Block(ctoharness.BlockCheckoutUnfaithful, ctoharness.StepVerify, nil,
			"the verification checkout %s gives tree %s, the result is %s", in.Dest, got.ResultTree, res.TreeHash)
	}
	return out, nil
}

func failed(err error, format string, args ...any) error {
	var be *ctoharness.BlockerError
	if errors.As(err, &be) && be.Blocker.Code == ctoharness.BlockCopyUnfaithful {
		return ctoharness.Block(ctoharness.BlockCheckoutUnfaithful, ctoharness.StepVerify, err, format, args...)
	}
	return ctoharness.Block(ctoharness.BlockCheckoutFailed, ctoharness.StepVerify, err, format, args...)
}

// apply writes the change base -> res into dir: removals first, then every
// added or modified leaf from the store's blobs. A blob is read by the hash
// its change names: a look-up by path would decode every tree on the path
// again for each file, quadratic in a directory of many changed files.
func apply(ctx context.Context, dir string, objects storer.EncodedObjectStorer, base, res *object.Commit, settings gitstatus.CheckoutSettings, lfsObjects string) error {
	from, err := base.Tree()
	if err != nil {
		return failed(err, "read the baseline tree")
	}
	to, err := res.Tree()
	if err != nil {
		return failed(err, "read the result tree")
	}
	changes, err := object.DiffTreeWithOptions(ctx, from, to, &object.DiffTreeOptions{})
	if err != nil {
		return failed(err, "diff the baseline and the result")
	}
	// A submodule's new commit is written as the changes to its files,
	// since the checkout holds a submodule's files, not its repository.
	if changes, err = fixture.ExpandSubmodules(objects, changes); err != nil {
		return failed(err, "diff the submodules of the baseline and the result")
	}
	conv, err := resultConversions(to, changes, settings)
	if err != nil {
		return err
	}
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return failed(err, "open the checkout %s", dir)
	}
	defer unix.Close(root)
	for _, ch := range changes {
		if ch.From.Name != "" {
			if err := remove(root, ch.From.Name); err != nil {
				return failed(err, "remove %s from the checkout", ch.From.Name)
			}
		}
	}
	for _, ch := range changes {
		if err := ctx.Err(); err != nil {
			return failed(err, "checkout interrupted")
		}
		if ch.To.Name == "" {
			continue
		}
		e := ch.To.TreeEntry
		blob, err := object.GetBlob(objects, e.Hash)
		if err != nil {
			return failed(err, "read %s from the store", ch.To.Name)
		}
		if err := write(root, ch.To.Name, e.Mode, blob, conv, lfsObjects); err != nil {
			return failed(err, "write %s into the checkout", ch.To.Name)
		}
	}
	return nil
}

// parent opens the directory holding rel below root, creating missing
// directories, never through a symlink: the result tree is Case's, and a
// link it committed must not lead a write out of the checkout.
func parent(root int, rel string, create bool) (int, string, error) {
	parts := strings.Split(rel, "/")
	fd, err := unix.Dup(root)
	if err != nil {
		return -1, "", err
	}
	for _, p := range parts[:len(parts)-1] {
		if create {
			if err := unix.Mkdirat(fd, p, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, "", err
			}
		}
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
		next, err := unix.Openat2(fd, p, &how)
		unix.Close(fd)
		if err != nil {
			return -1, "", fmt.Errorf("%s: %w", p, err)
		}
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

// remove deletes rel (a file or link; a directory with what it holds).
func remove(root int, rel string) error {
	dir, name, err := parent(root, rel, false)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil // already gone with its directory
	}
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return removeAt(dir, name)
}

func removeAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return err
	}
	sub, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(sub), name)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return err
	}
	for _, n := range names {
		if err := removeAt(sub, n); err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// write creates rel with the blob's content, converted as git's checkout
// converts it (eol, ident), and the entry's mode.
func write(root int, rel string, mode filemode.FileMode, blob *object.Blob, conv *gitstatus.Conversions, lfsObjects string) error {
	dir, name, err := parent(root, rel, true)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := removeAt(dir, name); err != nil { // a directory the result replaces with a file
		return err
	}
	rd, err := blob.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	if mode == filemode.Symlink {
		target, err := io.ReadAll(io.LimitReader(rd, 4096))
		if err != nil {
			return err
		}
		return unix.Symlinkat(string(target), dir, name)
	}
	perm := uint32(0o644)
	if mode == filemode.Executable {
		perm = 0o755
	}
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	if cv, ok := convFor(conv, rel); ok {
		data, err := io.ReadAll(rd)
		if err != nil {
			f.Close()
			return err
		}
		if cv.LFS {
			if data, err = smudge(data, lfsObjects); err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		if _, err := f.Write(cv.ToWorktree(data, blob.Hash)); err != nil {
			f.Close()
			return err
		}
	} else if _, err := io.Copy(f, rd); err != nil {
		f.Close()
		return err
	}
	if err := unix.Fchmod(fd, perm); err != nil { // the umask must not decide the exec bit
		f.Close()
		return err
	}
	return f.Close()
}

// Dirs are the verification's own directories inside a run's workspace:
// the checkout it runs in and its scratch (HOME, TMPDIR, caches), both
// apart from Case's fixture and scratch.
func Dirs(workspace string) (dir, scratch string) {
	v := filepath.Join(workspace, "verify")
	return filepath.Join(v, "checkout"), filepath.Join(v, "scratch")
}

// resultConversions are the checkout conversions of the changed paths:
// the result's .gitattributes files in their directories and above (the
// only ones that apply to them) and the source's settings. nil converts
// nothing.
func resultConversions(tree *object.Tree, changes object.Changes, s gitstatus.CheckoutSettings) (*gitstatus.Conversions, error) {
	dirs := map[string]bool{}
	for _, ch := range changes {
		for p := ch.To.Name; p != ""; {
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				p = ""
			} else {
				p = p[:i]
			}
			if dirs[p] {
				break
			}
			dirs[p] = true
		}
	}
	attrs := map[string][]byte{}
	for d := range dirs {
		name, dir := ".gitattributes", ""
		if d != "" {
			name, dir = d+"/.gitattributes", d+"/"
		}
		f, err := tree.File(name)
		if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
			continue
		}
		if err != nil {
			return nil, failed(err, "read %s of the result", name)
		}
		if f.Mode == filemode.Symlink {
			continue // git does not follow a symlinked .gitattributes in the tree
		}
		if f.Size > 1<<20 {
			return nil, failed(nil, "%s of the result is %d bytes, over the 1 MiB the harness reads of an attributes file", name, f.Size)
		}
		data, err := f.Contents()
		if err != nil {
			return nil, failed(err, "read %s of the result", name)
		}
		attrs[dir] = []byte(data)
	}
	if len(attrs) == 0 && len(s.Global) == 0 && (s.AutoCRLF == "" || strings.EqualFold(s.AutoCRLF, "false")) {
		return nil, nil
	}
	return gitstatus.NewConversions(attrs, nil, s), nil
}

// convFor is the conversion of rel, if there is one.
func convFor(conv *gitstatus.Conversions, rel string) (gitstatus.Conversion, bool) {
	if conv == nil {
		return gitstatus.Conversion{}, false
	}
	cv := conv.For(rel)
	return cv, !cv.None()
}

// smudge is git-lfs's smudge of a changed file: a pointer becomes the
// content the collect kept in the store (checked against the oid); other
// content, or a pointer whose content is not there, is written as it is.
func smudge(data []byte, lfsObjects string) ([]byte, error) {
	oid, size, ok := gitstatus.ParseLFSPointer(data)
	if !ok {
		return data, nil
	}
	content, err := os.ReadFile(filepath.Join(lfsObjects, oid[0:2], oid[2:4], oid))
	if errors.Is(err, fs.ErrNotExist) {
		return data, nil
	}
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(content); hex.EncodeToString(sum[:]) != oid || int64(len(content)) != size {
		return nil, fmt.Errorf("the store's LFS object %s does not match its pointer", oid)
	}
	return content, nil
}
