// Package store is the harness's own record of a run: a bare git repository
// beside the evidence (runs/<id>/store) that holds the baseline and result
// commits and every object they need. It is made from the fixture before
// Case starts and is never inside Case's view or the verification's, so
// nothing Case does to the fixture's .git (config, attributes, refs, replace
// refs, hooks, objects, a FIFO for HEAD) can change what the harness
// records, re-derives or verifies.
//
// The store does not copy the base's history: it shares it, read-only,
// from a closure directory beside the runs (ClosuresDir, see
// fixture.ShareClosure), named in objects/info/alternates, so a run's
// directory holds what the run made (the baseline and result commits, the
// objects the collect wrote) and not the source's pack.
//
// Its index is the harness's stat cache of the fixture worktree: written by
// the copy, it lets collection skip files whose stat data (ctime included,
// which Case cannot set) is unchanged, without ever reading the fixture's own
// index.
package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	cp "github.com/otiai10/copy"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/packread"
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

// ClosuresDir is the directory of a runs directory that holds the shared,
// read-only closures the stores of its runs point at
// (RUNS_DIR/closures/<digest>/objects).
const ClosuresDir = "closures"

// alternatesFile is where git (and Open) find the store's closure.
const alternatesFile = "objects/info/alternates"

// Create makes the store at dir from a fixture repository the harness has
// just made (gitDir is its .git, before Case ever ran), pointing its
// branch at baseline. closure is the shared, read-only objects directory
// holding the base's history (fixture.ShareClosure) or "" to copy the
// fixture's objects instead. With a closure, the store holds only the
// baseline commit of its own (the one object of the fixture's store
// outside the closure) and names the closure by a path relative to its
// objects directory, so the runs directory can move as a whole. Files are
// copied, never hardlinked (the fixture's files are Case's to write), and
// only directories and regular files are.
func Create(ctx context.Context, gitDir, dir, baseline, closure string, tr ctoharness.Tracer) error {
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
	var err error
	if closure == "" {
		err = copyObjects(gitDir, dir, tr)
	} else {
		err = linkClosure(gitDir, dir, baseline, closure, tr)
	}
	if err != nil {
		return fail(err, "fill the harness store %s from the fixture %s", dir, gitDir)
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

// copyObjects copies the fixture's whole object store into the store's.
func copyObjects(gitDir, dir string, tr ctoharness.Tracer) error {
	from, to := filepath.Join(gitDir, "objects"), filepath.Join(dir, "objects")
	tr.Trace(ctoharness.TraceWalk, from)
	tr.Trace(ctoharness.TraceWrite, to)
	err := cp.Copy(from, to, cp.Options{
		OnSymlink: func(string) cp.SymlinkAction { return cp.Skip },
		Skip: func(fi os.FileInfo, _, _ string) (bool, error) {
			return !(fi.IsDir() || fi.Mode().IsRegular()), nil
		},
		PermissionControl: cp.PerservePermission,
	})
	if err != nil {
		return fmt.Errorf("copy the fixture's objects %s to the store %s: %w", from, to, err)
	}
	return nil
}

// linkClosure copies the fixture's loose baseline commit into the store
// and names closure in the store's alternates.
func linkClosure(gitDir, dir, baseline, closure string, tr ctoharness.Tracer) error {
	if len(baseline) != 40 || !plumbing.IsHash(baseline) {
		return fmt.Errorf("baseline %q is not a full commit hash", baseline)
	}
	objects := filepath.Join(dir, "objects")
	rel, err := filepath.Rel(objects, closure)
	if err != nil || !filepath.IsAbs(closure) {
		return fmt.Errorf("the closure %s is not an absolute path beside the store: %v", closure, err)
	}
	loose := filepath.Join(baseline[:2], baseline[2:])
	from, to := filepath.Join(gitDir, "objects", loose), filepath.Join(objects, loose)
	if fi, err := os.Lstat(from); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("the fixture's baseline commit is not the loose object %s: %v", from, err)
	}
	tr.Trace(ctoharness.TraceWrite, to)
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if err := cp.Copy(from, to); err != nil {
		return fmt.Errorf("copy the baseline commit %s: %w", from, err)
	}
	alt := filepath.Join(dir, filepath.FromSlash(alternatesFile))
	tr.Trace(ctoharness.TraceWrite, alt)
	if err := os.MkdirAll(filepath.Dir(alt), 0o755); err != nil {
		return err
	}
	return os.WriteFile(alt, []byte(filepath.ToSlash(rel)+"\n"), 0o644)
}

// ErrBadClosure marks a store whose alternates is not one closure
// directory of the harness's.
var ErrBadClosure = errors.New("the store's alternates is not a harness closure")

// Closure is the shared objects directory the store gitDir names in its
// alternates (absolute), or "" when it holds all its objects itself. A
// store names at most one, which is a real directory and borrows from
// nothing itself; anything else is ErrBadClosure.
func Closure(gitDir string) (string, error) {
	if _, err := os.Lstat(filepath.Join(gitDir, "objects", "info", "http-alternates")); err == nil {
		return "", fmt.Errorf("%w: %s has http-alternates", ErrBadClosure, gitDir)
	}
	data, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(alternatesFile)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		return "", fmt.Errorf("%w: %s names %d object directories, not one", ErrBadClosure, gitDir, len(lines))
	}
	p := filepath.FromSlash(lines[0])
	if !filepath.IsAbs(p) {
		p = filepath.Join(gitDir, "objects", p)
	}
	if filepath.Base(p) != "objects" {
		return "", fmt.Errorf("%w: %s is not an objects directory", ErrBadClosure, p)
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is not a directory (%v); was the runs directory's %s removed or the run directory moved alone?", ErrBadClosure, p, err, ClosuresDir)
	}
	if _, err := os.Lstat(filepath.Join(p, "info", "alternates")); err == nil {
		return "", fmt.Errorf("%w: %s borrows objects itself", ErrBadClosure, p)
	}
	return p, nil
}

// Open opens the harness's store gitDir, with worktree as its worktree (""
// for none), reading the objects of its closure (Closure) beside its own.
// Only a store is opened this way: a repository Case could write is opened
// with OpenPlain, which never follows an alternates file.
func Open(gitDir, worktree string) (*git.Repository, func(), error) {
	closure, err := Closure(gitDir)
	if err != nil {
		return nil, nil, fmt.Errorf("open repository %s: %w", gitDir, err)
	}
	// The store is the harness's own: its objects are read in place
	// (package packread), the closure's first, which holds nearly all.
	dirs := []string{filepath.Join(gitDir, "objects")}
	if closure != "" {
		dirs = []string{closure, dirs[0]}
	}
	objs, err := packread.Open(dirs...)
	if err != nil {
		return nil, nil, fmt.Errorf("open repository %s: %w", gitDir, err)
	}
	return open(gitDir, worktree, &packread.Storer{Storage: fsStorage(gitDir, cache.NewObjectLRU(objectCache)), Objects: objs})
}

// OpenPlain opens the repository whose git directory is gitDir, with
// worktree as its worktree ("" for none), reading its own objects only.
// The worktree filesystem is go-billy's bound OS filesystem because
// go-git's default chroot filesystem rewrites absolute symlink targets
// relative to the worktree. Pack files stay open between object reads; the
// returned func closes them.
func OpenPlain(gitDir, worktree string) (*git.Repository, func(), error) {
	return open(gitDir, worktree, fsStorage(gitDir, cache.NewObjectLRU(objectCache)))
}

// OpenInPlace is OpenPlain (the repository's own objects, no alternates
// followed) reading them where they lie (package packread: every object
// hashed against its id) rather than decoding each pack's index: for a
// repository only the harness writes while it is open, such as a fixture
// before Case runs.
func OpenInPlace(gitDir, worktree string) (*git.Repository, func(), error) {
	objs, err := packread.Open(filepath.Join(gitDir, "objects"))
	if err != nil {
		return nil, nil, fmt.Errorf("open repository %s: %w", gitDir, err)
	}
	return open(gitDir, worktree, &packread.Storer{Storage: fsStorage(gitDir, cache.NewObjectLRU(objectCache)), Objects: objs})
}

func fsStorage(gitDir string, objects cache.Object) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(osfs.New(gitDir), objects, filesystem.Options{KeepDescriptors: true, LargeObjectThreshold: largeObject})
}

// closingStorer is a go-git storage whose pack files Close releases.
type closingStorer interface {
	storage.Storer
	Close() error
}

func open(gitDir, worktree string, st closingStorer) (*git.Repository, func(), error) {
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
