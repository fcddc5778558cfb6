package gitstatus

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"github.com/go-git/go-git/v5/plumbing/cache"

	"github.com/cto-harness/cto-harness/harness/packread"
)

// Open opens the repository at gitDir (worktree root) for reading objects
// and references. go-git does not get to read the configuration: its
// parser rejects files git reads fine (a key on the section line,
// "[core] bare = false", or a legacy "[branch.main]" header), and v5
// refuses any repository with an extensions section, sparse checkouts
// (extensions.worktreeConfig) included. The harness's own parser
// (LoadConfig) reads the configuration, and CheckConfig has already
// refused every extension that changes how objects or refs are read.
//
// A linked worktree's git directory (a nested repository made by git
// worktree add) keeps its objects and shared refs in the common
// directory its commondir file names.
//
// Objects are read in place (package packread): go-git's storage decodes
// every pack index into the heap on each open, tens of MiB on a long
// history. The packs stay open while anything can read through them (the
// repository, an object or tree it gave) and are released after, so
// callers need not close it.
func Open(root, gitDir string) (*git.Repository, error) {
	var fs billy.Filesystem = osfs.New(gitDir)
	common := CommonDir(gitDir)
	if common != gitDir {
		fs = dotgit.NewRepositoryFilesystem(fs, osfs.New(common))
	}
	dirs, err := ObjectDirs(filepath.Join(common, "objects"))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	objs, err := packread.Open(dirs...)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	st := &packread.Storer{Storage: filesystem.NewStorageWithOptions(fs, cache.NewObjectLRU(cache.MiByte), filesystem.Options{}), Objects: objs}
	r, err := git.Open(noConfig{st}, osfs.New(root))
	if err != nil {
		_ = objs.Close()
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	objs.CloseUnreachable()
	return r, nil
}

// ObjectDirs are the objects directories a repository whose own is
// objects reads: its own, then each one its info/alternates names (read
// by ParseAlternates, as classification reads them), theirs after them,
// five deep at most. A named directory that does not exist is an error,
// as in git.
func ObjectDirs(objects string) ([]string, error) {
	out := []string{objects}
	seen := map[string]bool{filepath.Clean(objects): true}
	for depth, level := 0, []string{objects}; len(level) > 0; depth++ {
		var next []string
		for _, d := range level {
			data, err := os.ReadFile(filepath.Join(d, "info", "alternates"))
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			alts, err := ParseAlternates(data)
			if err != nil {
				return nil, fmt.Errorf("%s/info/alternates: %w", d, err)
			}
			for _, l := range alts {
				if seen[l] {
					continue
				}
				if depth >= 5 {
					return nil, fmt.Errorf("%s names alternates more than five deep (%s)", objects, l)
				}
				if fi, err := os.Stat(l); err != nil || !fi.IsDir() {
					return nil, fmt.Errorf("the alternate object directory %s named by %s is not a directory", l, d)
				}
				seen[l] = true
				out, next = append(out, l), append(next, l)
			}
		}
		level = next
	}
	return out, nil
}

// noConfig is a storer that shows go-git a default configuration instead
// of the repository's: objects and references are all it is read for.
type noConfig struct{ storage.Storer }

func (noConfig) Config() (*config.Config, error) { return config.NewConfig(), nil }

// CommonDir is the directory gitDir shares objects, refs, configuration
// and info/ with: the one its commondir file names (relative to gitDir),
// or gitDir itself.
func CommonDir(gitDir string) string {
	data, err := os.ReadFile(gitDir + "/commondir")
	if err != nil {
		return gitDir
	}
	c := strings.TrimRight(string(data), "\r\n")
	if c == "" {
		return gitDir
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitDir, c)
	}
	return c
}

// GitDirOf is the git directory of the worktree at root: root/.git, or
// the directory a gitfile there names (git init --separate-git-dir, a
// linked worktree). It only reads; what the directory holds is the
// caller's to check.
func GitDirOf(root string) string {
	dotgit := filepath.Join(root, ".git")
	fi, err := os.Lstat(dotgit)
	if err != nil || !fi.Mode().IsRegular() {
		return dotgit
	}
	data, err := os.ReadFile(dotgit)
	if err != nil {
		return dotgit
	}
	line, _, _ := strings.Cut(string(data), "\n")
	target, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "gitdir: ")
	if !ok || target == "" {
		return dotgit
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(root, target)
	}
	return filepath.Clean(target)
}
