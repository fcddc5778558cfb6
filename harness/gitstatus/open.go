package gitstatus

import (
	"fmt"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	format "github.com/go-git/go-git/v5/plumbing/format/config"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/go-git/go-git/v5/plumbing/cache"
)

// Open opens the repository at gitDir (worktree root) for reading objects
// and references. go-git v5 refuses any repository with an extensions
// section, sparse checkouts (extensions.worktreeConfig) included, so when
// there is one the storer hides it from go-git: CheckConfig has already
// refused every extension that changes how objects or refs are read.
func Open(root, gitDir string, cfg *Config) (*git.Repository, error) {
	if len(cfg.Keys("extensions.")) == 0 {
		r, err := git.PlainOpenWithOptions(root, &git.PlainOpenOptions{DetectDotGit: false})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", root, err)
		}
		return r, nil
	}
	st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault())
	r, err := git.Open(noExtensions{st}, osfs.New(root))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	return r, nil
}

// noExtensions is a storer whose configuration has no extensions section.
type noExtensions struct{ storage.Storer }

func (s noExtensions) Config() (*config.Config, error) {
	c, err := s.Storer.Config()
	if err != nil || c.Raw == nil || !c.Raw.HasSection("extensions") {
		return c, err
	}
	cp := *c
	raw := format.New()
	for _, sec := range c.Raw.Sections {
		if sec.Name != "extensions" {
			raw.Sections = append(raw.Sections, sec)
		}
	}
	raw.Comment, raw.Includes = c.Raw.Comment, c.Raw.Includes
	cp.Raw = raw
	return &cp, nil
}
