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
func Open(root, gitDir string) (*git.Repository, error) {
	var fs billy.Filesystem = osfs.New(gitDir)
	if common := CommonDir(gitDir); common != gitDir {
		fs = dotgit.NewRepositoryFilesystem(fs, osfs.New(common))
	}
	// Alternates (clone --shared) are absolute paths: go-git resolves them
	// against this filesystem, so it gets the whole one.
	st := filesystem.NewStorageWithOptions(fs, cache.NewObjectLRUDefault(), filesystem.Options{AlternatesFS: osfs.New("/")})
	r, err := git.Open(noConfig{st}, osfs.New(root))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	return r, nil
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
