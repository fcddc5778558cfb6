package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

// Proof kinds.
const (
	KindBefore = "before"
	KindAfter  = "after"
)

// ProofOptions configures one source proof.
type ProofOptions struct {
	RunID string
	Kind  string // KindBefore or KindAfter
	// Deep also hashes the content of every regular file. Without it the
	// proof relies on ctime, which every write changes.
	Deep bool
	// Now is recorded as TakenAt (in UTC); the caller owns the clock.
	Now time.Time
	// Step is the pipeline step blockers are raised in. Empty means
	// ctoharness.StepSourceProof for KindBefore and
	// ctoharness.StepSourceAfter for KindAfter.
	Step ctoharness.Step
	// Getenv reads the environment git's own configuration lookup uses
	// (HOME, XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL, GIT_CONFIG_NOSYSTEM, ...);
	// nil means os.Getenv.
	Getenv func(string) string
}

func (o ProofOptions) step() ctoharness.Step {
	switch {
	case o.Step != "":
		return o.Step
	case o.Kind == KindAfter:
		return ctoharness.StepSourceAfter
	default:
		return ctoharness.StepSourceProof
	}
}

// Prove records the state of a classified source repository: HEAD, a digest
// of every reference, the worktree status (all through go-git, read-only)
// and a full lstat manifest of everything under repo.Root, .git and ignored
// files included. Two proofs taken before and after a run and compared with
// Compare show whether anything in the source changed.
//
// The status is git's (package gitstatus's status route, computed from
// the manifest without a second walk); repositories whose status git would
// compute by running something they configure, or whose format the route
// does not read, are refused with a specific blocker. The trace gets one
// git_read entry for repo.GitDir and one walk entry for repo.Root rather
// than one per file. Prove never writes: it only opens, reads and lstats,
// and uses go-git for Open, Reference, Head, References and object reads.
func Prove(ctx context.Context, repo Repo, opts ProofOptions, tr ctoharness.Tracer) (ctoharness.SourceProof, error) {
	step := opts.step()
	if tr == nil {
		tr = ctoharness.NopTracer{}
	}
	if opts.Kind != KindBefore && opts.Kind != KindAfter {
		return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockInternal, step, nil,
			"source proof kind %q is neither %q nor %q; this is a harness bug", opts.Kind, KindBefore, KindAfter)
	}
	if !filepath.IsAbs(repo.Root) || !filepath.IsAbs(repo.GitDir) || filepath.Clean(repo.GitDir) != repo.GitDir {
		return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockInternal, step, nil,
			"source proof got an unclassified repo (root %q, git dir %q); pass the Repo returned by Classify", repo.Root, repo.GitDir)
	}
	if err := ctx.Err(); err != nil {
		return ctoharness.SourceProof{}, fmt.Errorf("prove source %s: %w", repo.Root, err)
	}

	// Trace on this goroutine before starting work: a Tracer need not be
	// safe for concurrent use.
	tr.Trace(ctoharness.TraceGitRead, repo.GitDir)
	tr.Trace(ctoharness.TraceWalk, repo.Root)
	if repo.Separate() {
		tr.Trace(ctoharness.TraceWalk, repo.GitDir)
	}

	// HEAD, refs and the configuration are read alongside the manifest
	// walk; the status then reuses the walk's lstat data instead of
	// walking again.
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var gs gitState
	var gerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		gs, gerr = readGit(repo, getenv)
	}()
	entries, werr := walkSource(ctx, repo, opts.Deep)
	<-done

	if gs.cfg != nil {
		for _, f := range gs.cfg.Files {
			if f != repo.GitDir+"/config" && f != repo.GitDir+"/config.worktree" {
				tr.Trace(ctoharness.TraceRead, f)
			}
		}
	}
	if gerr != nil {
		return ctoharness.SourceProof{}, gitBlock(step, repo, gerr)
	}
	if werr != nil {
		if ctx.Err() != nil {
			return ctoharness.SourceProof{}, fmt.Errorf("prove source %s: %w", repo.Root, werr)
		}
		return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockSourceUnreadable, step, werr,
			"cannot walk source %s for the manifest; check permissions, and that nothing is changing it", repo.Root)
	}

	if err := hashObjectStoreFiles(repo, entries); err != nil {
		return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockSourceUnreadable, step, err,
			"cannot read the object store of source %s; check that nothing is changing it (git gc, git maintenance)", repo.Root)
	}
	status, err := proofStatus(repo, gs, entries, getenv, false, func(p string) { tr.Trace(ctoharness.TraceRead, p) })
	if err != nil {
		return ctoharness.SourceProof{}, statusBlock(step, repo, err)
	}

	return ctoharness.SourceProof{
		SchemaVersion:  ctoharness.SchemaVersion,
		RunID:          opts.RunID,
		Kind:           opts.Kind,
		Root:           repo.Root,
		GitDir:         separateDir(repo),
		TakenAt:        opts.Now.UTC(),
		Head:           gs.head,
		RefsDigest:     gs.refsDigest,
		RefCount:       gs.refCount,
		StatusClean:    len(status) == 0,
		Status:         status,
		StatusRoute:    RouteFast,
		Deep:           opts.Deep,
		ManifestDigest: ManifestDigest(entries),
		Manifest:       entries,
	}, nil
}

// walkSource is the manifest of the source: everything under the worktree
// and, for a separate git directory, everything under it, named as if it
// were the worktree's .git directory (its root is ".git/."; the gitfile
// itself stays ".git"). One manifest keeps Compare, the digest and the
// object-store checks the same for both layouts; the proof's git_dir says
// where the .git/ entries were read.
func walkSource(ctx context.Context, repo Repo, deep bool) ([]ctoharness.ManifestEntry, error) {
	entries, err := walkManifest(ctx, repo.Root, deep)
	if err != nil || !repo.Separate() {
		return entries, err
	}
	gd, err := walkManifest(ctx, repo.GitDir, deep)
	if err != nil {
		return nil, err
	}
	for i := range gd {
		gd[i].Path = ".git/" + gd[i].Path
	}
	entries = append(entries, gd...)
	slices.SortFunc(entries, func(a, b ctoharness.ManifestEntry) int { return strings.Compare(a.Path, b.Path) })
	return entries, nil
}

// separateDir is the proof's git_dir: the separate git directory, or "".
func separateDir(repo Repo) string {
	if repo.Separate() {
		return repo.GitDir
	}
	return ""
}

// gitBlock is the blocker for a failure to read the repository's git
// state: a specific refusal when the route refuses the repository.
func gitBlock(step ctoharness.Step, repo Repo, err error) error {
	var ue *gitstatus.UnsupportedError
	switch {
	case errors.As(err, &ue):
		return ctoharness.Block(ue.Code, step, err, "source %s: %s", repo.Root, ue.Reason)
	case errors.Is(err, errUnborn):
		return ctoharness.Block(ctoharness.BlockSourceUnreadable, step, err,
			"source %s has no commits; commit something first", repo.Root)
	}
	return ctoharness.Block(ctoharness.BlockSourceUnreadable, step, err,
		"cannot read git state of source %s; check that git can read it (git -C %s log -1)", repo.Root, repo.Root)
}

func statusBlock(step ctoharness.Step, repo Repo, err error) error {
	var ue *gitstatus.UnsupportedError
	if errors.As(err, &ue) {
		return ctoharness.Block(ue.Code, step, err, "source %s: %s", repo.Root, ue.Reason)
	}
	return ctoharness.Block(ctoharness.BlockSourceUnreadable, step, err,
		"cannot compute the status of source %s; check that every file in it is readable", repo.Root)
}

// errUnborn means HEAD names a branch that has no commit yet.
var errUnborn = errors.New("HEAD has no commit")

// gitState is what Prove learns from the git directory before the
// manifest walk finishes.
type gitState struct {
	repo       *git.Repository
	cfg        *gitstatus.Config
	head       ctoharness.HeadState
	tree       plumbing.Hash
	refsDigest string
	refCount   int
}

// readGit reads the configuration git would use (refusing what the status
// route refuses before anything else is opened), then opens the
// repository exactly at root (no parent discovery) and reads HEAD and the
// references. None of these calls write.
func readGit(repo Repo, getenv func(string) string) (gitState, error) {
	var gs gitState
	var err error
	if gs.cfg, err = gitstatus.LoadConfig(repo.GitDir, gitstatus.HeadBranch(repo.GitDir), getenv); err != nil {
		return gs, err
	}
	if err := gitstatus.CheckConfig(gs.cfg, repo.GitDir, repo.Root); err != nil {
		return gs, err
	}
	r, err := gitstatus.Open(repo.Root, repo.GitDir)
	if err != nil {
		return gs, err
	}
	gs.repo = r

	raw, err := r.Reference(plumbing.HEAD, false)
	if err != nil {
		return gs, fmt.Errorf("read HEAD: %w", err)
	}
	if raw.Type() == plumbing.SymbolicReference {
		gs.head.SymbolicRef = raw.Target().String()
	}
	head, err := r.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return gs, fmt.Errorf("HEAD points to %s: %w", raw.Target(), errUnborn)
	}
	if err != nil {
		return gs, fmt.Errorf("resolve HEAD: %w", err)
	}
	commit, err := r.CommitObject(head.Hash())
	if err != nil {
		return gs, fmt.Errorf("read HEAD commit %s: %w", head.Hash(), err)
	}
	gs.head.Commit = commit.Hash.String()
	gs.head.Tree = commit.TreeHash.String()
	gs.tree = commit.TreeHash

	gs.refsDigest, gs.refCount, err = refsDigest(r)
	return gs, err
}

// proofStatus is the worktree status for the proof, from the status route.
func proofStatus(repo Repo, gs gitState, manifest []ctoharness.ManifestEntry, getenv func(string) string, ignored bool, onRead func(string)) ([]ctoharness.StatusEntry, error) {
	return gitstatus.Compute(&gitstatus.Input{
		Root: repo.Root, GitDir: repo.GitDir, Manifest: manifest, Repo: gs.repo, HeadTree: gs.tree,
		Config: gs.cfg, Env: getenv, Ignored: ignored, OnRead: onRead,
	})
}

// RouteFast is the route the proof's status comes from.
const RouteFast = ctoharness.StatusRouteFast

// statusResult is a status and the route that computed it.
type statusResult struct {
	Entries []ctoharness.StatusEntry
	Route   ctoharness.StatusRoute
}

// routeStatus computes the status exactly as Prove does, refusals
// included; with ignored it also lists ignored paths (code "!"), which a
// proof leaves out.
func routeStatus(ctx context.Context, repo Repo, getenv func(string) string, ignored bool) (statusResult, error) {
	var gs gitState
	var gerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		gs, gerr = readGit(repo, getenv)
	}()
	entries, werr := walkSource(ctx, repo, false)
	<-done
	if gerr != nil {
		return statusResult{}, gitBlock(ctoharness.StepSourceProof, repo, gerr)
	}
	if werr != nil {
		return statusResult{}, werr
	}
	st, err := proofStatus(repo, gs, entries, getenv, ignored, nil)
	if err != nil {
		return statusResult{}, statusBlock(ctoharness.StepSourceProof, repo, err)
	}
	return statusResult{Entries: st, Route: RouteFast}, nil
}

// refsDigest hashes the sorted lines "name target\n" of every reference
// (HEAD, branches, tags, remotes; loose and packed), where target is the
// hash, or the target name for a symbolic reference.
func refsDigest(r *git.Repository) (string, int, error) {
	iter, err := r.References()
	if err != nil {
		return "", 0, fmt.Errorf("list references: %w", err)
	}
	var lines []string
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		target := ref.Hash().String()
		if ref.Type() == plumbing.SymbolicReference {
			target = ref.Target().String()
		}
		lines = append(lines, ref.Name().String()+" "+target+"\n")
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("list references: %w", err)
	}
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
	}
	return hex.EncodeToString(h.Sum(nil)), len(lines), nil
}

// DescribeStatus is a dirty source's status for a blocker's message: the
// first five entries with their codes, and how many more there are.
func DescribeStatus(st []ctoharness.StatusEntry) string {
	var parts []string
	for i, e := range st {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(st)-5))
			break
		}
		parts = append(parts, strings.TrimSpace(e.Staging+e.Worktree)+" "+e.Path)
	}
	return strings.Join(parts, ", ")
}
