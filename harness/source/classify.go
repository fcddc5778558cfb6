package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

// Policy says which local repositories may serve as a source. The harness
// only works from repositories the operator owns, and must never touch a
// Target Repository or an external root, not even to stat it.
type Policy struct {
	// Owned are absolute paths: a source is owned iff its realpath equals or
	// is under the realpath of one of these.
	Owned []string
	// TargetRoots are absolute paths of Target Repository roots. Nothing at
	// or under them is ever stat'ed, opened or read.
	TargetRoots []string
	// ExternalRoots are absolute paths of external developer repositories,
	// vendor trees or the Case source; they are fenced like TargetRoots.
	ExternalRoots []string
	// Now is the clock a gc.pid's age is judged by; nil is time.Now.
	Now func() time.Time
	// ConfigFile is the config file Owned comes from ("" when none is in
	// use): a refusal for ownership names it, so the fix can be made there.
	ConfigFile string
}

// Repo is a classified source repository: a non-bare, self-contained git
// worktree under an owned root.
type Repo struct {
	Given string // the path as given, made absolute (filepath.Abs, lexical)
	Root  string // realpath of the worktree root
	// GitDir is Root + "/.git", or the realpath of the git directory a
	// gitfile there names (git init or clone --separate-git-dir).
	GitDir string
}

// Separate reports whether the git directory lies outside the worktree,
// named by a gitfile at Root/.git.
func (r Repo) Separate() bool { return r.GitDir != r.Root+"/.git" }

// HostPath is where the manifest path rel of a proof of r is on the host:
// below the worktree, or below the separate git directory for .git/...
func (r Repo) HostPath(rel string) string {
	if rest, ok := strings.CutPrefix(rel, ".git/"); ok && r.Separate() {
		return r.GitDir + "/" + rest
	}
	return r.Root + "/" + rel
}

// Classify decides whether path may be used as the Source Repository and
// resolves it. It refuses with a *ctoharness.BlockerError (step classify)
// whose code names the reason. Every stat, readlink and read is reported to
// tr before it happens; paths at or under a target or external root are
// refused before they are touched, and that refusal takes precedence over
// every other check.
//
// Checks run in this order: remote or empty path; the fence, lexically on
// the given path; component-wise resolution (fence checked before every
// lstat); the given path itself (symlink, missing, not a directory); a
// source that contains a fenced root; ownership, before anything inside
// the repository is read; then the git layout (.git directory, bare,
// gitfile, commondir, alternates).
func Classify(ctx context.Context, path string, pol Policy, tr ctoharness.Tracer) (Repo, error) {
	if tr == nil {
		tr = ctoharness.NopTracer{}
	}
	if err := ctx.Err(); err != nil {
		return Repo{}, fmt.Errorf("classify source %q: %w", path, err)
	}
	if path == "" {
		return Repo{}, block(ctoharness.BlockSourceNotFound, nil,
			"no source path given; pass the local path of a git repository you own")
	}
	lex := newFence(pol)
	if isRemote(path) {
		if u, err := url.Parse(path); err == nil && u.Scheme == "file" && u.Path != "" {
			if r, ok := lex.check(filepath.Clean(u.Path)); ok {
				return Repo{}, fencedBlock(path, &fencedError{path: filepath.Clean(u.Path), root: r})
			}
		}
		return Repo{}, block(ctoharness.BlockSourceNotLocal, nil,
			"source %q is a URL or remote, not a local path; clone it under an owned root and pass the clone's path", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Repo{}, block(ctoharness.BlockSourceNotFound, err,
			"cannot make source %q absolute; pass an absolute path", path)
	}
	// Lexical check first: nothing has touched the filesystem yet.
	if r, ok := lex.check(abs); ok {
		return Repo{}, fencedBlock(abs, &fencedError{path: abs, root: r})
	}

	in := &inspector{tr: tr, fence: lex}
	in.fence = in.withAliases()

	root, err := resolveSource(in, abs)
	if err != nil {
		return Repo{}, err
	}
	repo := Repo{Given: abs, Root: root}

	// A source that contains a fenced root cannot be proven: the manifest
	// walk would read inside it.
	for _, r := range in.fence {
		if within(r.path, root) {
			return Repo{}, block(r.code, nil,
				"source %s contains %s %s; the harness walks the whole source and must never touch it — pass a repository that does not contain it",
				root, rootKind(r.code), r.given)
		}
	}
	if err := checkOwned(in, pol, abs, root); err != nil {
		return Repo{}, err
	}
	now := time.Now
	if pol.Now != nil {
		now = pol.Now
	}
	if repo.GitDir, err = checkLayout(in, root, now()); err != nil {
		return Repo{}, err
	}
	if err := checkAlternates(in, pol, repo.GitDir); err != nil {
		return Repo{}, err
	}
	return repo, nil
}

// checkAlternates accepts objects borrowed from another repository (git
// clone --shared or --reference) when each alternate object directory is
// an absolute path, outside every fenced root, under an owned root, and
// borrows nothing itself: the harness reads objects there (the copy takes
// them into the fixture's own store), so it must be allowed to.
func checkAlternates(in *inspector, pol Policy, gitDir string) error {
	p := gitDir + "/objects/info/alternates"
	data, err := in.readFile(p)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return classifyFSError(p, err)
	}
	alts, err := gitstatus.ParseAlternates(data)
	if err != nil {
		return block(ctoharness.BlockSourceAlternates, err,
			"%s: %v; make a standalone clone (git clone --no-shared) and pass it", p, err)
	}
	if present, err := exists(in, gitDir+"/objects/info/http-alternates"); err != nil {
		return err
	} else if present {
		return block(ctoharness.BlockSourceAlternates, nil,
			"%s/objects/info/http-alternates exists; make a standalone clone (git clone --no-shared) and pass it", gitDir)
	}
	for _, a := range alts {
		if r, fenced := in.fence.check(a); fenced {
			return fencedBlock(a, &fencedError{path: a, root: r})
		}
		real, err := in.resolve(a)
		if err != nil {
			return classifyFSError(a, err)
		}
		fi, err := in.lstat(real)
		if err != nil {
			return classifyFSError(a, err)
		}
		if !fi.IsDir() {
			return block(ctoharness.BlockSourceAlternates, nil,
				"alternate object directory %s (named in %s) is not a directory; make a standalone clone (git clone --no-shared) and pass it", a, p)
		}
		if err := checkOwned(in, pol, a, real); err != nil {
			return block(ctoharness.BlockSourceAlternates, nil,
				"alternate object directory %s (named in %s) is not under an owned root, and the harness reads objects only from what you own; %s, or make a standalone clone (git clone --no-shared)", a, p, ownHint(pol, lenderRepo(real)))
		}
		if present, err := exists(in, real+"/info/alternates"); err != nil {
			return err
		} else if present {
			return block(ctoharness.BlockSourceAlternates, nil,
				"alternate object directory %s borrows objects itself (%s/info/alternates); make a standalone clone (git clone --no-shared) and pass it", a, real)
		}
	}
	return nil
}

// resolveSource resolves abs to the physical worktree root, component by
// component with the fence checked before every lstat. A symlink given as
// the source (as git accepts one) is resolved the same way: everything
// after classification uses the real directory, so retargeting the link
// later changes nothing.
func resolveSource(in *inspector, abs string) (string, error) {
	cand := "/"
	if abs != "/" {
		parent, err := in.resolve(filepath.Dir(abs))
		if err != nil {
			return "", classifyFSError(abs, err)
		}
		cand = filepath.Join(parent, filepath.Base(abs))
	}
	fi, err := in.lstat(cand)
	if err != nil {
		return "", classifyFSError(abs, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// A link into a fenced root is reported as such: that refusal
		// outranks every other. Resolving stops at the fence.
		real, err := in.resolve(cand)
		if err != nil {
			return "", classifyFSError(abs, err)
		}
		if fi, err = in.lstat(real); err != nil {
			return "", classifyFSError(abs, err)
		}
		cand = real
	}
	switch {
	case !fi.IsDir():
		return "", block(ctoharness.BlockSourceNotGit, nil,
			"source %s is not a directory; pass the root directory of a git worktree", abs)
	case filepath.Base(cand) == ".git":
		return "", block(ctoharness.BlockSourceNotGit, nil,
			"source %s is a .git directory; pass the worktree root that contains it (%s)", abs, filepath.Dir(cand))
	}
	return cand, nil
}

// checkOwned refuses a source that is not at or under an owned root. Owned
// entries are resolved with the same fence, so an owned entry inside a
// target or external root is ignored rather than touched.
func checkOwned(in *inspector, pol Policy, abs, root string) error {
	if len(pol.Owned) == 0 {
		return block(ctoharness.BlockSourceNotOwned, nil,
			"source %s cannot be checked for ownership: no owned roots are configured; %s", abs, ownHint(pol, root))
	}
	for _, o := range pol.Owned {
		if o == "" {
			continue
		}
		oa, err := filepath.Abs(o)
		if err != nil {
			continue
		}
		if _, fenced := in.fence.check(oa); fenced {
			continue
		}
		real, err := in.resolve(oa)
		if err != nil {
			continue
		}
		if _, fenced := in.fence.check(real); fenced {
			continue
		}
		if within(root, real) {
			return nil
		}
	}
	return block(ctoharness.BlockSourceNotOwned, nil,
		"source %s (real path %s) is not under any owned root (%s); copy or clone it under an owned root, or %s",
		abs, root, strings.Join(pol.Owned, ", "), ownHint(pol, root))
}

// lenderRepo is the repository an alternate object directory belongs to:
// the worktree of a .git/objects, else the directory holding objects/.
func lenderRepo(objects string) string {
	d := filepath.Dir(objects)
	if filepath.Base(d) == ".git" {
		d = filepath.Dir(d)
	}
	return d
}

// ownHint says how to own dir: the key to change, in the config file in use
// (or one to write), with the line ready to paste.
func ownHint(pol Policy, dir string) string {
	owned := append(append([]string{}, pol.Owned...), dir)
	line, _ := json.Marshal(map[string][]string{"owned_sources": owned}) // strings always marshal
	if pol.ConfigFile == "" {
		return fmt.Sprintf("no config file is in use: write one holding %s and pass it with --config FILE (or set CTO_HARNESS_CONFIG)",
			strings.TrimSuffix(string(line), "}")+`, "target_repository_roots": []}`)
	}
	return fmt.Sprintf("add %s to \"owned_sources\" in the config %s, for example %s", dir, pol.ConfigFile,
		strings.TrimSuffix(strings.TrimPrefix(string(line), "{"), "}"))
}

// checkLayout refuses anything but a plain, self-contained worktree: the
// git directory must be root/.git, a real directory with its own objects,
// or a directory of its own that a gitfile there names. It returns the
// git directory's real path.
func checkLayout(in *inspector, root string, now time.Time) (string, error) {
	gitDir := root + "/.git"
	fi, err := in.lstat(gitDir)
	switch {
	case isNotExist(err):
		if looksBare(in, root) {
			return "", block(ctoharness.BlockSourceBare, nil,
				"source %s is a bare repository; the harness needs a worktree — clone it under an owned root and pass the clone", root)
		}
		return "", block(ctoharness.BlockSourceNotGit, nil,
			"source %s has no .git directory; pass the root of a git worktree (the directory that contains .git)", root)
	case err != nil:
		return "", classifyFSError(gitDir, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", block(ctoharness.BlockSourceSymlink, nil,
			"%s is a symlink, so the git directory lives elsewhere; pass a repository whose .git is a real directory", gitDir)
	case fi.Mode().IsRegular():
		if gitDir, err = separateGitDir(in, root); err != nil {
			return "", err
		}
	case !fi.IsDir():
		return "", block(ctoharness.BlockSourceNotGit, nil,
			"%s is neither a directory nor a gitfile; pass the root of a git worktree", gitDir)
	}
	if _, err := in.lstat(gitDir + "/HEAD"); err != nil {
		if isNotExist(err) {
			return "", block(ctoharness.BlockSourceNotGit, nil,
				"%s has no HEAD, so it is not a git directory; pass the root of a git worktree", gitDir)
		}
		return "", classifyFSError(gitDir+"/HEAD", err)
	}
	cfg, err := in.readFile(gitDir + "/config")
	if err != nil && !isNotExist(err) {
		return "", classifyFSError(gitDir+"/config", err)
	}
	if coreBare(cfg) {
		return "", block(ctoharness.BlockSourceBare, nil,
			"%s/config sets core.bare = true, so git treats %s as a bare repository; use a clone with a worktree", gitDir, root)
	}
	if present, err := exists(in, gitDir+"/commondir"); err != nil {
		return "", err
	} else if present {
		return "", block(ctoharness.BlockSourceLinkedWorktree, nil,
			"%s/commondir exists, so this git directory shares its objects and refs with another repository; pass the main worktree or a standalone clone", gitDir)
	}
	return gitDir, checkBusy(in, gitDir, now)
}

// separateGitDir resolves the gitfile root/.git to the git directory it
// names, kept outside the worktree by git init or clone --separate-git-dir,
// which git reads like an embedded one. The proofs cover it as the
// source's .git (Repo.HostPath) and the sandbox hides it like the source.
// A linked worktree's, a submodule's or another worktree's embedded .git
// is shared with another checkout and refused; so is a git directory inside the
// worktree or holding it, which the worktree's walk and the git
// directory's would both cover. The fence is checked on the way, so a
// gitfile naming a Target or external root is refused untouched.
func separateGitDir(in *inspector, root string) (string, error) {
	gitfile := root + "/.git"
	data, err := in.readFile(gitfile)
	if err != nil {
		return "", classifyFSError(gitfile, err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	target, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "gitdir: ")
	if !ok || target == "" {
		return "", block(ctoharness.BlockSourceNotGit, nil,
			"%s is a file that does not name a git directory (no \"gitdir: \" line); pass the root of a git worktree", gitfile)
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(root, target)
	}
	target = filepath.Clean(target)
	if strings.Contains(target+"/", "/worktrees/") || strings.Contains(target+"/", "/modules/") || filepath.Base(target) == ".git" {
		return "", block(ctoharness.BlockSourceLinkedWorktree, nil,
			"%s is a gitfile naming %s, the git directory of a linked worktree, a submodule or another worktree, so the repository is shared; pass the main worktree or a standalone clone", gitfile, target)
	}
	if r, fenced := in.fence.check(target); fenced {
		return "", fencedBlock(target, &fencedError{path: target, root: r})
	}
	real, err := in.resolve(target)
	if err != nil {
		return "", classifyFSError(target, err)
	}
	fi, err := in.lstat(real)
	if err != nil {
		return "", classifyFSError(target, err)
	}
	switch {
	case !fi.IsDir():
		return "", block(ctoharness.BlockSourceNotGit, nil,
			"%s names %s, which is not a directory; pass the root of a git worktree", gitfile, target)
	case within(real, root) || within(root, real):
		return "", block(ctoharness.BlockSourceNotGit, nil,
			"%s names %s, a git directory inside the worktree or holding it; keep the git directory at .git (rm %s && mv %s %s) or outside the worktree", gitfile, real, gitfile, real, gitfile)
	}
	// The proofs walk the whole git directory, so it must not hold a
	// fenced root either.
	for _, r := range in.fence {
		if within(r.path, real) {
			return "", block(r.code, nil,
				"the git directory %s of source %s contains %s %s; the harness walks it and must never touch that — pass a repository whose git directory does not contain it",
				real, root, rootKind(r.code), r.given)
		}
	}
	return real, nil
}

// looksBare reports whether dir has the layout of a bare repository.
func looksBare(in *inspector, dir string) bool {
	head, err := in.lstat(dir + "/HEAD")
	if err != nil || !head.Mode().IsRegular() {
		return false
	}
	for _, sub := range []string{"objects", "refs"} {
		fi, err := in.lstat(dir + "/" + sub)
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

func exists(in *inspector, p string) (bool, error) {
	_, err := in.lstat(p)
	switch {
	case err == nil:
		return true, nil
	case isNotExist(err):
		return false, nil
	default:
		return false, classifyFSError(p, err)
	}
}

// coreBare parses just enough of a git config file to find core.bare: the
// [core] section (section names are case-insensitive, subsections are not
// core), key "bare" (case-insensitive), and git's boolean spellings. A key
// without "=" means true, as in git.
func coreBare(cfg []byte) bool {
	inCore := false
	bare := false
	for _, raw := range bytes.Split(cfg, []byte("\n")) {
		line := strings.TrimSpace(string(raw))
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				inCore = false
				continue
			}
			inCore = strings.EqualFold(strings.TrimSpace(line[1:end]), "core")
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		if !inCore {
			continue
		}
		key, val, hasVal := strings.Cut(line, "=")
		if !strings.EqualFold(strings.TrimSpace(key), "bare") {
			continue
		}
		if !hasVal {
			bare = true
			continue
		}
		val = strings.TrimSpace(val)
		if i := strings.IndexAny(val, "#;"); i >= 0 {
			val = strings.TrimSpace(val[:i])
		}
		val = strings.Trim(val, `"`)
		switch strings.ToLower(val) {
		case "true", "yes", "on", "1":
			bare = true
		default:
			bare = false
		}
	}
	return bare
}

// isRemote follows git's own rule: anything with "://" is a URL, and a colon
// before the first slash makes an scp-like remote (git@host:repo, host:path).
func isRemote(p string) bool {
	if strings.Contains(p, "://") {
		return true
	}
	colon := strings.IndexByte(p, ':')
	if colon < 0 {
		return false
	}
	slash := strings.IndexByte(p, '/')
	return slash < 0 || colon < slash
}

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// classifyFSError turns a failed filesystem operation on the way to the
// source into the blocker that explains it.
func classifyFSError(p string, err error) error {
	var be *ctoharness.BlockerError
	var fe *fencedError
	switch {
	case errors.As(err, &be):
		return err
	case errors.As(err, &fe):
		return fencedBlock(p, fe)
	case errors.Is(err, errSymlinkLoop), errors.Is(err, syscall.ELOOP):
		return block(ctoharness.BlockSourceSymlink, err,
			"source %s goes through a symlink loop; pass the real directory instead", p)
	case isNotExist(err):
		return block(ctoharness.BlockSourceNotFound, err,
			"source %s does not exist; check the path", p)
	default:
		return block(ctoharness.BlockSourceUnreadable, err,
			"cannot inspect %s; check its permissions", p)
	}
}

func fencedBlock(given string, fe *fencedError) error {
	via := ""
	if fe.path != given {
		via = fmt.Sprintf(" (reached as %s)", fe.path)
	}
	return block(fe.root.code, nil,
		"source %s is inside %s %s%s; the harness never touches it — pass a repository you own outside it",
		given, rootKind(fe.root.code), fe.root.given, via)
}

func rootKind(code ctoharness.BlockerCode) string {
	if code == ctoharness.BlockSourceIsTarget {
		return "target repository root"
	}
	return "external root"
}

func block(code ctoharness.BlockerCode, err error, format string, args ...any) error {
	return ctoharness.Block(code, ctoharness.StepClassify, err, format, args...)
}
