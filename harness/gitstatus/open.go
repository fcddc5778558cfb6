package gitstatus

import (
	"fmt"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"

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
func Open(root, gitDir string) (*git.Repository, error) {
	st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault())
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
