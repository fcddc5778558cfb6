package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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
// The status has go-git's Worktree.Status semantics; package gitstatus
// computes it from the manifest without a second walk. The trace gets one
// git_read entry for repo.GitDir and one walk entry for repo.Root rather
// than one per file. Prove never writes: it only opens, reads and lstats, and uses
// go-git for Open, Reference, Head, References, object reads and (as a
// fallback) Status.
func Prove(ctx context.Context, repo Repo, opts ProofOptions, tr ctoharness.Tracer) (ctoharness.SourceProof, error) {
	step := opts.step()
	if tr == nil {
		tr = ctoharness.NopTracer{}
	}
	if opts.Kind != KindBefore && opts.Kind != KindAfter {
		return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockInternal, step, nil,
			"source proof kind %q is neither %q nor %q; this is a harness bug", opts.Kind, KindBefore, KindAfter)
	}
	if !filepath.IsAbs(repo.Root) || repo.GitDir != repo.Root+"/.git" {
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

	// HEAD, refs, the index and the HEAD-vs-index diff are read alongside
	// the manifest walk; the worktree half of the status then reuses the
	// walk's lstat data instead of walking again.
	var gs gitState
	var gerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		gs, gerr = readGit(repo)
	}()
	entries, werr := walkManifest(ctx, repo.Root, opts.Deep)
	<-done

	if gerr != nil {
		if errors.Is(gerr, errUnborn) {
			return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockSourceUnreadable, step, gerr,
				"source %s has no commits; commit something first", repo.Root)
		}
		return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockSourceUnreadable, step, gerr,
			"cannot read git state of source %s; check that git can read it (git -C %s log -1)", repo.Root, repo.Root)
	}
	if werr != nil {
		if ctx.Err() != nil {
			return ctoharness.SourceProof{}, fmt.Errorf("prove source %s: %w", repo.Root, werr)
		}
		return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockSourceUnreadable, step, werr,
			"cannot walk source %s for the manifest; check permissions, and that nothing is changing it", repo.Root)
	}

	status, route, err := proofStatus(repo.Root, gs, entries)
	if err != nil {
		return ctoharness.SourceProof{}, ctoharness.Block(ctoharness.BlockSourceUnreadable, step, err,
			"cannot compute the status of source %s; check that every file in it is readable", repo.Root)
	}

	return ctoharness.SourceProof{
		SchemaVersion:  ctoharness.SchemaVersion,
		RunID:          opts.RunID,
		Kind:           opts.Kind,
		Root:           repo.Root,
		TakenAt:        opts.Now.UTC(),
		Head:           gs.head,
		RefsDigest:     gs.refsDigest,
		RefCount:       gs.refCount,
		StatusClean:    len(status) == 0,
		Status:         status,
		StatusRoute:    route,
		Deep:           opts.Deep,
		ManifestDigest: ManifestDigest(entries),
		Manifest:       entries,
	}, nil
}

// errUnborn means HEAD names a branch that has no commit yet.
var errUnborn = errors.New("HEAD has no commit")

// gitState is what Prove learns from go-git and the index before the
// manifest walk finishes.
type gitState struct {
	repo       *git.Repository
	head       ctoharness.HeadState
	refsDigest string
	refCount   int
	// idx and staging feed the fast status; when fallback is set the fast
	// status cannot model this repository and go-git's Status is used.
	idx      *gitstatus.Index
	staging  gitstatus.Staged
	fallback error
}

// readGit opens the repository exactly at root (no parent discovery) and
// reads HEAD, references, the index and how the index differs from HEAD.
// None of these calls write.
func readGit(repo Repo) (gitState, error) {
	var gs gitState
	r, err := git.PlainOpenWithOptions(repo.Root, &git.PlainOpenOptions{DetectDotGit: false})
	if err != nil {
		return gs, fmt.Errorf("open %s: %w", repo.Root, err)
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

	gs.refsDigest, gs.refCount, err = refsDigest(r)
	if err != nil {
		return gs, err
	}

	idx, err := gitstatus.ReadIndex(repo.GitDir)
	if errors.Is(err, gitstatus.ErrFallback) {
		gs.fallback = err
		return gs, nil
	}
	if err != nil {
		return gs, err
	}
	staging, err := gitstatus.DiffIndex(r, commit.TreeHash, idx)
	if err != nil {
		return gs, err
	}
	gs.idx, gs.staging = idx, staging
	return gs, nil
}

// proofStatus is the worktree status for the proof: the fast status when
// it models the repository, go-git's Status otherwise.
func proofStatus(root string, gs gitState, manifest []ctoharness.ManifestEntry) ([]ctoharness.StatusEntry, ctoharness.StatusRoute, error) {
	if gs.fallback == nil {
		st, err := gitstatus.Status(root, gs.idx, gs.staging, manifest)
		if !errors.Is(err, gitstatus.ErrFallback) {
			return st, RouteFast, err
		}
	}
	st, err := gitstatus.GoGitStatus(gs.repo)
	return st, "go-git", err
}

// RouteFast is the route the proof's status must come from.
const RouteFast = ctoharness.StatusRouteFast

// statusResult is a status and the route that computed it.
type statusResult struct {
	Entries []ctoharness.StatusEntry
	Route   ctoharness.StatusRoute
}

// routeStatus computes the status exactly as Prove does; with ignored it
// also lists ignored paths (code "!"), which a proof leaves out.
func routeStatus(ctx context.Context, repo Repo, getenv func(string) string, ignored bool) (statusResult, error) {
	var gs gitState
	var gerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		gs, gerr = readGit(repo)
	}()
	entries, werr := walkManifest(ctx, repo.Root, false)
	<-done
	if gerr != nil {
		return statusResult{}, gerr
	}
	if werr != nil {
		return statusResult{}, werr
	}
	st, route, err := proofStatus(repo.Root, gs, entries)
	return statusResult{Entries: st, Route: route}, err
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
