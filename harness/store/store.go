// Package store is the harness's own record of a run: a bare git repository
// beside the evidence (runs/<id>/store) that holds the baseline and result
// commits and every object they need. It is made from the fixture before
// Case starts and is never inside Case's view or the verification's, so
// nothing Case does to the fixture's .git (config, attributes, refs, replace
// refs, hooks, objects, a FIFO for HEAD) can change what the harness
// records, re-derives or verifies.
//
// Its index is the harness's stat cache of the fixture worktree: written by
// the copy, it lets collection skip files whose stat data (ctime included,
// which Case cannot set) is unchanged, without ever reading the fixture's own
// index.
package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
	cp "github.com/otiai10/copy"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Branch is the store's branch: the baseline, then the result.
const Branch = plumbing.ReferenceName("refs/heads/main")

// IndexFile is the store's stat cache of the fixture worktree.
const IndexFile = "index"

// objectCache bounds the decoded objects go-git keeps; the run must stay
// within its memory budget (go-git's default is 96 MiB).
const objectCache = 16 * cache.MiByte

// largeObject is the size over which go-git streams an object from disk
// instead of reading it whole into memory (its default): a blob Case wrote
// may be any size.
const largeObject = 1 << 20

// Create makes the store at dir from a fixture repository the harness has
// just made (gitDir is its .git, before Case ever ran): its objects and
// index are copied (never hardlinked: the fixture's files are Case's to
// write), and the store's branch points at baseline. Only directories and
// regular files are copied.
func Create(ctx context.Context, gitDir, dir, baseline string, tr ctoharness.Tracer) error {
	fail := func(err error, format string, args ...any) error {
		return ctoharness.Block(ctoharness.BlockCopyFailed, ctoharness.StepBaseline, err, format, args...)
	}
	if err := ctx.Err(); err != nil {
		return fail(err, "store not made")
	}
	tr.Trace(ctoharness.TraceMkdir, dir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fail(err, "create the harness store %s (it must not exist yet)", dir)
	}
	if _, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{Bare: true, InitOptions: git.InitOptions{DefaultBranch: Branch}}); err != nil {
		return fail(err, "initialise the harness store %s", dir)
	}
	from, to := filepath.Join(gitDir, "objects"), filepath.Join(dir, "objects")
	tr.Trace(ctoharness.TraceWalk, from)
	tr.Trace(ctoharness.TraceWrite, to)
	if err := cp.Copy(from, to, cp.Options{
		OnSymlink: func(string) cp.SymlinkAction { return cp.Skip },
		Skip: func(fi os.FileInfo, _, _ string) (bool, error) {
			return !(fi.IsDir() || fi.Mode().IsRegular()), nil
		},
		PermissionControl: cp.PerservePermission,
	}); err != nil {
		return fail(err, "copy the fixture's objects %s to the store %s", from, to)
	}
	idx := filepath.Join(dir, IndexFile)
	tr.Trace(ctoharness.TraceWrite, idx)
	if err := cp.Copy(filepath.Join(gitDir, "index"), idx); err != nil {
		return fail(err, "copy the fixture's index to the store %s", idx)
	}
	r, done, err := Open(dir, "")
	if err != nil {
		return fail(err, "open the harness store %s", dir)
	}
	defer done()
	h := plumbing.NewHash(baseline)
	if _, err := r.CommitObject(h); err != nil {
		return fail(err, "the baseline commit %s is not in the store %s", baseline, dir)
	}
	if err := r.Storer.SetReference(plumbing.NewHashReference(Branch, h)); err != nil {
		return fail(err, "point the store's %s at the baseline %s", Branch, baseline)
	}
	return nil
}

// Open opens the repository whose git directory is gitDir, with worktree as
// its worktree ("" for none). The worktree filesystem is go-billy's bound OS
// filesystem because go-git's default chroot filesystem rewrites absolute
// symlink targets relative to the worktree. Pack files stay open between
// object reads; the returned func closes them.
func Open(gitDir, worktree string) (*git.Repository, func(), error) {
	st := filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRU(objectCache), filesystem.Options{KeepDescriptors: true, LargeObjectThreshold: largeObject})
	var r *git.Repository
	var err error
	if worktree == "" {
		r, err = git.Open(st, nil)
	} else {
		r, err = git.Open(st, osfs.New(worktree, osfs.WithBoundOS()))
	}
	if err != nil {
		_ = st.Close()
		return nil, nil, fmt.Errorf("open repository %s: %w", gitDir, err)
	}
	return r, func() { _ = st.Close() }, nil
}
